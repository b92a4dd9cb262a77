"""Prometheus metrics, JSON event logs and the terminal progress bar.

Every metric name starts with ``trainplane_``; docs/trainer.md lists them for the Grafana dashboards.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from contract.recovery import PHASE_SECONDS, PHASES, STEPS_REDONE


class Metrics:
    """The trainer's metrics in their own registry (tests can run several trainers in one process)."""

    def __init__(self, job: str) -> None:
        r = self.registry = CollectorRegistry()
        self.info = Gauge(
            "trainplane_info", "Static facts about this trainer", ["job", "parallelism"], registry=r
        )
        self.step = Gauge("trainplane_step", "Last completed optimizer step", registry=r)
        self.loss = Gauge("trainplane_loss", "Training loss of the last step (mean over ranks)", registry=r)
        self.tokens_per_second = Gauge(
            "trainplane_tokens_per_second",
            "Tokens per second since the previous step ended (wall time), all ranks",
            registry=r,
        )
        self.tokens = Counter(
            "trainplane_tokens", "Tokens trained on by this process's job since start", registry=r
        )
        self.step_seconds = Gauge("trainplane_step_seconds", "Wall time of the last step", registry=r)
        self.mfu = Gauge(
            "trainplane_mfu_ratio", "Model FLOPs utilisation (only where the GPU peak is known)", registry=r
        )
        self.world_size = Gauge("trainplane_world_size", "Processes in the current group", registry=r)
        self.save_seconds = Gauge(
            "trainplane_checkpoint_save_seconds", "Duration of the last committed checkpoint save", registry=r
        )
        # Every wait of the training thread for the last save: for the previous save to commit, the
        # all-reduce agreeing on its outcome, the save call, and a background copy's wait before the next
        # optimizer step (trainer/checkpoint/manager.py).
        self.save_blocking_seconds = Gauge(
            "trainplane_checkpoint_save_blocking_seconds", "Time the last save blocked training", registry=r
        )
        self.save_bytes = Gauge(
            "trainplane_checkpoint_save_bytes", "Bytes of the last committed checkpoint", registry=r
        )
        self.saves = Counter("trainplane_checkpoint_saves", "Committed checkpoints", registry=r)
        self.save_failures = Counter(
            "trainplane_checkpoint_save_failures",
            "Failed checkpoint saves (a save fails for the job when it fails on any rank)",
            registry=r,
        )
        self.load_failures = Counter(
            "trainplane_checkpoint_load_failures",
            "Committed checkpoints skipped at resume: damaged, failed checksum, or unloadable",
            registry=r,
        )
        self.hangs = Counter(
            "trainplane_hangs",
            "Hangs detected by the step watchdog in this pod (earlier incarnations included)",
            registry=r,
        )
        # One series per global rank, exported by the local rank 0 of the rank's node (trainer/reporting.py):
        # the scrape adds that node's name, which the straggler alert reports.
        self.rank_step_seconds = Gauge(
            "trainplane_rank_step_seconds",
            "The rank's own compute time for the last step, before waiting for peers",
            ["rank"],
            registry=r,
        )
        self.load_seconds = Gauge(
            "trainplane_checkpoint_load_seconds", "Duration of the resume load", registry=r
        )
        self.load_bytes = Gauge(
            "trainplane_checkpoint_load_bytes", "Bytes of the checkpoint resumed from", registry=r
        )
        self.last_checkpoint_step = Gauge(
            "trainplane_checkpoint_step", "Step of the newest committed checkpoint", registry=r
        )
        self.restarts = Gauge(
            "trainplane_restarts",
            "torchrun group restarts of this launcher (TORCHELASTIC_RESTART_COUNT)",
            registry=r,
        )
        self.resumes = Gauge(
            "trainplane_resumes", "Times this job resumed from a checkpoint (cumulative)", registry=r
        )
        self.preemptions = Gauge(
            "trainplane_preemptions",
            "Preemptions handled by this job (cumulative across restarts)",
            registry=r,
        )
        # Goodput (trainer/goodput.py): this process's wall time by phase, and steps computed again after
        # a restart. Counters of this process (a restart starts them at 0: rules read them with
        # increase()); every phase is present from the start so increase() sees its first slice.
        self.phase_seconds = Counter(
            PHASE_SECONDS.removesuffix("_total"),
            "Seconds this process spent in each phase (startup, data, step, checkpoint_save, "
            "checkpoint_load, redone); they add up to its wall time",
            ["phase"],
            registry=r,
        )
        self.phase_children = {p: self.phase_seconds.labels(phase=p) for p in PHASES}
        self.steps_redone = Counter(
            STEPS_REDONE.removesuffix("_total"),
            "Steps this process computed again after a restart (past the resumed checkpoint, up to the "
            "highest step an earlier attempt reached)",
            registry=r,
        )
        self.job = job

    def add_phase_time(self, phase: str, seconds: float) -> None:
        self.phase_children[phase].inc(seconds)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity (at any depth) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_line(rec: dict[str, Any]) -> str:
    """``rec`` as one line of strict JSON (RFC 8259 has no NaN or Infinity; Python's json writes them by
    default and strict parsers, jq and Loki's json stage among them, reject the line): a non-finite number
    becomes null, and ``allow_nan=False`` makes any that slipped through an error here, not in a pipeline."""
    return json.dumps(_finite(rec), default=str, allow_nan=False)


class EventLog:
    """One JSON object per line (strict JSON): ts, event, job, rank, step, then event fields."""

    def __init__(self, job: str, rank: int, stream: TextIO | None = None) -> None:
        self.job, self.rank, self.step = job, rank, 0
        self.stream = stream or sys.stdout

    def __call__(self, event: str, **fields: Any) -> None:
        rec = {
            "ts": round(time.time(), 3),
            "event": event,
            "job": self.job,
            "rank": self.rank,
            "step": self.step,
            **fields,
        }
        self.stream.write(json_line(rec) + "\n")
        self.stream.flush()


class Progress:
    """A rich progress bar on rank 0 when stdout is a terminal; nothing otherwise."""

    def __init__(self, total: int, start: int, enabled: bool) -> None:
        self._bar = None
        if enabled and sys.stdout.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]:.4f}"),
                TimeRemainingColumn(),
            )
            self._task = self._bar.add_task("train", total=total, completed=start, loss=float("nan"))
            self._bar.start()

    def update(self, step: int, loss: float) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=step, loss=loss)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
