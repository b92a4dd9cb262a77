"""Preemption: signals set a flag; the training loop acts on it at a step boundary.

The handler does no I/O and no collectives (neither is safe inside a signal handler); it records the
first signal and counts the rest. A second SIGTERM while the checkpoint is being written is therefore
ignored: the save runs to its commit, and if the grace period runs out first, SIGKILL leaves a
directory without a manifest, which resume skips.
"""

from __future__ import annotations

import signal
import time
from types import FrameType

PREEMPT_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class PreemptionFlag:
    def __init__(self) -> None:
        self.signum: int | None = None
        self.received_at: float | None = None
        self.count = 0

    def install(self) -> None:
        for sig in PREEMPT_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
            self.received_at = time.monotonic()

    @property
    def set(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""
