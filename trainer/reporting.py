"""What a finished step reports: metrics, the ``step_done`` event, and (debug) the samples it trained on."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import torch
import torch.distributed as dist

from trainer.config import TrainConfig
from trainer.distributed import DistContext
from trainer.metrics import EventLog, Metrics
from trainer.peaks import gpu_peak


@dataclass(frozen=True)
class StepResult:
    """One optimizer step as every rank agreed on it at a vote (trainer/vote.py)."""

    loss: float  # mean over ranks
    preempt: bool  # some rank received a preemption signal
    seconds: float  # wall time of the step on this rank (a vote after it counts in the next wall_s)
    rank_seconds: list[float]  # every rank's own compute time, by global rank
    indices: list[int] = field(default_factory=list)  # dataset indices this rank trained on (if recorded)
    # time.perf_counter() at the step's end on this rank; None: when it is reported (steps agreed in an
    # interval are reported together at the vote: trainer/vote.py)
    ended: float | None = None
    lr: float = 0.0  # the learning rate the step used


class SampleRecorder:
    """Debug (``recordSamples``): each rank appends, per step, the dataset indices it trained on."""

    def __init__(self, directory: str, rank: int, world_size: int, group: dist.ProcessGroup) -> None:
        # One id per incarnation, shared by its ranks, sortable: later attempts redo uncommitted steps.
        box = [f"{time.time():020.6f}"]
        dist.broadcast_object_list(box, src=0, group=group)
        self.attempt, self.rank, self.world_size = box[0], rank, world_size
        Path(directory).mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = open(Path(directory) / f"samples-{self.attempt}-r{rank}.jsonl", "a")

    def write(self, step: int, indices: list[int]) -> None:
        rec = {
            "step": step,
            "attempt": self.attempt,
            "rank": self.rank,
            "world_size": self.world_size,
            "indices": indices,
        }
        self._file.write(json.dumps(rec) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class StepReporter:
    """Publishes each finished step: gauges and counters, the per-rank compute times, MFU, events."""

    def __init__(
        self,
        cfg: TrainConfig,
        ctx: DistContext,
        metrics: Metrics,
        log: EventLog,
        flops_per_token: float | None,
        recorder: SampleRecorder | None,
    ) -> None:
        self.cfg, self.ctx, self.metrics, self.log = cfg, ctx, metrics, log
        self.recorder = recorder
        self.tokens_per_step = cfg.global_batch_size * cfg.seq_len
        peak = gpu_peak(torch.cuda.get_device_name(ctx.device)) if ctx.cuda else None
        # FLOPs per second at 100% utilisation of the whole job; MFU only where the exact part's peak is
        # known (trainer/peaks.py: the formula and its sources)
        self.job_peak = peak.flops * ctx.world_size if peak and flops_per_token else None
        # When the previous step of this attempt was reported: throughput and MFU are over the wall time
        # from one step's end to the next one's, so what runs between steps (checkpoint saves, logging)
        # counts as well as the step's data loading and vote. The attempt's first step has no previous one:
        # its own time (trainer.train.StepResult.seconds, data included).
        self._last_end: float | None = None
        self.flops_per_step = (flops_per_token or 0.0) * self.tokens_per_step
        # Each node's exporting process (local rank 0) publishes the compute times of its own node's ranks
        # (every rank has all of them from the step's vote), so the scrape labels each rank's series with
        # the node it runs on and the straggler alert names that node. torchrun numbers a node's ranks
        # contiguously from rank - local_rank and sets LOCAL_WORLD_SIZE.
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1")) if ctx.local_rank == 0 else 0
        first = ctx.rank - ctx.local_rank
        self.node_ranks = range(first, min(first + local, ctx.world_size))

    @property
    def recording(self) -> bool:
        return self.recorder is not None

    def step_done(self, step: int, res: StepResult, lr: float) -> None:
        """Step ``step`` (0-based) finished; ``step + 1`` steps are done."""
        done, m, dt = step + 1, self.metrics, res.seconds
        now = time.perf_counter() if res.ended is None else res.ended
        wall = res.seconds if self._last_end is None else now - self._last_end
        self._last_end = now
        m.step.set(done)
        m.loss.set(res.loss)
        m.step_seconds.set(dt)
        m.tokens_per_second.set(self.tokens_per_step / wall)
        m.tokens.inc(self.tokens_per_step)
        for r in self.node_ranks:
            m.rank_step_seconds.labels(rank=str(r)).set(res.rank_seconds[r])
        mfu = self.flops_per_step / wall / self.job_peak if self.job_peak else None
        if mfu is not None:
            m.mfu.set(mfu)
        if self.recorder is not None:
            self.recorder.write(step, res.indices)
        if done % self.cfg.log_interval == 0 or done == self.cfg.steps:
            self.log(
                "step_done",
                step=done,  # set here: a step agreed at a later vote is reported after later events
                loss=round(res.loss, 6),
                step_s=round(dt, 5),
                wall_s=round(wall, 5),
                compute_s=round(float(res.rank_seconds[self.ctx.rank]), 5),
                tokens_per_s=round(self.tokens_per_step / wall, 1),
                lr=lr,
                **({} if mfu is None else {"mfu": round(mfu, 4)}),
            )

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
