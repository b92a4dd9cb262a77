"""The trainer's contract with the platform: exit codes, environment variables, config error lines.

The job stack (``components/``) imports this module at plan time to build the pod's failure policy and set
the container's environment, and ``trainer.config.validate_trainer_config`` (which formats its errors
with ``format_validation_error`` here) to reject a bad ``trainer:`` block before anything is deployed; the
trainer, its launcher and its tests import the same names. Both modules therefore stay light: standard
library, pydantic and yaml only, never torch (a test imports them in a fresh interpreter and checks).
This module imports nothing of the trainer's: ``trainer.config`` imports it, not the other way round.

Exit codes of ``python -m trainer.launch`` (workers use the same ones), and what the platform does:

==========================  =====  ===================================================  ===========
name                        code   meaning                                              platform
==========================  =====  ===================================================  ===========
``EXIT_OK``                 0      complete: training finished, final checkpoint        success
                                   committed (when a root is set)
``EXIT_PREEMPTED``          143    preempted, and a checkpoint committed first;          retry, not
                                   never used without that commit                       counted
``EXIT_CONFIG``             2      configuration error (one line on stderr): a bad      fail the
                                   key, a root that cannot be written, a changed        job now
                                   training config, no loadable checkpoint left
``EXIT_HANG``               124    the watchdog saw no step in time (as timeout(1))     retry,
                                                                                        counted
``EXIT_SAVE_FAILED``        74     checkpoint saves kept failing, or the final or       retry,
                                   preemption save failed (sysexits.h EX_IOERR)         counted
``EXIT_PEER_LOST``          75     another node of the job vanished (its collective     retry, not
                                   or rendezvous broke) while this one was healthy;     counted
                                   at most ``TRAINPLANE_MAX_PEER_LOSSES`` times in a
                                   row without a new committed checkpoint, then 1
                                   (sysexits.h EX_TEMPFAIL)
``EXIT_CRASH``              1      anything else (also a preemption with nothing        retry,
                                   committed); other codes are a worker's own           counted
==========================  =====  ===================================================  ===========

>>> exit_action(EXIT_PREEMPTED), exit_action(EXIT_CONFIG), exit_action(EXIT_HANG), exit_action(137)
('retry', 'fail', 'count', 'count')
>>> exit_action(EXIT_PEER_LOST)
'retry'
"""

from __future__ import annotations

import difflib
import re
import signal
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ValidationError

from contract.exits import (
    EXIT_CONFIG as EXIT_CONFIG,
)
from contract.exits import (
    EXIT_CRASH as EXIT_CRASH,
)
from contract.exits import (
    EXIT_HANG as EXIT_HANG,
)
from contract.exits import (
    EXIT_OK as EXIT_OK,
)
from contract.exits import (
    EXIT_PEER_LOST as EXIT_PEER_LOST,
)
from contract.exits import (
    EXIT_PREEMPTED as EXIT_PREEMPTED,
)
from contract.exits import (
    EXIT_SAVE_FAILED as EXIT_SAVE_FAILED,
)

# ---- what the platform does with each exit code (the codes: contract/exits.py) ---------------------
# For the job's failure policy (Kubernetes podFailurePolicy: Ignore, FailJob; everything else Count).
RETRY_WITHOUT_COUNTING: Final[tuple[int, ...]] = (EXIT_PREEMPTED,)
FAIL_JOB_NOW: Final[tuple[int, ...]] = (EXIT_CONFIG,)
# Knock-on exits of a lost peer node (spot reclaim, node failure): retried without counting, in a rule of
# their own (the launcher bounds them: TRAINPLANE_MAX_PEER_LOSSES in a row without progress, then 1).
RETRY_PEER_LOST: Final[tuple[int, ...]] = (EXIT_PEER_LOST,)
# Named failures that count against the retry budget; any other non-zero code counts as well.
RETRY_COUNTING: Final[tuple[int, ...]] = (EXIT_CRASH, EXIT_SAVE_FAILED, EXIT_HANG)

ExitAction = Literal["success", "retry", "fail", "count"]


def exit_action(code: int) -> ExitAction:
    """What the platform does with a pod that exited with ``code``.

    ``success``; ``retry`` without counting it as a failure; ``fail`` the job now (retrying cannot
    help); ``count`` it against the retry budget and retry.

    >>> [exit_action(c) for c in (EXIT_OK, EXIT_PREEMPTED, EXIT_CONFIG, EXIT_SAVE_FAILED, EXIT_CRASH)]
    ['success', 'retry', 'fail', 'count', 'count']
    """
    if code == EXIT_OK:
        return "success"
    if code in RETRY_WITHOUT_COUNTING or code in RETRY_PEER_LOST:
        return "retry"
    return "fail" if code in FAIL_JOB_NOW else "count"


# What each code means, as the table above says it (the launcher's exit summary line prints it).
EXIT_MEANINGS: Final[Mapping[int, str]] = {
    EXIT_OK: "complete",
    EXIT_PREEMPTED: "preempted after a committed checkpoint",
    EXIT_CONFIG: "configuration error",
    EXIT_HANG: "hang: the watchdog saw no step in time",
    EXIT_SAVE_FAILED: "checkpoint saves failed",
    EXIT_CRASH: "crash",
    EXIT_PEER_LOST: "a peer node was lost (restart not counted, bounded by TRAINPLANE_MAX_PEER_LOSSES)",
}


def exit_meaning(code: int) -> str:
    """The meaning of an exit code of the launcher or a worker.

    >>> exit_meaning(EXIT_PREEMPTED), exit_meaning(137), exit_meaning(7)
    ('preempted after a committed checkpoint', 'a worker was killed by SIGKILL', "a worker's own exit code")
    """
    if code in EXIT_MEANINGS:
        return EXIT_MEANINGS[code]
    if 128 < code < 128 + 65:
        try:
            return f"a worker was killed by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return "a worker's own exit code"


# ---- environment ---------------------------------------------------------------------------------
# Set by the job stack on the trainer container.
ENV_CONFIG: Final = "TRAINPLANE_CONFIG"  # path of the YAML config (instead of --config)
ENV_JOB_NAME: Final = "TRAINPLANE_JOB_NAME"  # jobName
ENV_METRICS_PORT: Final = "TRAINPLANE_METRICS_PORT"  # metricsPort
ENV_CHECKPOINT_URI: Final = "TRAINPLANE_CHECKPOINT_URI"  # checkpoint.uri
ENV_ALLOW_CONFIG_CHANGE: Final = "TRAINPLANE_ALLOW_CONFIG_CHANGE"  # allowConfigChange
# Launcher: seconds the workers get to checkpoint after SIGTERM before SIGKILL (torchrun's
# --shutdown-timeout); keep it below the pod's terminationGracePeriodSeconds.
ENV_GRACE_S: Final = "TRAINPLANE_GRACE_S"
DEFAULT_GRACE_S: Final = 60
# A shell script the launcher sources before starting workers (a fabric's NCCL settings, e.g. GKE gIB's
# set_nccl_env.sh); the variables it sets reach every worker.
ENV_SCRIPT: Final = "TRAINPLANE_ENV_SCRIPT"
# Launcher: how many peer losses in a row, without a new committed checkpoint, exit uncounted (75) before
# the next one is a counted crash (1). Counted per node in the checkpoint root (trainer/peerloss.py).
ENV_MAX_PEER_LOSSES: Final = "TRAINPLANE_MAX_PEER_LOSSES"
DEFAULT_MAX_PEER_LOSSES: Final = 3
PLATFORM_ENV: Final[tuple[str, ...]] = (
    ENV_CONFIG,
    ENV_JOB_NAME,
    ENV_METRICS_PORT,
    ENV_CHECKPOINT_URI,
    ENV_ALLOW_CONFIG_CHANGE,
    ENV_GRACE_S,
    ENV_SCRIPT,
)
# Set by the launcher for its workers; the platform never sets these.
ENV_LAUNCH_DIR: Final = "TRAINPLANE_LAUNCH_DIR"  # workers leave status markers there
ENV_LAUNCHER_PID: Final = "TRAINPLANE_LAUNCHER_PID"  # workers die when this process does
# Launcher: "0" starts every worker as a fresh interpreter instead of forking it from the launcher's zygote
# (trainer/zygote.py).
ENV_ZYGOTE: Final = "TRAINPLANE_ZYGOTE"
# Tests only: seconds rank 0 waits between DCP finishing and writing a synchronous save's manifest.
ENV_FAULT_COMMIT_DELAY: Final = "TRAINPLANE_FAULT_COMMIT_DELAY_S"
# Tests only: "background" stages async saves with DCP's DefaultStager in its own thread on CPU too (the
# path GPUs take), instead of the synchronous CPU stager.
ENV_CKPT_STAGING: Final = "TRAINPLANE_CKPT_STAGING"
# Seconds between writes of the goodput high-water mark (trainer/goodput.py; default 30, tests use 0).
ENV_HIGH_WATER_INTERVAL: Final = "TRAINPLANE_HIGH_WATER_INTERVAL_S"

# The config file the job stack writes holds the trainer's keys under this top-level key.
CONFIG_SECTION: Final = "trainer"


# ---- config validation (the model and validate_trainer_config are trainer/config.py's) --------------
def format_validation_error(
    err: ValidationError,
    model: type[BaseModel],
    root: str,
    *,
    pattern_words: Mapping[str, str] | None = None,
) -> list[str]:
    """One line per problem in ``err``: the key path under ``root`` (``a.b[2].c``), then what is wrong.

    ``model`` is the model that was validated (to suggest the key that was meant); ``pattern_words``
    describes regular expressions of ``Field(pattern=...)`` in words. An empty ``root`` leaves paths
    bare (``checkpoint.keep``). Keys with spaces or control characters are quoted, so a line is always
    one line.

    >>> from pydantic import Field
    >>> class Pool(BaseModel):
    ...     model_config = {"extra": "forbid"}
    ...     name: str = Field(pattern=r"^[a-z]+$")
    ...     size: int = Field(1, ge=1)
    >>> class Spec(BaseModel):
    ...     pools: list[Pool]
    >>> try:
    ...     Spec.model_validate({"pools": [{"name": "ok"}, {"name": "Bad!", "sise": 2, "size": 0}]})
    ... except ValidationError as e:
    ...     for line in format_validation_error(e, Spec, "platform", pattern_words={"^[a-z]+$": "a-z"}):
    ...         print(line)
    platform.pools[1].name: 'Bad!' is not valid here; expected a-z
    platform.pools[1].size: Input should be greater than or equal to 1 (got 0)
    platform.pools[1].sise: unknown key; did you mean 'size'?
    """
    words = pattern_words or {}
    return [_one_line(_problem(e, model, root, words)) for e in err.errors(include_url=False)]


def _problem(e: Any, model: type[BaseModel], root: str, words: Mapping[str, str]) -> str:
    loc = tuple(e["loc"])
    kind, given = e["type"], e.get("input")
    if kind == "extra_forbidden":
        text = f"unknown key{_suggestion(model, loc)}"
    elif kind == "missing":
        text = "required"
    elif kind == "literal_error":
        text = f"{given!r} is not allowed; allowed: {e.get('ctx', {}).get('expected', '')}"
    elif kind == "value_error":
        text = str(e["msg"]).removeprefix("Value error, ")
    elif kind == "string_pattern_mismatch":
        pattern = e["ctx"]["pattern"]
        text = f"{given!r} is not valid here; expected {words.get(pattern, f'the form {pattern}')}"
    else:
        shown = f" (got {given!r})" if given is not None and not isinstance(given, dict | list) else ""
        text = f"{e['msg']}{shown}"
    path = _loc_path(root, loc)
    return f"{path}: {text}" if path else text


def _suggestion(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    owner = _model_at(model, loc)
    known = sorted(_shown_key(n, f) for n, f in owner.model_fields.items()) if owner else []
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; known: {', '.join(known)}" if known else ""


def _loc_path(root: str, loc: tuple[Any, ...]) -> str:
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_./-]+", str(part)):
            out += f".{part}" if out else str(part)
        else:  # keys with spaces or control characters are shown quoted, so the line stays one line
            out += f"[{str(part)!r}]"
    return out


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that owns the last key of ``loc``, to suggest the key that was meant."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {key: f for n, f in current.model_fields.items() for key in _field_keys(n, f)}
        info = fields.get(part)
        if info is None:
            return None
        current = _inner_model(info.annotation)
        if current is None:
            return None
    return current


def _field_keys(name: str, info: Any) -> set[str]:
    """Every key a field is accepted under: its name, its alias, its validation alias."""
    keys = {name}
    if info.alias:
        keys.add(info.alias)
    if isinstance(info.validation_alias, str):
        keys.add(info.validation_alias)
    return keys


def _shown_key(name: str, info: Any) -> str:
    """The spelling users write: the alias (camelCase in this project), else the name."""
    if info.alias:
        return str(info.alias)
    return info.validation_alias if isinstance(info.validation_alias, str) else name


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _one_line(text: str) -> str:
    # Messages of custom validators may carry user input; a problem is one line whatever it holds.
    return text.replace("\r", "\\r").replace("\n", "\\n")
