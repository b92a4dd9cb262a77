"""Per-rank compute time of a step, measured so that a straggler shows up as itself.

Wall time per step is the same on every rank: everyone waits for the slowest rank in DDP's gradient
all-reduce. What differs is when each rank *finished computing*: DDP calls its communication hook for a
bucket as soon as this rank's gradients for it are ready, before any waiting for peers. So a rank's own
time is (step start -> its last bucket ready) + (backward returned -> the step's end), the second part
being gradient clipping and the optimizer step, both local. On a GPU the marks are CUDA events on the
compute stream (host timestamps only say when work was queued); on a CPU they are host timestamps.

FSDP has no such hook (its all-gathers in forward already wait for peers), and a process without DDP
has no peers: there the time is step start -> the step's end, which for FSDP includes waiting.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


class StepClock:
    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self._t: dict[str, Any] = {}

    def _now(self) -> Any:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self) -> None:
        self._t = {"start": self._now()}

    def ready(self) -> None:
        """Called from DDP's comm hook for every bucket; the last call of the step counts."""
        self._t["ready"] = self._now()

    def backward_done(self) -> None:
        self._t["backward"] = self._now()

    def step_end(self) -> dict[str, Any]:
        """Mark the end of the step's local work; its marks, read later by ``compute_seconds`` (on a GPU
        reading them waits for the events, so it is done at the vote, not at every step)."""
        self._t["vote"] = self._now()
        return self._t

    def _between(self, a: Any, b: Any) -> float:
        if self.cuda:
            b.synchronize()
            return a.elapsed_time(b) / 1000.0
        return b - a

    def compute_seconds(self, marks: dict[str, Any]) -> float:
        t = marks
        if "ready" not in t or "backward" not in t:
            return self._between(t["start"], t["vote"])
        return self._between(t["start"], t["ready"]) + self._between(t["backward"], t["vote"])


def attach(model: Any, clock: StepClock) -> bool:
    """Time the gradient buckets of a DDP model (same all-reduce as DDP's default). False if not DDP."""
    if not isinstance(model, DDP):
        return False

    # No annotations: DDP checks them against dist.GradBucket / torch.futures.Future, and with
    # `from __future__ import annotations` they would be strings.
    def timed_allreduce(state, bucket):  # type: ignore[no-untyped-def]
        clock.ready()
        return default_hooks.allreduce_hook(state, bucket)

    model.register_comm_hook(None, timed_allreduce)
    return True
