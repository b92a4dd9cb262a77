"""Trainer configuration: one pydantic model, loaded from YAML, environment and flags.

Precedence (later wins): defaults < YAML file (``--config`` or ``TRAINPLANE_CONFIG``) < environment
(``TRAINPLANE_CHECKPOINT_URI``, ``TRAINPLANE_METRICS_PORT``, ``TRAINPLANE_JOB_NAME``) < ``--set key=value``.
Keys are snake_case; camelCase aliases are accepted because job stacks write ``globalBatchSize``.
A YAML file may hold the fields at top level or under a ``trainer:`` key (the job stack layout).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

ENV_CONFIG = "TRAINPLANE_CONFIG"
ENV_CHECKPOINT_URI = "TRAINPLANE_CHECKPOINT_URI"
ENV_METRICS_PORT = "TRAINPLANE_METRICS_PORT"
ENV_JOB_NAME = "TRAINPLANE_JOB_NAME"
ENV_ALLOW_CONFIG_CHANGE = "TRAINPLANE_ALLOW_CONFIG_CHANGE"

# The fields that define the training trajectory (not steps, ports, paths, workers): hashed, and stored in
# every checkpoint manifest so that a resume with other values is refused naming the keys.
TRAINING_KEYS = (
    "model",
    "model_args",
    "dataset",
    "data_paths",
    "seq_len",
    "global_batch_size",
    "lr",
    "min_lr_ratio",
    "warmup_steps",
    "weight_decay",
    "grad_clip",
    "dropout",
    "seed",
)


class ConfigError(Exception):
    """A configuration problem; the message is one line and names the key."""


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_camel),
        frozen=True,
    )


class CheckpointConfig(_Model):
    uri: str | None = Field(None, description="root: a path, file://, s3:// or gs://; None disables")
    interval_steps: int = Field(100, ge=1)
    keep: int = Field(3, ge=2, description="newest K committed checkpoints kept; >= 2 (newest may be torn)")
    async_save: bool = True
    # fsspec writer threads per rank (object stores gain from parallel uploads)
    thread_count: int = Field(4, ge=1)
    # Saves that fail in a row (collectively: any rank's failure fails the save) before the run ends with
    # EXIT_SAVE_FAILED; a transient object-store error should not end a run, a dead root must.
    max_consecutive_failures: int = Field(3, ge=1)


class WatchdogConfig(_Model):
    """Hang detection: no step for max(factor x median recent step time, floorSeconds) -> stacks, exit 124."""

    enabled: bool = True
    factor: float = Field(10.0, gt=1)
    floor_seconds: float = Field(300.0, gt=0)
    # Steps each incarnation completes before the watchdog arms: start-up, torch.compile, first steps.
    warmup_steps: int = Field(3, ge=1)
    window: int = Field(100, ge=1, description="recent steps the median is taken over")
    # While a checkpoint is saved or loaded the step limit does not apply; this one does.
    save_timeout_seconds: float = Field(1800.0, gt=0)
    # The rank serving metrics keeps serving this long after a hang, so Prometheus scrapes the count.
    export_grace_seconds: float = Field(20.0, ge=0)


class TrainConfig(_Model):
    job_name: str = "trainplane"
    model: str = Field("tiny", description="preset name (tiny, mini, gpt-small) or 'module:function'")
    model_args: dict[str, Any] = Field(default_factory=dict)
    dataset: str = Field("synthetic", description="'synthetic', 'bytes' or 'module:function'")
    data_paths: list[str] = Field(default_factory=list, description="files or globs for dataset=bytes")
    seq_len: int = Field(64, ge=2)
    global_batch_size: int = Field(8, ge=1)
    micro_batch_size: int = Field(2, ge=1)
    world_sizes: list[int] | None = Field(None, description="world sizes this job may run at")
    steps: int = Field(100, ge=1)
    lr: float = Field(3e-3, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    warmup_steps: int = Field(10, ge=0)
    weight_decay: float = Field(0.1, ge=0)
    grad_clip: float = Field(1.0, ge=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    seed: int = 1234
    parallelism: Literal["ddp", "fsdp"] = "ddp"
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    compile: bool = False
    num_workers: int = Field(0, ge=0)
    threads: int | None = Field(None, ge=1, description="torch intra-op threads per process")
    checkpoint: CheckpointConfig = CheckpointConfig()
    watchdog: WatchdogConfig = WatchdogConfig()
    # Resume from a checkpoint written with other training keys (refused otherwise); logged as an event.
    allow_config_change: bool = False
    metrics_port: int = Field(0, ge=0, le=65535, description="0 disables the endpoint")
    log_interval: int = Field(10, ge=1)
    # Debug: each rank appends the dataset indices it trained on, per step, to <dir>/samples-*.jsonl.
    record_samples: str | None = None

    @model_validator(mode="after")
    def _batch_divides(self) -> TrainConfig:
        gb, mb = self.global_batch_size, self.micro_batch_size
        if gb % mb:
            raise ValueError(f"globalBatchSize {gb} is not a multiple of microBatchSize {mb}")
        if self.world_sizes is not None:
            fits = [w for w in self.world_sizes if w >= 1 and gb % (mb * w) == 0]
            if not fits:
                raise ValueError(
                    f"globalBatchSize {gb} = microBatchSize {mb} x accumulation x world size has no "
                    f"solution for any allowed world size {self.world_sizes}"
                )
        return self

    def accumulation(self, world_size: int) -> int:
        """Micro-batches per rank per step so that the global batch holds at this world size."""
        per_step = self.micro_batch_size * world_size
        if self.global_batch_size % per_step:
            raise ConfigError(
                f"config error: globalBatchSize: {self.global_batch_size} is not divisible by "
                f"microBatchSize {self.micro_batch_size} x world size {world_size}"
            )
        return self.global_batch_size // per_step

    def training_config(self) -> dict[str, Any]:
        """The trajectory-defining keys and values, JSON-ready (stored in checkpoint manifests)."""
        return json.loads(json.dumps({k: getattr(self, k) for k in TRAINING_KEYS}, default=str))

    def training_hash(self) -> str:
        """Hash of the fields that define the training trajectory (not steps, ports, paths, workers)."""
        blob = json.dumps(self.training_config(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def config_change_error(step: int, uri: str, stored: Any, current: dict[str, Any]) -> str:
    """The one-line refusal to resume from a checkpoint written with other training keys."""
    changes = (
        config_changes(stored, current)
        if isinstance(stored, dict)
        else ["(keys not recorded: the checkpoint predates key recording)"]
    )
    return (
        f"config error: training config changed since checkpoint step {step} ({uri}): "
        f"{', '.join(changes)}; set allowConfigChange=true to resume anyway"
    )


def config_changes(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """'key (old -> new)' for each training key whose value differs, camelCase as users write them."""

    def short(v: Any) -> str:
        text = json.dumps(v, default=str)
        return text if len(text) <= 40 else text[:37] + "..."

    return [
        f"{_camel(k)} ({short(stored.get(k))} -> {short(current.get(k))})"
        for k in sorted(set(stored) | set(current))
        if stored.get(k) != current.get(k)
    ]


def _format_error(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(_camel(str(p)) for p in e["loc"]) or "trainer"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        parts.append(
            f"{loc}: {msg}"
            + (
                f" (got {e['input']!r})"
                if e["type"] != "extra_forbidden" and not isinstance(e["input"], dict)
                else ""
            )
        )
    return "config error: " + "; ".join(parts)


def _camel(key: str) -> str:
    return to_camel(key) if "_" in key else key


def _parse_scalar(text: str) -> Any:
    # YAML scalars give ints, floats, bools and lists the way a user expects from a flag.
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"config error: {dotted}: cannot set a key below a scalar")
    node[keys[-1]] = value


def _normalise(tree: dict[str, Any]) -> dict[str, Any]:
    # Accept camelCase and snake_case side by side; merging needs one spelling per key.
    out: dict[str, Any] = {}
    for k, v in tree.items():
        snake = "".join("_" + c.lower() if c.isupper() else c for c in str(k))
        out[snake] = _normalise(v) if isinstance(v, dict) and snake != "model_args" else v
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict) and k != "model_args":
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> TrainConfig:
    """Build and validate the config. Raises ConfigError with a one-line message naming the key."""
    env = dict(os.environ) if env is None else env
    tree: dict[str, Any] = {}
    path = path or env.get(ENV_CONFIG)
    if path:
        try:
            raw = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as e:
            raise ConfigError(f"config error: cannot read config file {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            first = str(e).splitlines()[0]
            raise ConfigError(f"config error: {path} is not valid YAML: {first}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config error: {path}: expected a mapping at top level")
        if isinstance(raw.get("trainer"), dict):
            raw = raw["trainer"]
        tree = _normalise(raw)
    from_env: dict[str, Any] = {}
    if env.get(ENV_CHECKPOINT_URI):
        from_env["checkpoint"] = {"uri": env[ENV_CHECKPOINT_URI]}
    if env.get(ENV_METRICS_PORT):
        from_env["metrics_port"] = _parse_scalar(env[ENV_METRICS_PORT])
    if env.get(ENV_JOB_NAME):
        from_env["job_name"] = env[ENV_JOB_NAME]
    if env.get(ENV_ALLOW_CONFIG_CHANGE):
        from_env["allow_config_change"] = _parse_scalar(env[ENV_ALLOW_CONFIG_CHANGE])
    _merge(tree, _normalise(from_env))
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"config error: --set {item!r}: expected key=value")
        nested: dict[str, Any] = {}
        _set_path(nested, key.strip(), _parse_scalar(value))
        _merge(tree, _normalise(nested))
    try:
        return TrainConfig.model_validate(tree)
    except ValidationError as e:
        raise ConfigError(_format_error(e)) from None
