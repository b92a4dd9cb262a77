"""The ranks' agreement on finished steps: mean loss, the preemption vote, every rank's compute time.

Reading the loss is a host sync, and the agreement is a gloo all-reduce. Done at every step, the sync
drains the GPU's queue of kernels each step (the next step cannot be queued while the host waits), and the
all-reduce's latency grows with the job. So the steps are agreed in intervals: each rank keeps its losses
on the device and its compute-time marks, and at a vote step one sync and one all-reduce agree on all the
steps since the last vote (each step's own mean loss, exactly as a per-step vote gives it), the preemption
flag, and each rank's compute time over the interval.

Which steps vote is decided collectively, so every rank calls the all-reduce at the same steps: the first
step of an attempt votes, then every ``voteEverySteps`` steps, or (the default on a GPU) each vote sets
the next from rank 0's wall time per step since the previous one (the same number on every rank: only rank
0 fills that slot), so that votes are about ``VOTE_SECONDS`` apart. The last step always votes (its loss
is the run's). A signal is acted on at the next vote, after the steps before it are done: no step is lost,
and the preemption save starts at most about a second plus one step after the signal, well inside the 60 s
or 120 s grace of a spot node (trainer.config.TrainConfig.vote_every_steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from trainer.reporting import StepResult

# The measured schedule's target: a vote costs a host sync and an all-reduce (milliseconds), so one a second
# costs well under 1% of the GPU's time, and a signal waits at most that long.
VOTE_SECONDS = 1.0
# At most this many steps between votes, whatever the step time: a bound on the device-side loss buffer,
# and on how stale the metrics may get on a very fast model.
MAX_STEPS_BETWEEN_VOTES = 100


@dataclass
class FinishedStep:
    """A step this rank has finished but the ranks have not agreed on yet."""

    loss: torch.Tensor  # this rank's share of the loss, on the device: read at the vote
    marks: dict[str, Any]  # trainer.straggler.StepClock marks: the compute time is read at the vote
    seconds: float  # this rank's wall time of the step
    ended: float  # time.perf_counter() at the step's end
    lr: float  # the learning rate the step used
    indices: list[int] = field(default_factory=list)


class StepVote:
    """Collects finished steps and agrees on them at vote steps (all ranks call ``add`` at every step)."""

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        every: int | None,
        last_step: int,
        signalled: Callable[[], bool],
        compute_seconds: Callable[[dict[str, Any]], float],
        all_reduce: Callable[[torch.Tensor], Any] = dist.all_reduce,
    ) -> None:
        self.rank, self.world_size, self.every = rank, world_size, every
        self.last_step = last_step  # 0-based index of the run's last step
        self._signalled, self._compute_seconds = signalled, compute_seconds
        self._all_reduce = all_reduce  # a sum over the job's default group
        self._pending: list[FinishedStep] = []
        self._next: int | None = None  # the next step that votes; None: the attempt's first step does
        self._last_vote_end: float | None = None

    def add(self, step: int, done: FinishedStep) -> list[StepResult]:
        """Step ``step`` finished here; the agreed results of the steps up to it if it is a vote step."""
        self._pending.append(done)
        if self._next is not None and step < self._next and step < self.last_step:
            return []
        return self._agree(step)

    def _agree(self, step: int) -> list[StepResult]:
        pending, self._pending = self._pending, []
        n, world = len(pending), self.world_size
        vote = torch.zeros(n + 2 + world, dtype=torch.float64)
        vote[:n] = torch.stack([p.loss.detach().reshape(()) for p in pending]).to("cpu", torch.float64)
        vote[n] = float(self._signalled())
        start = (
            self._last_vote_end if self._last_vote_end is not None else pending[0].ended - pending[0].seconds
        )
        if self.rank == 0:  # the schedule is rank 0's: one value, the same on every rank after the sum
            vote[n + 1] = (pending[-1].ended - start) / n
        vote[n + 2 + self.rank] = sum(self._compute_seconds(p.marks) for p in pending) / n
        self._all_reduce(vote)
        self._last_vote_end = pending[-1].ended
        self._next = step + self.steps_until_next(float(vote[n + 1]))
        preempt, rank_seconds = bool(vote[n] > 0), vote[n + 2 :].tolist()
        return [
            StepResult(
                float(vote[i]) / world,
                preempt and i == n - 1,
                p.seconds,
                rank_seconds,
                p.indices,
                ended=p.ended,
                lr=p.lr,
            )
            for i, p in enumerate(pending)
        ]

    def steps_until_next(self, step_seconds: float) -> int:
        """Steps from this vote to the next: ``every``, or about ``VOTE_SECONDS`` of wall time (at least 1).

        >>> v = StepVote(rank=0, world_size=1, every=None, last_step=9, signalled=bool,
        ...              compute_seconds=lambda m: 0.0)
        >>> v.steps_until_next(0.3), v.steps_until_next(2.5), v.steps_until_next(1e-6)
        (3, 1, 100)
        """
        if self.every is not None:
            return self.every
        if step_seconds <= 0:
            return MAX_STEPS_BETWEEN_VOTES
        return max(1, min(MAX_STEPS_BETWEEN_VOTES, math.floor(VOTE_SECONDS / step_seconds)))
