"""Trainer configuration: one pydantic model, loaded from YAML, environment and flags.

Precedence (later wins): defaults < YAML file (``--config`` or ``TRAINPLANE_CONFIG``) < environment
(``TRAINPLANE_CHECKPOINT_URI``, ``TRAINPLANE_METRICS_PORT``, ``TRAINPLANE_JOB_NAME``,
``TRAINPLANE_ALLOW_CONFIG_CHANGE``) < ``--set key=value``. Fields are snake_case in Python; users write
camelCase (job stacks write ``globalBatchSize``) or snake_case. Every layer is normalised to camelCase,
the spelling of the validation aliases, before the layers are merged, so an error names the key the way
a job's YAML spells it. A YAML file may hold the fields at top level or under a ``trainer:`` key (the job
stack layout). Errors are formatted by ``trainer.contract.format_validation_error``, the project's one
formatter; the job stack validates its block with ``validate_trainer_config`` (here).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasGenerator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from trainer.contract import (
    CONFIG_SECTION,
    ENV_ALLOW_CONFIG_CHANGE,
    ENV_CHECKPOINT_URI,
    ENV_CONFIG,
    ENV_JOB_NAME,
    ENV_METRICS_PORT,
    format_validation_error,
)

MODEL_ARGS = "modelArgs"  # free-form (a model factory's own keys): never renamed or merged key by key

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
    uri: str | None = Field(default=None, description="root: a path, file://, s3:// or gs://; None disables")
    interval_steps: int = Field(default=100, ge=1)
    keep: int = Field(
        default=3, ge=2, description="newest K committed checkpoints kept; >= 2 (newest may be torn)"
    )
    async_save: bool = True
    # fsspec writer threads per rank (object stores gain from parallel uploads)
    thread_count: int = Field(default=4, ge=1)
    # Saves that fail in a row (collectively: any rank's failure fails the save) before the run ends with
    # EXIT_SAVE_FAILED; a transient object-store error should not end a run, a dead root must.
    max_consecutive_failures: int = Field(default=3, ge=1)


class WatchdogConfig(_Model):
    """Hang detection: no step for max(factor x median recent step time, floorSeconds) -> stacks, exit 124."""

    enabled: bool = True
    factor: float = Field(default=10.0, gt=1)
    floor_seconds: float = Field(default=300.0, gt=0)
    # Steps each incarnation completes before the watchdog arms: start-up, torch.compile, first steps.
    warmup_steps: int = Field(default=3, ge=1)
    window: int = Field(default=100, ge=1, description="recent steps the median is taken over")
    # While a checkpoint is saved or loaded the step limit does not apply; this one does.
    save_timeout_seconds: float = Field(default=1800.0, gt=0)
    # The rank serving metrics keeps serving this long after a hang, so Prometheus scrapes the count.
    export_grace_seconds: float = Field(default=20.0, ge=0)


class TrainConfig(_Model):
    job_name: str = "trainplane"
    model: str = Field(
        default="tiny", description="preset name (tiny, mini, gpt-small, gpt-1b) or 'module:function'"
    )
    model_args: dict[str, Any] = Field(default_factory=dict)
    dataset: str = Field(default="synthetic", description="'synthetic', 'bytes' or 'module:function'")
    data_paths: list[str] = Field(default_factory=list, description="files or globs for dataset=bytes")
    seq_len: int = Field(default=64, ge=2)
    global_batch_size: int = Field(default=8, ge=1)
    micro_batch_size: int = Field(default=2, ge=1)
    world_sizes: list[int] | None = Field(default=None, description="world sizes this job may run at")
    steps: int = Field(default=100, ge=1)
    lr: float = Field(default=3e-3, gt=0)
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)
    warmup_steps: int = Field(default=10, ge=0)
    weight_decay: float = Field(default=0.1, ge=0)
    grad_clip: float = Field(default=1.0, ge=0)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    seed: int = 1234
    parallelism: Literal["ddp", "fsdp"] = "ddp"
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    # None: on a GPU, off on a CPU (trainer.build.compiles).
    compile: bool | None = None
    # torch.compile's backends for training that need nothing beyond torch (of the 23 that torch 2.13's
    # torch._dynamo.list_backends(exclude_tags=()) names, the rest are debugging, testing or optional
    # openxla/tvm): a misspelt one is refused at load, not at the first forward of a job holding its GPUs.
    compile_backend: Literal["inductor", "cudagraphs", "aot_eager", "eager"] = Field(
        default="inductor", description="torch.compile backend (aot_eager: the same tracing, no C++ codegen)"
    )
    # Steps between the ranks' agreements on finished steps (loss, preemption signal, compute times: one
    # host sync and one all-reduce; trainer/vote.py). None: every step on a CPU, where there is no queue of
    # kernels for the sync to drain; on a GPU as many steps as take about a second, re-measured at each
    # vote. A preemption signal is acted on at the next vote: no step is lost either way.
    vote_every_steps: int | None = Field(default=None, ge=1, le=100)
    num_workers: int = Field(default=0, ge=0)
    threads: int | None = Field(default=None, ge=1, description="torch intra-op threads per process")
    checkpoint: CheckpointConfig = CheckpointConfig()
    watchdog: WatchdogConfig = WatchdogConfig()
    # Resume from a checkpoint written with other training keys (refused otherwise); logged as an event.
    allow_config_change: bool = False
    metrics_port: int = Field(default=0, ge=0, le=65535, description="0 disables the endpoint")
    log_interval: int = Field(default=10, ge=1)
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

    def vote_every(self, cuda: bool) -> int | None:
        """Steps between the ranks' votes; None: about a second of steps, measured (on a GPU)."""
        if self.vote_every_steps is not None:
            return self.vote_every_steps
        return None if cuda else 1

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


def normalise_keys(tree: dict[str, Any]) -> dict[str, Any]:
    """The same keys in camelCase (``global_batch_size`` and ``globalBatchSize`` -> ``globalBatchSize``),
    nested mappings too, except inside ``modelArgs``; where both spellings are given, the later wins.

    >>> normalise_keys({"seq_len": 8, "checkpoint": {"interval_steps": 5}, "model_args": {"n_layer": 1}})
    {'seqLen': 8, 'checkpoint': {'intervalSteps': 5}, 'modelArgs': {'n_layer': 1}}
    """
    out: dict[str, Any] = {}
    for k, v in tree.items():
        snake = "".join("_" + c.lower() if c.isupper() else c for c in str(k))
        key = _camel(snake)
        out[key] = normalise_keys(v) if isinstance(v, dict) and key != MODEL_ARGS else v
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict) and k != MODEL_ARGS:
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def _file_layer(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as e:
        raise ConfigError(f"config error: cannot read config file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0]
        raise ConfigError(f"config error: {path} is not valid YAML: {first}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config error: {path}: expected a mapping at top level")
    if isinstance(raw.get(CONFIG_SECTION), dict):
        raw = raw[CONFIG_SECTION]
    return normalise_keys(raw)


def _env_layer(env: dict[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    if env.get(ENV_CHECKPOINT_URI):
        layer["checkpoint"] = {"uri": env[ENV_CHECKPOINT_URI]}
    if env.get(ENV_METRICS_PORT):
        layer["metricsPort"] = _parse_scalar(env[ENV_METRICS_PORT])
    if env.get(ENV_JOB_NAME):
        layer["jobName"] = env[ENV_JOB_NAME]
    if env.get(ENV_ALLOW_CONFIG_CHANGE):
        layer["allowConfigChange"] = _parse_scalar(env[ENV_ALLOW_CONFIG_CHANGE])
    return layer


def _flag_layer(item: str) -> dict[str, Any]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"config error: --set {item!r}: expected key=value")
    nested: dict[str, Any] = {}
    _set_path(nested, key.strip(), _parse_scalar(value))
    return normalise_keys(nested)


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> TrainConfig:
    """Build and validate the config. Raises ConfigError with a one-line message naming the key."""
    env = dict(os.environ) if env is None else env
    path = path or env.get(ENV_CONFIG)
    tree = _file_layer(path) if path else {}
    _merge(tree, _env_layer(env))
    for item in overrides or []:
        _merge(tree, _flag_layer(item))
    try:
        return TrainConfig.model_validate(tree)
    except ValidationError as e:
        raise ConfigError("config error: " + "; ".join(format_validation_error(e, TrainConfig, ""))) from None


def validate_trainer_config(raw: object, root: str = CONFIG_SECTION) -> list[str]:
    """The problems of a ``trainer:`` block, one line each with its key path under ``root``; [] if none.

    The same validation the trainer runs at start-up (camelCase or snake_case keys; the job stack's
    additions such as ``worldSizes`` included), so a block that passes here is not refused by the pods.

    >>> validate_trainer_config({"model": "gpt-small", "globalBatchSize": 512, "microBatchSize": 8})
    []
    >>> validate_trainer_config({"globalBatchSise": 512})
    ["trainer.globalBatchSise: unknown key; did you mean 'globalBatchSize'?"]
    >>> validate_trainer_config({"checkpoint": {"keep": 1}, "precision": "fp8"}, root="job.trainer")
    ["job.trainer.precision: 'fp8' is not allowed; allowed: 'auto', 'fp32' or 'bf16'", \
'job.trainer.checkpoint.keep: Input should be greater than or equal to 2 (got 1)']
    >>> validate_trainer_config({"globalBatchSize": 24, "microBatchSize": 8, "worldSizes": [2, 4]})
    ['trainer: globalBatchSize 24 = microBatchSize 8 x accumulation x world size has no solution for \
any allowed world size [2, 4]']
    """
    if not isinstance(raw, Mapping):
        return [f"{root}: expected a mapping of trainer keys, got {type(raw).__name__}"]
    try:
        TrainConfig.model_validate(normalise_keys(dict(raw)))
    except ValidationError as e:
        return format_validation_error(e, TrainConfig, root)
    return []


def parse_args(argv: list[str] | None) -> tuple[str | None, list[str]]:
    """``--config FILE``, ``--set key=value`` (repeatable) and ``--any-key value`` as a shorthand for set.

    >>> parse_args(["--config", "c.yaml", "--steps", "5", "--checkpoint.async-save=false"])
    ('c.yaml', ['steps=5', 'checkpoint.async_save=false'])
    """
    p = argparse.ArgumentParser(
        prog="python -m trainer", description="Train; every config key can be given as --key value."
    )
    p.add_argument("--config", help=f"YAML file (default: ${ENV_CONFIG})")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="sets",
        help="override one key, dotted for nested (checkpoint.uri=s3://b/run)",
    )
    args, rest = p.parse_known_args(argv)
    return args.config, [*args.sets, *_shorthand(rest)]


def _shorthand(rest: list[str]) -> list[str]:
    sets: list[str] = []
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("--"):
            raise ConfigError(f"config error: unexpected argument {tok!r}")
        key, eq, val = tok[2:].partition("=")
        if not eq:
            if i + 1 >= len(rest):
                raise ConfigError(f"config error: {tok}: missing value")
            val, i = rest[i + 1], i + 1
        sets.append(f"{key.replace('-', '_')}={val}")
        i += 1
    return sets
