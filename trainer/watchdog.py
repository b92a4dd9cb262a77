"""Hang detection: a thread in each worker that ends the process when no step completes in time.

A hung rank (a deadlocked data loader, a GPU that stopped answering, a collective whose peer is gone)
otherwise holds the whole job until NCCL's or gloo's own timeouts (10-30 minutes) or forever. The limit is
``max(factor x median of the recent step times, floorSeconds)``; it arms only after ``warmupSteps`` steps
of this incarnation (start-up, ``torch.compile`` and first steps are slow), and while a checkpoint is saved
or loaded the limit is ``saveTimeoutSeconds`` instead. When it fires the thread logs a ``hang_detected``
event with every thread's stack, writes the same stacks to stderr with faulthandler, counts
``trainplane_hangs_total``, and exits the process with its code (``trainer.contract.EXIT_HANG``, 124), which the launcher reports and torchrun
counts against ``--max-restarts`` (the group restarts from the last checkpoint).

A hang that holds the GIL (a C extension spinning without releasing it) starves this thread too; the
collective timeouts remain the backstop for that.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import statistics
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from trainer.config import WatchdogConfig


class Watchdog:
    def __init__(
        self,
        cfg: WatchdogConfig,
        log: Callable[..., None],
        on_fire: Callable[[], None] | None = None,
        linger_s: float = 0.0,
        *,
        code: int,
        exit: Callable[[int], None] = os._exit,
    ) -> None:
        self.cfg, self._log, self._on_fire, self._linger, self._exit = cfg, log, on_fire, linger_s, exit
        self.code = code
        self._times: deque[float] = deque(maxlen=cfg.window)
        self._steps = 0
        self._last = time.monotonic()
        self._paused: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.fired = False

    def start(self) -> None:
        if self.cfg.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="trainplane-watchdog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def step_done(self, seconds: float) -> None:
        self._times.append(seconds)
        self._steps += 1
        self._last = time.monotonic()

    @contextlib.contextmanager
    def paused(self, what: str) -> Iterator[None]:
        """A checkpoint save/load: the step limit gives way to saveTimeoutSeconds."""
        outer = self._paused
        self._paused, self._last = outer or what, time.monotonic()
        try:
            yield
        finally:
            self._paused, self._last = outer, time.monotonic()

    def limit(self) -> float | None:
        """Seconds without progress that count as a hang now; None while not armed."""
        if self._paused is not None:
            return self.cfg.save_timeout_seconds
        if self._steps < self.cfg.warmup_steps or not self._times:
            return None
        return max(self.cfg.factor * statistics.median(self._times), self.cfg.floor_seconds)

    def _run(self) -> None:
        while not self._stop.wait(min(1.0, self.cfg.floor_seconds / 4)):
            limit = self.limit()
            idle = time.monotonic() - self._last
            if limit is not None and idle > limit:
                self._fire(idle, limit)
                return

    def _fire(self, idle: float, limit: float) -> None:
        self.fired = True
        stacks = {
            f"{t.name} ({ident})": "".join(traceback.format_stack(frame))
            for ident, frame in sys._current_frames().items()
            for t in [_thread_by_id(ident)]
        }
        self._log(
            "hang_detected",
            idle_s=round(idle, 3),
            limit_s=round(limit, 3),
            during=self._paused or "step",
            median_step_s=round(statistics.median(self._times), 5) if self._times else None,
            exit_code=self.code,
            stacks=stacks,
        )
        with contextlib.suppress(Exception):
            print(f"trainplane: no progress for {idle:.1f} s (limit {limit:.1f} s); stacks:", file=sys.stderr)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
        if self._on_fire is not None:
            with contextlib.suppress(Exception):
                self._on_fire()
        if self._linger:
            time.sleep(self._linger)  # keep the metrics endpoint up for one more scrape
        self._exit(self.code)


def _thread_by_id(ident: int) -> Any:
    for t in threading.enumerate():
        if t.ident == ident:
            return t
    return type("Unknown", (), {"name": "unknown"})()
