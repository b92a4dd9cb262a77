"""tests/helpers/procs.py: what a test starts ends with it, also when the test's own process is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import procs
from tests.helpers.plans import ROOT

# A launcher that starts a worker of its own and waits, as torchrun does; the worker's pid goes to a file.
LAUNCHER = 'sleep 300 & echo $! > "$1"; wait'


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not procs.alive(pid):
            return True
        time.sleep(0.05)
    return False


def wait_for_file(path: Path, seconds: float = 20) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} not written")


def test_a_run_that_times_out_kills_what_its_process_started(tmp_path: Path):
    pidfile = tmp_path / "worker.pid"
    with pytest.raises(subprocess.TimeoutExpired):
        procs.run(["sh", "-c", LAUNCHER, "sh", str(pidfile)], timeout=2)
    assert gone_within(wait_for_file(pidfile), 60), "the launcher's worker outlived the timeout"


def test_the_groups_of_a_killed_test_process_are_killed_by_its_reaper(tmp_path: Path):
    # A stand-in for a pytest worker: it spawns a launcher through procs, then is SIGKILLed (no teardown,
    # no atexit, no signal handler runs).
    pidfile = tmp_path / "worker.pid"
    spawned = tmp_path / "spawned"
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from tests.helpers import procs
        procs.spawn(["sh", "-c", {LAUNCHER!r}, "sh", {str(pidfile)!r}])
        open({str(spawned)!r}, "w").write("1")  # spawn returned: the reaper knows the group
        time.sleep(300)
        """
    )
    holder = procs.spawn([sys.executable, "-c", script])
    try:
        worker = wait_for_file(pidfile)
        wait_for_file(spawned)
        assert procs.alive(worker)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        assert gone_within(worker, 60), "the worker outlived the killed test process"
    finally:
        procs.kill(holder)
