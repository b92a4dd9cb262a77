"""The trainer's contract with the job that runs it (torch-free, so the Pulumi side may import it).

PLACEHOLDER on branch i11-arch: the trainer engineer owns this module (branch i11-trainer); this copy
only carries the names the job component is written against, so the components branch tests green on
its own. At merge, i11-trainer's version replaces it.

Exit codes of ``python -m trainer.launch`` (the pod's exit code) and what the Job does with them:

>>> (EXIT_OK, EXIT_CONFIG, EXIT_PREEMPTED, EXIT_HANG, EXIT_CHECKPOINT_SAVE, EXIT_CRASH)
(0, 2, 143, 124, 74, 1)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

EXIT_OK = 0  # training finished
EXIT_CRASH = 1  # any other code is a crash too
EXIT_CONFIG = 2  # configuration error: never retry
EXIT_CHECKPOINT_SAVE = 74  # checkpoints failed to save repeatedly
EXIT_HANG = 124  # the watchdog found no progress
EXIT_PREEMPTED = 143  # preempted after a committed checkpoint: retry, not a failure

ENV_CONFIG = "TRAINPLANE_CONFIG"
ENV_CHECKPOINT_URI = "TRAINPLANE_CHECKPOINT_URI"
ENV_METRICS_PORT = "TRAINPLANE_METRICS_PORT"
ENV_JOB_NAME = "TRAINPLANE_JOB_NAME"
ENV_GRACE_S = "TRAINPLANE_GRACE_S"
ENV_LAUNCH_DIR = "TRAINPLANE_LAUNCH_DIR"


def validate_trainer_config(raw: dict[str, Any]) -> list[str]:
    """The problems of a job's `trainer:` block, one line each, rooted at ``trainer``; [] when valid.

    >>> validate_trainer_config({"globalBatchSize": 8, "microBatchSize": 2})
    []
    >>> validate_trainer_config({"globalBatchSize": 8, "microBatchSize": 3})
    ['trainer: globalBatchSize 8 is not a multiple of microBatchSize 3']
    """
    from trainer.config import ConfigError, TrainConfig, _normalise

    try:
        TrainConfig.model_validate(_normalise(raw))
    except ConfigError as e:
        return [f"trainer: {str(e).removeprefix('config error: ')}"]
    except ValidationError as e:
        return format_validation_error(e, TrainConfig, "trainer")
    return []


def _loc_path(root: str, loc: tuple[Any, ...]) -> str:
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_./-]+", str(part)):
            out += f".{part}"
        else:  # keys with spaces or control characters are shown quoted, so the line stays one line
            out += f"[{str(part)!r}]"
    return out


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that owns the last key of `loc`, to suggest the key that was meant."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        fields = {(f.alias or n): f for n, f in current.model_fields.items()}
        info = fields.get(part)
        if info is None:
            return None
        current = _inner_model(info.annotation)
    return current


def _unknown_key(path: str, loc: tuple[Any, ...], model: type[BaseModel]) -> str:
    owner = _model_at(model, loc)
    known = sorted((f.alias or n) for n, f in owner.model_fields.items()) if owner else []
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"{path}: unknown key; did you mean {close[0]!r}?"
    return f"{path}: unknown key" + (f"; known: {', '.join(known)}" if known else "")


def _one_line(e: Mapping[str, Any], path: str, model: type[BaseModel]) -> str:
    kind, given = e["type"], e.get("input")
    if kind == "extra_forbidden":
        return _unknown_key(path, tuple(e["loc"]), model)
    if kind == "missing":
        return f"{path}: required"
    if kind == "literal_error":
        return f"{path}: {given!r} is not allowed; allowed: {e.get('ctx', {}).get('expected', '')}"
    if kind == "value_error":
        return f"{path}: {str(e['msg']).removeprefix('Value error, ')}"
    if kind == "string_pattern_mismatch":
        pattern = e["ctx"]["pattern"]
        words: Mapping[str, str] = getattr(model, "pattern_words", None) or {}
        return f"{path}: {given!r} is not valid here; expected {words.get(pattern, f'the form {pattern}')}"
    shown = f" (got {given!r})" if given is not None and not isinstance(given, dict | list) else ""
    return f"{path}: {e['msg']}{shown}"


def format_validation_error(err: ValidationError, model: type[BaseModel], root: str) -> list[str]:
    """One line per pydantic error, each naming its key path under `root` (the one error formatter).

    A model may carry a `pattern_words` mapping (regex -> words) to describe its string patterns.
    """
    return [_one_line(e, _loc_path(root, tuple(e["loc"])), model) for e in err.errors(include_url=False)]
