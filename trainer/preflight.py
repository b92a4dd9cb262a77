"""Checks the launcher runs before any worker starts, so that bad input is one line and exit 2.

Everything here can be decided from the config and the environment alone: the model and dataset
references, the data files, whether the checkpoint root can be written, and whether the newest committed
checkpoint was written with the same training keys. Workers repeat the checks that matter for safety
(probe, config change) because they can also be started without this launcher.
"""

from __future__ import annotations

import glob
import importlib.util
from pathlib import Path

from trainer.checkpoint import CheckpointRoot, probe_error, probe_root
from trainer.config import ConfigError, TrainConfig, config_change_error
from trainer.model import PRESETS


def check(cfg: TrainConfig) -> None:
    """Raise ConfigError (one line, naming the key) for anything that would fail in every worker."""
    _plugin("model", cfg.model) if ":" in cfg.model else _preset(cfg.model)
    if cfg.dataset == "bytes":
        _data_paths(cfg.data_paths)
    elif ":" in cfg.dataset:
        _plugin("dataset", cfg.dataset)
    if cfg.checkpoint.uri:
        _checkpoint(cfg)


def _preset(name: str) -> None:
    if name not in PRESETS:
        raise ConfigError(
            f"config error: model: unknown {name!r}; presets: {', '.join(PRESETS)}, or module:function"
        )


def _plugin(key: str, ref: str) -> None:
    module = ref.partition(":")[0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or not a package
        found = False
    if not found:
        raise ConfigError(f"config error: {key}: cannot load {ref!r}: no module named {module!r}")


def _data_paths(paths: list[str]) -> None:
    if not paths:
        raise ConfigError("config error: dataPaths: required when dataset is 'bytes'")
    for p in paths:
        if not glob.glob(p) and not Path(p).is_file():
            what = "no file matches" if glob.has_magic(p) else "no such file"
            raise ConfigError(f"config error: dataPaths: {what}: {p}")


def _checkpoint(cfg: TrainConfig) -> None:
    uri = cfg.checkpoint.uri or ""
    try:
        probe_root(uri)
    except Exception as e:  # OSError, PermissionError, botocore/gcsfs errors: all mean "cannot write"
        raise ConfigError(probe_error(uri, e)) from None
    if cfg.allow_config_change:
        return  # the workers log the change as an event
    newest = CheckpointRoot(uri, keep=cfg.checkpoint.keep).newest_committed()
    if newest is None or newest.manifest.get("config_hash") == cfg.training_hash():
        return
    raise ConfigError(
        config_change_error(newest.step, uri, newest.manifest.get("config"), cfg.training_config())
    )
