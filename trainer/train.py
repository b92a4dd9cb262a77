"""The training loop: ``python -m trainer`` (under torchrun, or as one plain process).

Exit codes (the launcher passes them on; docs/trainer.md has the table):
0 done, 143 preempted after a committed checkpoint, 2 configuration error (also: checkpoint root not
writable, training config changed since the checkpoint, no loadable checkpoint left), 124 hang detected by
the watchdog, 74 checkpoint saves kept failing (EX_IOERR), 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import pickle
import random
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

from trainer import lifecycle
from trainer.checkpoint import Candidate, CheckpointError, CheckpointStore, probe_error, probe_root
from trainer.config import ConfigError, TrainConfig, config_change_error, config_changes, load_config
from trainer.data import ElasticSampler, Indexed, build_dataset, load_object, worker_init
from trainer.lifecycle import ENV_LAUNCH_DIR
from trainer.metrics import EventLog, Metrics, Progress, gpu_peak_flops
from trainer.model import GPT, gpt_config
from trainer.preemption import EXIT_PREEMPTED, PreemptionFlag
from trainer.straggler import StepClock, attach
from trainer.watchdog import Watchdog

EXIT_OK, EXIT_CRASH, EXIT_CONFIG = 0, 1, 2
EXIT_SAVE_FAILED = 74  # sysexits.h EX_IOERR: checkpoint saves failed maxConsecutiveFailures times in a row
EXIT_HANG = 124  # as timeout(1): the watchdog saw no step for too long; a failure, not a preemption
__all__ = ["ENV_LAUNCH_DIR", "EXIT_CONFIG", "EXIT_CRASH", "EXIT_HANG", "EXIT_OK", "EXIT_SAVE_FAILED"]


class CollectiveConfigError(ConfigError):
    """A configuration error every rank reached together (rank 0 prints it, the others only exit 2)."""


class SaveFailed(Exception):
    """Checkpoint saves failed for good: the run ends with EXIT_SAVE_FAILED."""


def parse_args(argv: list[str] | None) -> tuple[str | None, list[str]]:
    """``--config FILE``, ``--set key=value`` (repeatable) and ``--any-key value`` as a shorthand for set."""
    p = argparse.ArgumentParser(prog="python -m trainer", description=__doc__)
    p.add_argument("--config", help="YAML file (default: $TRAINPLANE_CONFIG)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="sets",
        help="override one key, dotted for nested (checkpoint.uri=s3://b/run)",
    )
    args, rest = p.parse_known_args(argv)
    sets = list(args.sets)
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("--"):
            raise ConfigError(f"config error: unexpected argument {tok!r}")
        key, eq, val = tok[2:].partition("=")
        if not eq:
            if i + 1 >= len(rest):
                raise ConfigError(f"config error: {tok}: missing value")
            val, i = rest[i + 1], i + 1
        sets.append(f"{key.replace('-', '_')}={val}")
        i += 1
    return args.config, sets


def _rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def _set_rng_state(s: dict[str, Any]) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if s["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


def _seed_rank(seed: int, step: int, rank: int) -> None:
    """Derive a per-rank RNG stream from (seed, step, rank): used at a fresh start and after a resize."""
    s = int.from_bytes(hashlib.sha256(f"{seed}/{step}/{rank}".encode()).digest()[:8], "little") >> 1
    random.seed(s)
    np.random.seed(s % 2**32)
    torch.manual_seed(s)


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """Linear warm-up, then cosine decay to min_lr_ratio; a pure function of the step."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def build_model(cfg: TrainConfig) -> nn.Module:
    if ":" in cfg.model:
        return load_object(cfg.model, "model")(cfg)
    try:
        return GPT(gpt_config(cfg.model, cfg.seq_len, cfg.dropout, cfg.model_args))
    except KeyError:
        raise ConfigError(
            f"config error: model: unknown {cfg.model!r}; presets: tiny, mini, gpt-small, or module:function"
        ) from None
    except TypeError as e:
        raise ConfigError(f"config error: modelArgs: {e}") from None


class Trainer:
    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.flag = PreemptionFlag()
        self.flag.install()  # first: a signal during slow start-up must not kill the process
        if not lifecycle.die_with_launcher():
            raise SystemExit(EXIT_CRASH)  # the launcher is already gone: nobody would report our result
        self.rank = int(os.environ.get("RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.restart_count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
        self.log = EventLog(cfg.job_name, self.rank)
        self.accum = cfg.accumulation(self.world)  # ConfigError -> exit 2 before any collective
        if cfg.threads:
            torch.set_num_threads(cfg.threads)

    # ---- setup ---------------------------------------------------------------------------------
    def _init_dist(self) -> None:
        self.cuda = torch.cuda.is_available()
        self.device = torch.device(f"cuda:{self.local_rank}") if self.cuda else torch.device("cpu")
        if self.cuda:
            torch.cuda.set_device(self.device)
        # gloo next to nccl: async checkpoint collectives run on CPU in a background thread
        backend = "cpu:gloo,cuda:nccl" if self.cuda else "gloo"
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            # torchrun's agent store outlives a group restart, and gloo's address exchange would read the
            # dead group's keys (seen here: restarted ranks dialling the killed worker's port). A prefix
            # per restart gives each incarnation a clean namespace.
            base = dist.TCPStore(
                os.environ["MASTER_ADDR"],
                int(os.environ["MASTER_PORT"]),
                world_size=self.world,
                is_master=False,
                timeout=timedelta(minutes=10),
            )
            store = dist.PrefixStore(f"trainplane/restart-{self.restart_count}", base)
            dist.init_process_group(backend, store=store, rank=self.rank, world_size=self.world)
        elif "MASTER_ADDR" in os.environ:
            dist.init_process_group(backend)
        else:  # a plain single process: a group of one keeps one code path
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        self.ckpt_pg = dist.new_group(backend="gloo")

    def _wrap(self, model: nn.Module) -> tuple[nn.Module, nn.Module]:
        model.to(self.device)
        if self.cfg.parallelism == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for m in getattr(model, "blocks", []):
                fully_shard(m)
            fully_shard(model)
            wrapped: nn.Module = model
        else:
            wrapped = DDP(model, device_ids=[self.local_rank] if self.cuda else None)
        attach(wrapped, self.clock)
        fwd = torch.compile(wrapped) if self.cfg.compile else wrapped
        return wrapped, fwd

    def _sync_ctx(self, sync: bool) -> contextlib.AbstractContextManager[Any]:
        if sync:
            return contextlib.nullcontext()
        if isinstance(self.model, DDP):
            return self.model.no_sync()
        self.model.set_requires_gradient_sync(False)  # FSDP2: re-enabled below for the last micro-batch
        return contextlib.nullcontext()

    def _state(self, step: int, rng: bytes) -> dict[str, Any]:
        msd, osd = get_state_dict(self.model, self.opt)
        return {
            "model": msd,
            "optim": osd,
            "sched": self.sched.state_dict(),
            "train": {
                "step": step,
                "samples": step * self.cfg.global_batch_size,
                "world_size": self.world,
                "preemptions": self.preemptions,
                "resumes": self.resumes,
                "rng": rng,
            },
        }

    def _save(self, step: int, asynchronous: bool) -> bool:
        """Save at ``step``; returns whether a synchronous save committed (collective). Raises SaveFailed."""
        assert self.store is not None
        with self.watchdog.paused("checkpoint_save"):
            # The previous async save runs collectives on ckpt_pg in its own thread; gloo cannot interleave
            # two threads' collectives on one group, so it must be finished before we gather here.
            self.store.wait()
            self._after_save_poll()
            mine = self.store.take_outcome()
            gathered: list[Any] = [None] * self.world
            dist.all_gather_object(gathered, (_rng_state(), mine), group=self.ckpt_pg)
            outcomes = [g[1] for g in gathered if g[1] is not None]
            if outcomes:  # the previous (async) save: failed for the job if it failed on any rank
                self._account(failed=any(outcomes), seen_here=mine is True)
            states = [g[0] for g in gathered]
            ok = self.store.save(self._state(step, pickle.dumps(states)), step, asynchronous=asynchronous)
            if not asynchronous:
                self.store.take_outcome()  # a sync save's outcome is collective already: account it now
                self._after_save_poll()
                self._account(failed=not ok, seen_here=not ok)
            self.saved_step = step if ok else self.saved_step
            return ok

    def _account(self, failed: bool, seen_here: bool) -> None:
        if not failed:
            self.failed_in_row = 0
            return
        if not seen_here:  # failed on another rank (e.g. rank 0's manifest): count it here too
            self.metrics.save_failures.inc()
        self.failed_in_row += 1
        limit = self.cfg.checkpoint.max_consecutive_failures
        if self.failed_in_row >= limit:
            raise SaveFailed(f"{self.failed_in_row} checkpoint saves failed in a row: {self.store_error()}")

    def store_error(self) -> str:
        return (self.store.last_error if self.store is not None else "") or "failed on another rank"

    def _check_config(self, cand: Candidate) -> None:
        if cand.manifest.get("config_hash") == self.cfg.training_hash():
            return
        stored, current = cand.manifest.get("config"), self.cfg.training_config()
        if self.cfg.allow_config_change:
            changed = config_changes(stored, current) if isinstance(stored, dict) else ["(not recorded)"]
            self.log("config_change_allowed", ckpt_step=cand.step, changed=changed)
            return
        uri = self.store.uri if self.store is not None else ""
        raise CollectiveConfigError(config_change_error(cand.step, uri, stored, current))

    def _resume(self) -> int:
        assert self.store is not None
        with self.watchdog.paused("checkpoint_load"):
            cands, damaged = self.store.candidates()
            self.metrics.load_failures.inc(damaged)
            if self.rank == 0:
                self.store.clean_torn()
            if not cands and not damaged:
                self.log("fresh_start")
                return 0
            for cand in cands:
                self._check_config(cand)
                t0 = time.perf_counter()
                problem = self.store.verify(cand)
                if problem is None:
                    problem = self._load(cand)
                if problem is not None:
                    self.metrics.load_failures.inc()
                    self.store.mark_skipped(cand.step, problem)
                    continue
                return self._resumed(cand, time.perf_counter() - t0)
        tried = ", ".join(str(c.step) for c in cands) or "none passed the size check"
        raise CollectiveConfigError(
            f"checkpoint error: no loadable checkpoint under {self.store.uri} (tried steps: {tried}; "
            "see checkpoint_corrupt_skipped events); they were kept as damaged-step-*, not deleted"
        )

    def _load(self, cand: Candidate) -> str | None:
        """Load one candidate into model/optimizer/scheduler; the problem, agreed by all ranks, or None."""
        assert self.store is not None
        problem: str | None = None
        try:
            state = self._state(0, b"")
            self.store.load(state, cand)
            set_state_dict(
                self.model, self.opt, model_state_dict=state["model"], optim_state_dict=state["optim"]
            )
            self.sched.load_state_dict(state["sched"])
            tr = state["train"]
            self._loaded = (tr, pickle.loads(tr["rng"]))
        except CheckpointError as e:
            problem = f"load failed: {e}"
        except Exception as e:  # unpickling, a missing key, a shape mismatch...
            problem = f"load failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
        return self.store._agree(problem)

    def _resumed(self, cand: Candidate, dt: float) -> int:
        step, man = cand.step, cand.manifest
        tr, rngs = self._loaded
        self.preemptions, self.resumes = int(tr["preemptions"]), int(tr["resumes"]) + 1
        if int(tr["world_size"]) == self.world:
            _set_rng_state(rngs[self.rank])
        else:
            # Per-rank streams cannot be split or merged; re-derive them. Data order is unaffected (it
            # depends only on seed, epoch and offset); only dropout-like noise differs from a fixed-size run.
            _seed_rank(self.cfg.seed, step, self.rank)
            self.log("rng_reseeded", from_world_size=int(tr["world_size"]), to_world_size=self.world)
        self.metrics.load_seconds.set(dt)
        self.metrics.load_bytes.set(man["bytes"])
        self.log(
            "resumed",
            ckpt_step=step,
            samples=int(tr["samples"]),
            from_world_size=int(tr["world_size"]),
            load_s=round(dt, 4),
            bytes=man["bytes"],
            verified="crc32" if man.get("crc32") else "sizes",
        )
        self.saved_step = step
        return step

    def _probe(self) -> None:
        """Rank 0 writes a probe object under the checkpoint root before the first step; all ranks agree."""
        box: list[str | None] = [None]
        if self.rank == 0:
            try:
                probe_root(self.cfg.checkpoint.uri or "")
            except Exception as e:
                box[0] = probe_error(self.cfg.checkpoint.uri or "", e)
        dist.broadcast_object_list(box, src=0, group=self.ckpt_pg)
        if box[0]:
            raise CollectiveConfigError(box[0])

    # ---- run -----------------------------------------------------------------------------------
    def run(self) -> int:
        cfg = self.cfg
        self._init_dist()
        self.log(
            "start",
            world_size=self.world,
            accumulation=self.accum,
            pid=os.getpid(),
            restart_count=self.restart_count,
            config_hash=cfg.training_hash(),
        )
        if self.local_rank == 0:
            lifecycle.new_incarnation()
        self.metrics = m = Metrics(cfg.job_name)
        m.hangs.inc(lifecycle.hang_incidents())
        serving = bool(cfg.metrics_port) and self.local_rank == 0
        self.watchdog = Watchdog(
            cfg.watchdog,
            self.log,
            on_fire=self._on_hang,
            linger_s=cfg.watchdog.export_grace_seconds if serving else 0.0,
            code=EXIT_HANG,
        )
        self.clock = StepClock(self.cuda)
        if cfg.checkpoint.uri:
            self._probe()  # before building anything: a root we cannot write is a config error
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        model = build_model(cfg)
        vocab = getattr(getattr(model, "config", None), "vocab_size", cfg.model_args.get("vocab_size", 256))
        dataset = build_dataset(cfg, vocab)
        self.raw_model = model
        self.model, fwd = self._wrap(model)
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
        )
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: lr_factor(cfg, s))
        self.preemptions = self.resumes = 0
        self.saved_step = -1
        self.failed_in_row = 0
        self._failures_seen = 0
        self._reported: Any = None
        self.store: CheckpointStore | None = None
        start = 0
        if serving:  # before the resume, so that a slow or failing resume is visible too
            m.serve(cfg.metrics_port)
            self.log("metrics_listening", port=cfg.metrics_port)
        m.info.labels(job=cfg.job_name, parallelism=cfg.parallelism).set(1)
        m.world_size.set(self.world)
        m.restarts.set(self.restart_count)
        if cfg.checkpoint.uri:
            self.store = CheckpointStore(
                cfg.checkpoint.uri,
                keep=cfg.checkpoint.keep,
                config_hash=cfg.training_hash(),
                config=cfg.training_config(),
                thread_count=cfg.checkpoint.thread_count,
                process_group=self.ckpt_pg,
                rank=self.rank,
                world_size=self.world,
                log=self.log,
            )
            start = self._resume()
        if start == 0:
            _seed_rank(cfg.seed, 0, self.rank)
        self.log.step = start
        m.resumes.set(self.resumes)
        m.preemptions.set(self.preemptions)
        m.step.set(start)

        sampler = ElasticSampler(
            len(dataset),
            cfg.seed,
            cfg.global_batch_size,
            cfg.micro_batch_size,  # type: ignore[arg-type]
            self.world,
            self.rank,
            start,
            cfg.steps,
        )
        loader = DataLoader(
            Indexed(dataset),
            batch_size=cfg.micro_batch_size,
            sampler=sampler,
            num_workers=cfg.num_workers,
            worker_init_fn=worker_init,
            # its own generator: creating the iterator must not consume the training RNG
            generator=torch.Generator().manual_seed(cfg.seed),
            pin_memory=self.cuda,
        )
        self.watchdog.start()
        try:
            code = self._loop(fwd, loader, start)
        except SaveFailed as e:
            self.log("checkpoint_saves_failed_exit", exit_code=EXIT_SAVE_FAILED, error=str(e))
            print(f"trainplane: {e}", file=sys.stderr)
            code = EXIT_SAVE_FAILED
        finally:
            self.watchdog.stop()
            if self.store is not None:
                self.store.close()
        if code == EXIT_OK and self.local_rank == 0:
            # complete: a SIGTERM to the launcher from now on (pod deletion at the end) must give 0
            lifecycle.mark(lifecycle.FINISHED, {"step": cfg.steps})
        dist.destroy_process_group()
        return code

    def _on_hang(self) -> None:
        self.metrics.hangs.inc()
        lifecycle.mark(f"{lifecycle.HANG_PREFIX}{self.restart_count}", {"rank": self.rank})
        _mark_exit(self.rank, EXIT_HANG)

    def _loop(self, fwd: nn.Module, loader: DataLoader[Any], start: int) -> int:
        cfg, m = self.cfg, self.metrics
        bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and self.cuda)
        autocast = (
            torch.autocast(self.device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        )
        recorder = self._recorder()
        peak = gpu_peak_flops(torch.cuda.get_device_name(self.device)) if self.cuda else None
        model_cfg = getattr(self.raw_model, "config", None)
        flops_tok = model_cfg.flops_per_token() if hasattr(model_cfg, "flops_per_token") else None
        tokens_step = cfg.global_batch_size * cfg.seq_len
        progress = Progress(cfg.steps, start, enabled=self.rank == 0)
        it = iter(loader)
        # One collective per step carries the loss, the preemption vote (any rank signalled) and every
        # rank's own compute time (each rank fills its slot; the sum gives all of them to all ranks).
        vote = torch.zeros(2 + self.world, dtype=torch.float64)
        clock = self.clock
        loss = float("nan")
        try:
            for step in range(start, cfg.steps):
                t0 = time.perf_counter()
                clock.start()
                loss_sum = torch.zeros((), device=self.device)
                seen: list[int] = []
                for a in range(self.accum):
                    idx, x = next(it)
                    x = x.to(self.device, non_blocking=True)
                    last = a == self.accum - 1
                    if last and not isinstance(self.model, DDP):
                        self.model.set_requires_gradient_sync(True)
                    with self._sync_ctx(last), autocast:
                        logits = fwd(x[:, :-1])
                        micro = F.cross_entropy(
                            logits.float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1)
                        )
                    (micro / self.accum).backward()
                    loss_sum += micro.detach() / self.accum
                    if recorder:
                        seen.extend(idx.tolist())
                clock.backward_done()
                if cfg.grad_clip:
                    nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
                self.opt.step()
                self.sched.step()
                self.opt.zero_grad(set_to_none=True)
                done = step + 1
                clock.before_vote()
                vote.zero_()
                vote[0], vote[1] = float(loss_sum), float(self.flag.set)
                vote[2 + self.rank] = clock.compute_seconds()
                dist.all_reduce(vote)
                loss, preempt = float(vote[0]) / self.world, bool(vote[1] > 0)
                dt = time.perf_counter() - t0
                self.watchdog.step_done(dt)
                self.log.step = done
                m.step.set(done)
                m.loss.set(loss)
                m.step_seconds.set(dt)
                m.tokens_per_second.set(tokens_step / dt)
                m.tokens.inc(tokens_step)
                if self.rank == 0:
                    for r, sec in enumerate(vote[2:].tolist()):
                        m.rank_step_seconds.labels(rank=str(r)).set(sec)
                if peak and flops_tok:
                    m.mfu.set(flops_tok * tokens_step / dt / (peak * self.world))
                if recorder:
                    recorder.write(
                        json.dumps(
                            {
                                "step": step,
                                "attempt": self.attempt,
                                "rank": self.rank,
                                "world_size": self.world,
                                "indices": seen,
                            }
                        )
                        + "\n"
                    )
                    recorder.flush()
                if done % cfg.log_interval == 0 or done == cfg.steps:
                    self.log(
                        "step_done",
                        loss=round(loss, 6),
                        step_s=round(dt, 5),
                        compute_s=round(float(vote[2 + self.rank]), 5),
                        tokens_per_s=round(tokens_step / dt, 1),
                        lr=self.sched.get_last_lr()[0],
                    )
                progress.update(done, loss)
                if self.store is not None:
                    self._after_save_poll()
                # At the last step a signal changes nothing: the final save below is the checkpoint,
                # and the run is complete (exit 0), not preempted.
                if preempt and done < cfg.steps:
                    return self._preempt(done)
                due = done % cfg.checkpoint.interval_steps == 0 or done == cfg.steps
                if self.store is not None and due:
                    final = done == cfg.steps
                    ok = self._save(done, asynchronous=cfg.checkpoint.async_save and not final)
                    self._after_save_poll()
                    if final and not ok:
                        raise SaveFailed(f"the final checkpoint (step {done}) failed: {self.store_error()}")
        finally:
            progress.close()
            if recorder:
                recorder.close()
        if self.store is not None:
            with self.watchdog.paused("checkpoint_save"):
                self.store.wait()
            self._after_save_poll()
        self.log("finished", loss=round(loss, 6), steps=cfg.steps)
        return EXIT_OK

    def _after_save_poll(self) -> None:
        assert self.store is not None
        self.store.poll()
        m = self.metrics
        if self.store.failures > self._failures_seen:
            m.save_failures.inc(self.store.failures - self._failures_seen)
            self._failures_seen = self.store.failures
        res = self.store.last_result
        if res is not None and res is not self._reported:
            self._reported = res
            m.saves.inc()
            m.save_seconds.set(res.seconds)
            m.save_blocking_seconds.set(res.blocking_seconds)
            if self.rank == 0:
                m.save_bytes.set(res.bytes)
            m.last_checkpoint_step.set(res.step)

    def _preempt(self, done: int) -> int:
        self.log("preemption_agreed", signal=self.flag.name or "peer", signals_received=self.flag.count)
        if self.store is None:
            self.log("preempted_without_checkpoint", reason="no checkpoint.uri configured")
            return EXIT_CRASH
        with self.watchdog.paused("checkpoint_save"):
            self.store.wait()
            self.preemptions += 1
            self.metrics.preemptions.set(self.preemptions)
            # also when `done` was just saved: the count must persist
            if not self._save(done, asynchronous=False):
                raise SaveFailed(f"the preemption checkpoint (step {done}) failed: {self.store_error()}")
            self._after_save_poll()
            dist.barrier(group=self.ckpt_pg)  # every rank knows the commit happened
        if self.local_rank == 0:
            lifecycle.mark(lifecycle.PREEMPTED, {"step": done})
        since = time.monotonic() - self.flag.received_at if self.flag.received_at else None
        self.log(
            "preempted_exit",
            exit_code=EXIT_PREEMPTED,
            ckpt_step=done,
            signal_to_exit_s=round(since, 4) if since is not None else None,
        )
        return EXIT_PREEMPTED

    def _recorder(self) -> Any:
        if not self.cfg.record_samples:
            return None
        # One id per incarnation, shared by its ranks, sortable: later attempts redo uncommitted steps.
        box = [f"{time.time():020.6f}"]
        dist.broadcast_object_list(box, src=0, group=self.ckpt_pg)
        self.attempt = box[0]
        Path(self.cfg.record_samples).mkdir(parents=True, exist_ok=True)
        return open(Path(self.cfg.record_samples) / f"samples-{self.attempt}-r{self.rank}.jsonl", "a")


def _mark_exit(rank: int, code: int) -> None:
    if code not in (EXIT_OK, EXIT_PREEMPTED):
        lifecycle.mark(f"{lifecycle.EXIT_PREFIX}{rank}", {"code": code, "time": time.time()})


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    _mark_exit(int(os.environ.get("RANK", 0)), code)
    return code


def _main(argv: list[str] | None) -> int:
    try:
        path, sets = parse_args(argv)
        cfg = load_config(path, sets)
        trainer = Trainer(cfg)
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG
    try:
        return trainer.run()
    except CollectiveConfigError as e:
        if trainer.rank == 0:  # every rank reached it together: one line for the job, not one per rank
            print(str(e), file=sys.stderr)
        return EXIT_CONFIG
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG
