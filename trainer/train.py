"""The training process: ``python -m trainer`` (under torchrun, or as one plain process).

``Trainer`` is shaped like torchtitan's: everything it trains with is declared and built once in
``__init__`` (process groups, model, optimizer, scheduler, data loader, metrics, checkpointer); ``run()``
resumes and loops; ``train_step`` is one optimizer step (micro-batches, clipping, the update; the ranks
agree on finished steps at votes, trainer/vote.py) and ``forward_backward`` one micro-batch. The
checkpoint holds Statefuls (``trainer.state``) and the checkpoint store decides when a step is due. Exit
codes are ``trainer.contract``'s.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from trainer import lifecycle, peerloss
from trainer.build import (
    build_loader,
    build_model,
    build_optimizer,
    build_scheduler,
    uses_bf16,
    vocab_size,
    wrap_model,
)
from trainer.checkpoint import Group
from trainer.checkpoint.manager import Checkpointer, CollectiveConfigError, SaveFailed, probe_collectively
from trainer.config import ConfigError, TrainConfig, load_config, parse_args
from trainer.contract import (
    EXIT_CONFIG,
    EXIT_CRASH,
    EXIT_HANG,
    EXIT_OK,
    EXIT_PEER_LOST,
    EXIT_PREEMPTED,
    EXIT_SAVE_FAILED,
)
from trainer.data import build_dataset
from trainer.distributed import DistContext, init_process_groups
from trainer.goodput import HighWater, PhaseClock, redone_until
from trainer.metrics import EventLog, Metrics, Progress
from trainer.model import GPT
from trainer.preemption import PreemptionFlag
from trainer.reporting import SampleRecorder, StepReporter
from trainer.state import ModelState, OptimizerState, TrainState, seed_rank
from trainer.straggler import StepClock
from trainer.vote import FinishedStep, StepVote
from trainer.watchdog import Watchdog

__all__ = ["CollectiveConfigError", "SaveFailed", "Trainer", "main"]


class Trainer:
    """One training process of a job. Construction is collective: every rank builds its Trainer."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.flag = PreemptionFlag()
        self.flag.install()  # first: a signal during slow start-up must not kill the process
        if not lifecycle.die_with_launcher():
            raise SystemExit(EXIT_CRASH)  # the launcher is already gone: nobody would report our result
        self.ctx = ctx = DistContext.from_env()
        self.log = EventLog(cfg.job_name, ctx.rank)
        self.accum = cfg.accumulation(ctx.world_size)  # ConfigError -> exit 2 before any collective
        if cfg.threads:
            torch.set_num_threads(cfg.threads)

        self.ckpt_pg = init_process_groups(ctx)
        self.log(
            "start",
            world_size=ctx.world_size,
            accumulation=self.accum,
            pid=os.getpid(),
            restart_count=ctx.restart_count,
            config_hash=cfg.training_hash(),
        )
        if ctx.local_rank == 0:
            lifecycle.new_incarnation()
        self.metrics = Metrics(cfg.job_name)
        # Wall time by phase since the OS started this process (startup until the loop; trainer/goodput.py)
        self.phases = PhaseClock(self.metrics.add_phase_time)
        # The highest step any attempt reached: kept by global rank 0 next to the checkpoints.
        self.high_water = (
            HighWater(cfg.checkpoint.uri, self.log) if cfg.checkpoint.uri and ctx.rank == 0 else None
        )
        self._redo_until = 0  # steps up to this one (count of done steps) are computed again
        self._steps_redone = 0
        self._data_phase = "data"
        self.metrics.hangs.inc(lifecycle.hang_incidents())
        serving = bool(cfg.metrics_port) and ctx.local_rank == 0
        self.watchdog = Watchdog(
            cfg.watchdog,
            self.log,
            on_fire=self._on_hang,
            linger_s=cfg.watchdog.export_grace_seconds if serving else 0.0,
            code=EXIT_HANG,
        )
        self.clock = StepClock(ctx.cuda)
        if cfg.checkpoint.uri:  # before building anything: a root we cannot write is a config error
            probe_collectively(cfg.checkpoint.uri, ctx.rank, self.ckpt_pg)

        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        self.raw_model = build_model(cfg)
        dataset = build_dataset(cfg, vocab_size(self.raw_model, cfg))
        self.model, self.forward = wrap_model(self.raw_model, cfg, ctx, self.clock)
        self.optimizer = build_optimizer(self.model, cfg)
        self.scheduler = build_scheduler(self.optimizer, cfg)
        self.sampler, self.loader = build_loader(dataset, cfg, ctx)
        self.train_state = TrainState(world_size=ctx.world_size)
        if serving:  # before the resume, so that a slow or failing resume is visible too
            self.metrics.serve(cfg.metrics_port)
            self.log("metrics_listening", port=cfg.metrics_port)
        self._publish_static_metrics()
        self.checkpointer = Checkpointer(
            cfg,
            {
                "model": ModelState(self.model),
                "optim": OptimizerState(self.model, self.optimizer),
                "sched": self.scheduler,
            },
            self.train_state,
            group=Group(self.ckpt_pg, ctx.rank, ctx.world_size),
            log=self.log,
            metrics=self.metrics,
            watchdog=self.watchdog,
        )
        self.reporter = StepReporter(
            cfg, ctx, self.metrics, self.log, self._flops_per_token(), self._recorder()
        )
        bf16 = uses_bf16(cfg, ctx)
        self.autocast: contextlib.AbstractContextManager[Any] = (
            torch.autocast(ctx.device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        )
        # One collective per vote carries the steps' losses, the preemption vote (any rank signalled) and
        # every rank's own compute time (each rank fills its slot; the sum gives all of them to all ranks).
        self.vote = StepVote(
            rank=ctx.rank,
            world_size=ctx.world_size,
            every=cfg.vote_every(ctx.cuda),
            last_step=cfg.steps - 1,
            signalled=lambda: self.flag.set,
            compute_seconds=self.clock.compute_seconds,
        )
        # A background checkpoint copy may still read the state during the next step: parameters and the
        # optimizer's moments change only in optimizer.step(), but a model's buffers may change in its
        # forward (BatchNorm's running statistics, DDP's buffer broadcast), so such a model waits for the copy
        # before its forward. The built-in GPT has none.
        self._buffers = any(True for _ in self.raw_model.buffers())

    def _publish_static_metrics(self) -> None:
        m = self.metrics
        m.info.labels(job=self.cfg.job_name, parallelism=self.cfg.parallelism).set(1)
        m.world_size.set(self.ctx.world_size)
        m.restarts.set(self.ctx.restart_count)

    def _flops_per_token(self) -> float | None:
        flops = getattr(getattr(self.raw_model, "config", None), "flops_per_token", None)
        return float(flops()) if callable(flops) else None

    def _recorder(self) -> SampleRecorder | None:
        if not self.cfg.record_samples:
            return None
        return SampleRecorder(self.cfg.record_samples, self.ctx.rank, self.ctx.world_size, self.ckpt_pg)

    # ---- run -----------------------------------------------------------------------------------
    def run(self) -> int:
        """Resume (or start fresh), train to ``steps``; the exit code."""
        self.phases.switch("checkpoint_load")
        start = self.checkpointer.resume()
        self.phases.switch("startup")
        self._redo_until = self._agree_redo(start)
        if start == 0:
            seed_rank(self.cfg.seed, 0, self.ctx.rank)
        self.sampler.start_at(start)
        self.log.step = start
        self.metrics.resumes.set(self.train_state.resumes)
        self.metrics.preemptions.set(self.train_state.preemptions)
        self.metrics.step.set(start)
        self.watchdog.start()
        try:
            code = self._loop(start)
        except SaveFailed as e:
            self.log("checkpoint_saves_failed_exit", exit_code=EXIT_SAVE_FAILED, error=str(e))
            print(f"trainplane: {e}", file=sys.stderr)
            code = EXIT_SAVE_FAILED
        finally:
            self.watchdog.stop()
            with self.phases.phase("checkpoint_save"):  # waits for a commit still in flight
                self.checkpointer.close()
            if self.high_water is not None:
                self.high_water.close()
        if code == EXIT_OK and self.ctx.local_rank == 0:
            # complete: a SIGTERM to the launcher from now on (pod deletion at the end) must give 0
            lifecycle.mark(lifecycle.FINISHED, {"step": self.cfg.steps})
        dist.destroy_process_group()
        self._log_phases(code)
        return code

    def _agree_redo(self, start: int) -> int:
        """The last step this attempt computes again: rank 0 reads the high-water mark, all ranks agree."""
        box: list[Any] = [self.high_water.read() if self.high_water is not None else 0]
        if self.cfg.checkpoint.uri and dist.is_initialized():
            dist.broadcast_object_list(box, src=0, group=self.ckpt_pg)
        until = redone_until(int(box[0]), start, self.cfg.steps)
        if until > start:
            self.log("redoing_steps", ckpt_step=start, high_water=int(box[0]), steps=until - start)
        return until

    def _log_phases(self, code: int | None) -> None:
        """The phases of this process so far in the event log (offline tools read them; goodput)."""
        seconds = self.phases.snapshot()
        self.log(
            "phases",
            seconds=seconds,
            wall_s=round(time.time() - self.phases.started_at, 4),
            steps_redone=self._steps_redone,
            exit_code=code,
        )

    def _loop(self, start: int) -> int:
        progress = Progress(self.cfg.steps, start, enabled=self.ctx.rank == 0)
        batches = iter(self.loader)
        loss: float | None = None  # no step in this attempt: a finished job started again
        try:
            for step in range(start, self.cfg.steps):
                # a step an earlier attempt already reached is badput (redone), data loading included
                redo = step < self._redo_until
                self._data_phase = "redone" if redo else "data"
                self.phases.switch("redone" if redo else "step")
                code, agreed_loss = self._step_done(step, self.train_step(batches), progress)
                loss = loss if agreed_loss is None else agreed_loss
                if code is not None:
                    return code
        finally:
            progress.close()
            self.reporter.close()
        with self.phases.phase("checkpoint_save"):
            self.checkpointer.finish()
        # loss: this attempt's last step; null when it ran none (the job had already finished)
        self.log("finished", loss=None if loss is None else round(loss, 6), steps=self.cfg.steps)
        return EXIT_OK

    def _step_done(
        self, step: int, finished: FinishedStep, progress: Progress
    ) -> tuple[int | None, float | None]:
        """Step ``step`` is done here: agree (at a vote step) and report, then checkpoint or preempt.

        (an exit code if the run ends here, the newest agreed loss or None)."""
        done = step + 1
        self.train_state.advance(done, self.cfg.global_batch_size)
        self.watchdog.step_done(finished.seconds)
        self.log.step = done
        agreed = self.vote.add(step, finished)
        first = done - len(agreed)
        for i, result in enumerate(agreed):
            self.reporter.step_done(first + i, result, lr=result.lr)
            progress.update(first + i + 1, result.loss)
        loss = agreed[-1].loss if agreed else None
        if done <= self._redo_until:
            self._steps_redone += 1
            self.metrics.steps_redone.inc()
        if self.high_water is not None:
            self.high_water.record(done)
        with self.phases.phase("checkpoint_save"):
            self.checkpointer.poll()
        # At the last step a signal changes nothing: the final save is the checkpoint, and the run is
        # complete (exit 0), not preempted.
        if agreed and agreed[-1].preempt and done < self.cfg.steps:
            return self._preempt(done), loss
        with self.phases.phase("checkpoint_save"):
            self.checkpointer.maybe_save(done)
        return None, loss

    # ---- one step ------------------------------------------------------------------------------
    def train_step(self, batches: Iterator[Any]) -> FinishedStep:
        """One optimizer step: ``accum`` micro-batches, clipping, the update; its loss stays on the device
        until the ranks agree on it (trainer/vote.py)."""
        t0 = time.perf_counter()
        self.clock.start()
        if self._buffers:
            self.checkpointer.before_state_changes()
        loss_sum = torch.zeros((), device=self.ctx.device)
        seen: list[int] = []
        for a in range(self.accum):
            with self.phases.phase(self._data_phase):
                idx, x = next(batches)
            loss_sum += self.forward_backward(x, last=a == self.accum - 1)
            if self.reporter.recording:
                seen.extend(idx.tolist())
        self.clock.backward_done()
        if self.cfg.grad_clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.checkpointer.before_state_changes()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        marks = self.clock.step_end()
        ended = time.perf_counter()
        lr = float(self.scheduler.get_last_lr()[0])
        return FinishedStep(loss_sum, marks, ended - t0, ended, lr, seen)

    def forward_backward(self, x: torch.Tensor, *, last: bool) -> torch.Tensor:
        """Forward and backward of one micro-batch (gradients sync on the ``last``); its share of the loss."""
        x = x.to(self.ctx.device, non_blocking=True)
        if last and not isinstance(self.model, DDP):
            self.model.set_requires_gradient_sync(True)  # type: ignore[operator]  # FSDP2
        with self._sync_ctx(last), self.autocast:
            if isinstance(self.raw_model, GPT):  # the loss inside the model's forward (trainer/loss.py)
                micro = self.forward(x[:, :-1], x[:, 1:])
            else:  # a plug-in model returns logits
                logits = self.forward(x[:, :-1])
                micro = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        (micro / self.accum).backward()
        return micro.detach() / self.accum

    def _sync_ctx(self, sync: bool) -> contextlib.AbstractContextManager[Any]:
        if sync:
            return contextlib.nullcontext()
        if isinstance(self.model, DDP):
            return self.model.no_sync()
        self.model.set_requires_gradient_sync(False)  # type: ignore[operator]  # FSDP2: re-enabled for the last
        return contextlib.nullcontext()

    # ---- endings -------------------------------------------------------------------------------
    def _preempt(self, done: int) -> int:
        self.log("preemption_agreed", signal=self.flag.name or "peer", signals_received=self.flag.count)
        if not self.checkpointer.enabled:
            self.log("preempted_without_checkpoint", reason="no checkpoint.uri configured")
            return EXIT_CRASH
        self.train_state.preemptions += 1  # also when `done` was just saved: the count must persist
        self.metrics.preemptions.set(self.train_state.preemptions)
        with self.phases.phase("checkpoint_save"):
            self.checkpointer.save_for_preemption(done)
        if self.ctx.local_rank == 0:
            lifecycle.mark(lifecycle.PREEMPTED, {"step": done})
        since = time.monotonic() - self.flag.received_at if self.flag.received_at else None
        self.log(
            "preempted_exit",
            exit_code=EXIT_PREEMPTED,
            ckpt_step=done,
            signal_to_exit_s=round(since, 4) if since is not None else None,
        )
        return EXIT_PREEMPTED

    def _on_hang(self) -> None:
        self.metrics.hangs.inc()
        self._log_phases(EXIT_HANG)
        if self.high_water is not None:
            self.high_water.close(timeout_s=1.0)
        lifecycle.mark(f"{lifecycle.HANG_PREFIX}{self.ctx.restart_count}", {"rank": self.ctx.rank})
        lifecycle.mark_exit(self.ctx.rank, EXIT_HANG)


def main(argv: list[str] | None = None, config: TrainConfig | None = None) -> int:
    """Train with `config` (already loaded and checked: python -m trainer), else the one `argv` gives."""
    code = _main(argv, config)
    lifecycle.mark_exit(int(os.environ.get("RANK", 0)), code)
    return code


def _main(argv: list[str] | None, config: TrainConfig | None) -> int:
    try:
        return Trainer(config or load_config(*parse_args(argv))).run()
    except CollectiveConfigError as e:
        if int(os.environ.get("RANK", 0)) == 0:  # every rank reached it together: one line, not one per rank
            print(str(e), file=sys.stderr)
        return EXIT_CONFIG
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG
    except Exception as e:
        if not peerloss.is_peer_loss(e):
            raise
        # another node vanished under a collective: report it as such (trainer/peerloss.py), not as a crash
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"trainplane: a peer is gone: {type(e).__name__}: {first}", file=sys.stderr)
        return EXIT_PEER_LOST
