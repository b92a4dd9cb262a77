"""What the launcher and its workers tell each other outside torchrun: status markers and parent death.

The launcher creates a private directory and passes it to every worker in ``TRAINPLANE_LAUNCH_DIR``.
Workers leave markers there that turn a pile of exit codes into an honest answer:

* ``preempted``  local rank 0, after every rank passed the barrier behind a committed preemption checkpoint;
* ``finished``   local rank 0, after the final checkpoint committed (or the last step, without a root);
* ``hang-<restart>`` any rank whose watchdog fired in that incarnation (counted into ``trainplane_hangs_total``
  by the next incarnation, so the count survives the restart that the hang causes);
* ``exit-<rank>`` a worker that ends itself with a failure code it chose (2, 74, 124), so the launcher can
  report it even when it was signalled itself and torchrun hands back no worker codes.

Markers from an earlier incarnation of the group are cleared by local rank 0 when a new one starts.

Workers also die with their launcher: torchrun starts each worker in its own session, so a launcher
killed with SIGKILL (or OOM-killed) would leave them training and writing checkpoints into the root that a
relaunch uses too. Each worker asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``): the
launcher, or the launcher's zygote that forked it (trainer/zygote.py), which dies with the launcher in turn;
``TRAINPLANE_LAUNCHER_PID`` names that parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from trainer.contract import ENV_LAUNCH_DIR, ENV_LAUNCHER_PID, EXIT_OK, EXIT_PREEMPTED

PREEMPTED, FINISHED, HANG_PREFIX, EXIT_PREFIX = "preempted", "finished", "hang-", "exit-"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_launcher() -> bool:
    """SIGKILL this process when the launcher that started it dies. False if it is already gone."""
    want = os.environ.get(ENV_LAUNCHER_PID)
    if not want:
        return True  # not started by trainer.launch (plain torchrun, or one process)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: nothing to ask for
        return True
    # The launcher may have died between starting us and the prctl call: then we were re-parented already.
    return os.getppid() == int(want)


def launch_dir() -> Path | None:
    d = os.environ.get(ENV_LAUNCH_DIR)
    return Path(d) if d else None


def mark(name: str, payload: dict[str, Any] | None = None) -> None:
    d = launch_dir()
    if d is not None:
        with contextlib.suppress(OSError):
            (d / name).write_text(json.dumps(payload or {}))


def mark_exit(rank: int, code: int) -> None:
    """Rank `rank` ends with `code`: the launcher reads why (a clean end or a committed preemption leaves
    no mark)."""
    if code not in (EXIT_OK, EXIT_PREEMPTED):
        mark(f"{EXIT_PREFIX}{rank}", {"code": code, "time": time.time()})


def new_incarnation() -> None:
    """Local rank 0 of a new worker group: earlier incarnations' verdicts are not ours (hangs stay)."""
    d = launch_dir()
    if d is not None:
        for f in [d / PREEMPTED, d / FINISHED, *d.glob(EXIT_PREFIX + "*")]:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()


def hang_incidents() -> int:
    """Hangs detected by earlier incarnations under this launcher."""
    d = launch_dir()
    return len(list(d.glob(HANG_PREFIX + "*"))) if d is not None else 0


def worker_exit_code() -> int | None:
    """The code of the first worker that chose to fail (by the time it wrote its marker), if any."""
    d = launch_dir()
    found: list[tuple[float, int]] = []
    for f in d.glob(EXIT_PREFIX + "*") if d is not None else []:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            rec = json.loads(f.read_text())
            found.append((float(rec["time"]), int(rec["code"])))
    return min(found)[1] if found else None
