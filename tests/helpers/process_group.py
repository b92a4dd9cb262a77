"""A process a test starts, in its own process group, and the whole group gone when the test ends (passed,
failed or interrupted: the `finally` runs on KeyboardInterrupt too), so nothing it spawned outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any


def stop_group(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM to the group (a clean stop, as the kubelet does), SIGKILL to what is left after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def group_process(cmd: list[str], grace_s: float = 20.0, **popen: Any) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    try:
        yield proc
    finally:
        stop_group(proc, grace_s)


def run_group(cmd: list[str], timeout: float, **popen: Any) -> subprocess.CompletedProcess:
    """subprocess.run in a process group of its own, output captured as text: on a timeout or an
    interrupt the whole group goes (subprocess.run kills only the process it started, and a builder's
    children, pip or debootstrap, would outlive it)."""
    with group_process(
        cmd, grace_s=5, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    ) as p:
        out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)
