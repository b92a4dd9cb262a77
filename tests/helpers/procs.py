"""Every process a test starts: in a process group of its own, and killed with everything it started.

- `spawn(args, ...)`: subprocess.Popen in a new session (its pid is its process group);
- `run(args, ...)`: subprocess.run on top of it, whose timeout or interruption kills the whole group (the
  standard library's kills only the direct child: a launcher's workers would stay);
- `group_process(args, ...)`: spawn, as a context manager that stops the group on leaving;
- `stop(proc)`: SIGTERM to its group, then SIGKILL what is left;
- `adopt(proc)`: register a process started in a session of its own by other means (a warm start);
- `kill(proc)` / `kill_all()`: SIGKILL to a group / to every group still registered (tests/conftest.py calls
  kill_all at session end and on SIGTERM/SIGHUP).

A pytest process can also die without running any of that (SIGKILL, an OOM kill, a CI timeout): the first
spawn starts a reaper, a small process in a session of its own that holds the read end of a pipe from this
process and the list of its live groups. When the pipe closes - this process ended, however - the reaper
kills every group still on the list. Found before it existed: an elastic test's launchers still running
30 minutes after their pytest was killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from tests.helpers import tiers

# The reaper: reads "+pgid" / "-pgid" lines; at end of input, SIGKILLs the groups still listed. It ignores
# the signals a terminal or a CI runner sends to the session it left.
REAPER = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
live = set()
for line in sys.stdin:
    line = line.strip()
    if line.startswith("+"):
        live.add(int(line[1:]))
    elif line.startswith("-"):
        live.discard(int(line[1:]))
for group in live:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
"""

_live: dict[int, subprocess.Popen[Any]] = {}
_reaper: tuple[int, IO[str]] | None = None  # (pid of the process that started it, its stdin)


def _tell_reaper(line: str) -> None:
    global _reaper
    if _reaper is None or _reaper[0] != os.getpid():  # none yet, or inherited across a fork
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", REAPER],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert proc.stdin is not None
        _reaper = (os.getpid(), proc.stdin)
    try:
        _reaper[1].write(line + "\n")
        _reaper[1].flush()
    except (BrokenPipeError, ValueError):
        _reaper = None


def spawn(args: Sequence[str | os.PathLike[str]], **kwargs: Any) -> subprocess.Popen[Any]:
    """subprocess.Popen(args, **kwargs) in a new session, registered to be killed with its group."""
    tiers.note(tiers.INTEGRATION)
    kwargs.pop("start_new_session", None)
    proc: subprocess.Popen[Any] = subprocess.Popen(args, start_new_session=True, **kwargs)
    _live[proc.pid] = proc
    _tell_reaper(f"+{proc.pid}")
    return proc


def adopt(proc: Any) -> Any:
    """Register a process started in a new session by other means (a warm start, tests/helpers/warm.py)
    as spawn registers its own: killed with its group on teardown, by the reaper if this process dies."""
    tiers.note(tiers.INTEGRATION)
    _live[proc.pid] = proc
    _tell_reaper(f"+{proc.pid}")
    return proc


def alive(pid: int) -> bool:
    """Whether process `pid` still runs: a zombie is dead (only its parent's wait is missing)."""
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group `proc` leads (it and what it started), reap it and unregister it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except (subprocess.TimeoutExpired, RuntimeError):  # RuntimeError: a warm start's starter went first
        pass
    forget(proc)


def stop(proc: subprocess.Popen[Any], timeout: float = 30) -> None:
    """SIGTERM the group `proc` leads (a server's clean shutdown), then kill what is left of it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
        pass
    kill(proc)


def forget(proc: subprocess.Popen[Any]) -> None:
    """Unregister a process whose group has ended (it was waited for and left nothing behind)."""
    if _live.pop(proc.pid, None) is not None:
        _tell_reaper(f"-{proc.pid}")


def kill_all() -> None:
    """Kill every group still registered (session end, SIGTERM)."""
    for proc in list(_live.values()):
        kill(proc)


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    input: str | bytes | None = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """subprocess.run in a group of its own: on timeout or any interruption the whole group is killed."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = spawn(args, **kwargs)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except BaseException:
        kill(proc)
        raise
    # The direct child is done; anything it left running in its group goes too.
    kill(proc)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


@contextmanager
def group_process(
    args: Sequence[str | os.PathLike[str]], grace_s: float = 20.0, **kwargs: Any
) -> Iterator[subprocess.Popen[Any]]:
    """spawn(args, **kwargs) for the block's length; leaving it (passed, failed or interrupted) stops the
    group: SIGTERM (a clean stop, as the kubelet does), SIGKILL to what is left after `grace_s`."""
    proc = spawn(args, **kwargs)
    try:
        yield proc
    finally:
        stop(proc, grace_s)


def run_group(
    args: Sequence[str | os.PathLike[str]], timeout: float, **kwargs: Any
) -> subprocess.CompletedProcess[Any]:
    """run(args) with its output captured as text."""
    return run(args, timeout=timeout, capture_output=True, text=True, **kwargs)
