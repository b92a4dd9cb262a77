"""Where a training process's wall time goes (goodput): the phase clock and the high-water mark.

Goodput as the field defines it (Google's ml-goodput-measurement: "the fraction of time spent on useful
training" over the job's time, badput split by cause: program start-up, data loading, checkpoint
save/load, wasted progress from disruptions; NVIDIA's resiliency extension reports the same split).

``PhaseClock`` partitions this process's wall time, from the moment the OS started it, into the phases of
``contract.recovery.PHASES``: exactly one phase is current at any time and ``switch`` moves the elapsed time
into it, so the phases add up to the process's wall time by construction. It only reads host clocks
(``time.perf_counter``) at points where the trainer already takes them, so it adds no device sync.

``HighWater`` persists the highest step any attempt of the job reached, next to the checkpoints, so a
restarted attempt knows which steps it computes again ("redone": past the checkpoint it resumed from, up
to that mark). The file is advisory: written by global rank 0 from a background thread, at most once per
``interval_s``, atomically (a local temp file renamed over it; one PUT on an object store), never inside
a checkpoint directory. A missing file means a first attempt (0 redone); a garbled or unreadable one means
0 redone and a ``high_water_unreadable`` warning event, never a failed start.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import fsspec

from contract.recovery import PHASES
from trainer.contract import ENV_HIGH_WATER_INTERVAL

HIGH_WATER_FILE = "trainplane-high-water.json"
# Writes of the mark at most this often (seconds): one small object per interval, not one per step.
# The mark can lag the true highest step by this much, so redone counts are a lower bound by at most
# the steps of one interval. ENV_HIGH_WATER_INTERVAL overrides it (tests use 0).
HIGH_WATER_INTERVAL_S = 30.0


def process_started_at() -> float:
    """The epoch time the OS started this process (Linux: /proc), else the time this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            # the command may contain spaces and parentheses: fields after the last ')' are fixed
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22, starttime, in clock ticks since boot (proc(5))
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return btime + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT


_IMPORTED_AT = time.time()


class PhaseClock:
    """This process's wall time split into ``PHASES``; ``on_time(phase, seconds)`` exports each slice."""

    def __init__(self, on_time: Callable[[str, float], None], started_at: float | None = None) -> None:
        self._on_time = on_time
        self.started_at = process_started_at() if started_at is None else started_at
        # the process start on the perf_counter clock (btime has 1 s resolution: never after now)
        self._since = time.perf_counter() - max(0.0, time.time() - self.started_at)
        self.current = "startup"
        self.totals = dict.fromkeys(PHASES, 0.0)

    def switch(self, phase: str) -> str:
        """Close the current phase's slice and make ``phase`` current; the phase that was current."""
        now = time.perf_counter()
        dt, prev = max(0.0, now - self._since), self.current
        self.totals[prev] += dt
        self._on_time(prev, dt)
        self._since, self.current = now, phase
        return prev

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        prev = self.switch(name)
        try:
            yield
        finally:
            self.switch(prev)

    def snapshot(self) -> dict[str, float]:
        """Seconds per phase up to now (the current slice included), rounded for the event log."""
        self.switch(self.current)
        return {p: round(s, 4) for p, s in self.totals.items()}


def redone_until(high_water: int, resumed_at: int, steps: int) -> int:
    """The last step (1-based count of done steps) that is computed again: none (``resumed_at``) when the
    mark is not past the checkpoint we resumed from."""
    return max(resumed_at, min(high_water, steps))


class HighWater:
    """The highest step any attempt reached, in the checkpoint root (see the module docstring)."""

    def __init__(self, uri: str, log: Callable[..., None], interval_s: float | None = None) -> None:
        self.fs, root = fsspec.core.url_to_fs(uri.rstrip("/"))
        self.path = f"{root}/{HIGH_WATER_FILE}"
        self.local = "file" in _protocols(self.fs)
        self.log = log
        env = os.environ.get(ENV_HIGH_WATER_INTERVAL)
        self.interval_s = float(env) if env else (HIGH_WATER_INTERVAL_S if interval_s is None else interval_s)
        self.written = 0  # the highest mark known to be stored (read at start or written since)
        self._want = 0
        self._cv = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def read(self) -> int:
        """The stored mark; 0 when there is none or it cannot be read (with a warning event)."""
        try:
            raw = self.fs.cat_file(self.path)
        except FileNotFoundError:
            return 0
        except Exception as e:  # a store error must not fail the start: the mark is advisory
            self.log("high_water_unreadable", path=self.path, reason=_one_line(e), assumed=0)
            return 0
        try:
            step = json.loads(raw)["step"]
            if not isinstance(step, int) or isinstance(step, bool) or step < 0:
                raise ValueError(f"step is {step!r}, not a non-negative integer")
        except (ValueError, KeyError, TypeError) as e:
            self.log("high_water_unreadable", path=self.path, reason=_one_line(e), assumed=0)
            return 0
        self.written = max(self.written, step)
        return step

    def record(self, step: int) -> None:
        """Ask for ``step`` to be stored (the background writer takes the newest; never blocks)."""
        if step <= self._want:
            return
        with self._cv:
            self._want = step
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="high-water", daemon=True)
                self._thread.start()
            self._cv.notify()

    def close(self, timeout_s: float = 5.0) -> None:
        """Store the newest mark now (bounded wait) and stop the writer."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        last = float("-inf")
        while True:
            with self._cv:
                while self._want <= self.written and not self._closed:
                    self._cv.wait()
                if self._want <= self.written:
                    return
                step = self._want
                if not self._closed:
                    wait = last + self.interval_s - time.monotonic()
                    if wait > 0:
                        self._cv.wait(wait)  # rate limit; close() or a newer step just shortens it
                        step = self._want
            self._write(step)
            last = time.monotonic()

    def _write(self, step: int) -> None:
        data = json.dumps({"step": step, "time": round(time.time(), 3)}).encode()
        try:
            if self.local:
                # rename over the old file: a reader sees the old mark or the new one, never half of one
                tmp = f"{self.path}.tmp-{os.getpid()}"
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, self.path)
            else:
                self.fs.pipe_file(self.path, data)  # one PUT: object stores replace objects atomically
            self.written = step
        except Exception as e:  # never let the mark fail training or a checkpoint
            self.log("high_water_write_failed", path=self.path, step=step, error=_one_line(e))
            self.written = step  # do not retry in a loop; the next step asks again


def _protocols(fs: Any) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)


def _one_line(e: BaseException) -> str:
    return (f"{type(e).__name__}: {e}".strip().splitlines() or [""])[0][:300]
