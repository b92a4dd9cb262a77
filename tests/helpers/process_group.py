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
