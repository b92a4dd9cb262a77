"""The CLI for tests: in-process (`cli(...)`, the fast tier), as a real process (`trainplane(...)`, the
smoke tests of the integration tier), and the JSON key check of --json output."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers import procs
from tests.helpers.plans import ROOT, cached_run_program

# Environment that changes what rich prints: the subprocess runs had none of it.
_CONSOLE_ENV = ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "TERM")


@dataclass
class Ran:
    """A CLI run's exit code and output, as subprocess.CompletedProcess names them."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.pop(k) for k in _CONSOLE_ENV if k in os.environ}
    added = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in added.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        os.environ.update(saved)


@contextlib.contextmanager
def cached_plans() -> Iterator[None]:
    """The CLI's mock-engine runs come from plans.py's per-process cache: a stack planned by
    `planned(...)` or by an earlier CLI call in this process is not planned again."""
    import infra.mockcloud

    real = infra.mockcloud.run_program
    infra.mockcloud.run_program = cached_run_program
    try:
        yield
    finally:
        infra.mockcloud.run_program = real


def cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, cached: bool = False) -> Ran:
    """`python -m infra.cli ARGS` run in this process (infra.cli.main), stdout and stderr captured off a
    terminal as in a pipe. `cached`: reuse this process's plans of unchanged stacks (see cached_plans)."""
    from infra.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (
        _environ(env or {}),
        contextlib.chdir(cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        cached_plans() if cached else contextlib.nullcontext(),
    ):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse: --help (0) and usage errors (2)
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    return Ran(code, out.getvalue(), err.getvalue())


def trainplane(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 300) -> Ran:
    """`python -m infra.cli ARGS` as a real process with a bare environment (the integration tier's smoke
    tests: one per command)."""
    proc = procs.run(
        [sys.executable, "-m", "infra.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


# Maps whose keys are data (resource types, Kubernetes labels and annotations, node condition types,
# environment variables), not fields of the output: docs/cli.md names them.
DATA_MAPS = {
    "counts",
    "labels",
    "workloadAnnotations",
    "annotations",
    "extendedResources",
    "podEnv",
    "repairConditions",
}


def _bad_keys(value: Any, path: str = "") -> list[str]:
    bad: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if not CAMEL.match(k):
                bad.append(f"{path}.{k}")
            if k not in DATA_MAPS:
                bad += _bad_keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            bad += _bad_keys(v, f"{path}[{i}]")
    return bad
