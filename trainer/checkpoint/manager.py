"""The trainer's side of checkpointing (torchtitan's CheckpointManager): resume, save, account.

The ``CheckpointStore`` knows how to save and when a step is due; this class knows what the job agrees on
around it: which checkpoint to resume from (verified and loaded collectively, damaged ones set aside),
whether the training config may differ from the checkpoint's, every rank's RNG streams (each rank's under
its own key of the train state, ``rng_rank_<rank>``), and whether saves keep failing
(``checkpoint.maxConsecutiveFailures`` in a row ends the run with 74). Without ``checkpoint.uri`` it does
nothing and resume starts at step 0.

The blocking figure of a save (``blocking_s`` of ``checkpoint_save_started``, so far, and of
``checkpoint_committed``/``checkpoint_shards_written``, ``SaveResult.blocking_seconds`` and the gauge
``trainplane_checkpoint_save_blocking_seconds``, in full) is every wait the training thread makes for it:
waiting for the previous save to commit, the collective that agrees on that save's outcome, the save call
itself (state dicts, planning of a synchronous save, an inline copy) and, with background staging, the wait
for the copy before the next change to the saved state (``before_state_changes``).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.stateful import Stateful

from trainer.checkpoint import Candidate, CheckpointError, CheckpointStore, Group, materialise
from trainer.checkpoint.writers import probe_error, probe_root
from trainer.config import ConfigError, TrainConfig, config_change_error, config_changes
from trainer.metrics import Metrics
from trainer.state import TrainState, rng_state, seed_rank, set_rng_state
from trainer.watchdog import Watchdog


class CollectiveConfigError(ConfigError):
    """A configuration error every rank reached together (rank 0 prints it, the others only exit 2)."""


class SaveFailed(Exception):
    """Checkpoint saves failed for good: the run ends with EXIT_SAVE_FAILED."""


def probe_collectively(uri: str, rank: int, group: dist.ProcessGroup) -> None:
    """Rank 0 writes a probe object under the checkpoint root before the first step; all ranks agree."""
    box: list[str | None] = [None]
    if rank == 0:
        try:
            probe_root(uri)
        except Exception as e:
            box[0] = probe_error(uri, e)
    dist.broadcast_object_list(box, src=0, group=group)
    if box[0]:
        raise CollectiveConfigError(box[0])


class Checkpointer:
    """Resumes and saves ``states`` (Statefuls by checkpoint key) and the train state, collectively."""

    def __init__(
        self,
        cfg: TrainConfig,
        states: Mapping[str, Stateful],
        train_state: TrainState,
        *,
        group: Group,
        log: Callable[..., None],
        metrics: Metrics,
        watchdog: Watchdog,
    ) -> None:
        self.cfg, self.group, self.log, self.metrics, self.watchdog = cfg, group, log, metrics, watchdog
        self.train_state = train_state
        train_state.rank = group.rank  # which RNG key of the train state is this rank's
        # checkpoint keys in the order every checkpoint so far was written: model, optim, sched, train
        self.states: dict[str, Stateful] = {**states, "train": train_state}
        self.store = CheckpointStore.for_run(cfg, group, log) if cfg.checkpoint.uri else None
        self.failed_in_row = 0  # saves that failed for the job, in a row
        self._failures_seen = 0  # the store's own failure count, as already exported
        self._reported: Any = None  # the last save result exported as metrics

    @property
    def enabled(self) -> bool:
        return self.store is not None

    # ---- resume --------------------------------------------------------------------------------
    def resume(self) -> int:
        """Load the newest loadable checkpoint into the states; the step to continue from (0: fresh)."""
        if self.store is None:
            return 0
        store = self.store
        with self.watchdog.paused("checkpoint_load"):
            cands, damaged = store.candidates()
            self.metrics.load_failures.inc(damaged)
            if self.group.rank == 0:
                store.clean_torn()
            if not cands and not damaged:
                self.log("fresh_start")
                return 0
            for cand in cands:
                self._check_config(cand)
                t0 = time.perf_counter()
                problem = store.verify(cand)
                rng: dict[str, Any] | None = None
                if problem is None:
                    problem, rng = self._load(cand)
                if problem is None:
                    return self._resumed(cand, rng, time.perf_counter() - t0)
                self.metrics.load_failures.inc()
                store.mark_skipped(cand.step, problem)
        tried = ", ".join(str(c.step) for c in cands) or "none passed the size check"
        raise CollectiveConfigError(
            f"checkpoint error: no loadable checkpoint under {store.uri} (tried steps: {tried}; "
            "see checkpoint_corrupt_skipped events); they were kept as damaged-step-*, not deleted"
        )

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

    def _load(self, cand: Candidate) -> tuple[str | None, dict[str, Any] | None]:
        """Load one candidate into the states: (the problem agreed by all ranks or None, this rank's RNG
        states, None where the checkpoint has none for this rank: it was saved at another world size)."""
        assert self.store is not None
        problem: str | None = None
        rng: dict[str, Any] | None = None
        ts = self.train_state
        try:
            loaded = materialise(self.states)  # the layout to load into; DCP fills it in place
            # only the RNG keys the checkpoint has: this rank's own, or an older checkpoint's gathered list
            loaded["train"] = ts.load_layout(self.store.saved_keys(cand))
            self.store.load(loaded, cand)
            for key, obj in self.states.items():
                obj.load_state_dict(loaded[key])
            if ts.world_size == self.group.world_size:
                rng = ts.saved_rng()
        except CheckpointError as e:
            problem = f"load failed: {e}"
        except Exception as e:  # unpickling, a missing key, a shape mismatch...
            problem = f"load failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}"
        return self.store.agree(problem), rng

    def _resumed(self, cand: Candidate, rng: dict[str, Any] | None, dt: float) -> int:
        ts, world, rank = self.train_state, self.group.world_size, self.group.rank
        saved_world = ts.world_size
        ts.resumes += 1
        ts.rng = ts.own_rng = b""  # saved again at the next save, by each rank under its own key
        if saved_world == world and rng is not None:
            set_rng_state(rng)
        else:
            # Per-rank streams cannot be split or merged; re-derive them. Data order is unaffected (it
            # depends only on seed, epoch and offset); only dropout-like noise differs from a fixed-size run.
            seed_rank(self.cfg.seed, cand.step, rank)
            self.log("rng_reseeded", from_world_size=saved_world, to_world_size=world)
        ts.world_size = world
        self.metrics.load_seconds.set(dt)
        self.metrics.load_bytes.set(cand.manifest["bytes"])
        self.log(
            "resumed",
            step=cand.step,  # the step training continues from (the log's own step is set after this)
            ckpt_step=cand.step,
            samples=ts.samples,
            from_world_size=saved_world,
            load_s=round(dt, 4),
            bytes=cand.manifest["bytes"],
            verified="crc32" if cand.manifest.get("crc32") else "sizes",
        )
        return cand.step

    # ---- save ----------------------------------------------------------------------------------
    def maybe_save(self, step: int) -> None:
        """Save if the store says ``step`` is due; a failed final save ends the run (SaveFailed)."""
        if self.store is None or not self.store.due(step):
            return
        ok = self.save(step, asynchronous=self.store.asynchronous(step))
        self.poll()
        if self.store.is_last(step) and not ok:
            raise SaveFailed(f"the final checkpoint (step {step}) failed: {self._error()}")

    def save_for_preemption(self, step: int) -> None:
        """Save synchronously and wait until every rank knows it committed; SaveFailed if it did not."""
        with self.watchdog.paused("checkpoint_save"):
            if not self.save(step, asynchronous=False):
                raise SaveFailed(f"the preemption checkpoint (step {step}) failed: {self._error()}")
            self.poll()
            dist.barrier(group=self.group.pg)  # every rank knows the commit happened

    def save(self, step: int, asynchronous: bool) -> bool:
        """Save at ``step``; returns whether a synchronous save committed (collective). Raises SaveFailed."""
        assert self.store is not None and self.train_state.step == step
        with self.watchdog.paused("checkpoint_save"):
            t0 = time.perf_counter()  # from here on, every wait counts in this save's blocking figure
            # The previous async save runs collectives on the group in its own thread; gloo cannot
            # interleave two threads' collectives on one group, so it must be finished before ours.
            self.store.wait()
            self.poll()
            mine = self.store.take_outcome()
            # The outcome of the previous (async) save, agreed by one int: failed for the job if it
            # failed on any rank (2), committed (1), nothing new anywhere (0).
            agreed = self._agree_outcome(mine)
            if agreed:
                self._account(failed=agreed == 2, seen_here=mine is True)
            self.train_state.own_rng = pickle.dumps(rng_state())  # saved under this rank's own key
            blocked = time.perf_counter() - t0
            ok = self.store.save(self.states, step, asynchronous=asynchronous, blocked=blocked)
            if not asynchronous:
                self.store.take_outcome()  # a sync save's outcome is collective already: account it now
                self.poll()
                self._account(failed=not ok, seen_here=not ok)
            return ok

    def _agree_outcome(self, mine: bool | None) -> int:
        """The job's view of the previous save: the max over ranks of 0 (nothing new), 1 (committed)
        and 2 (failed)."""
        code = torch.tensor([0 if mine is None else 2 if mine else 1], dtype=torch.int64)
        if self.group.pg is not None or dist.is_initialized():
            dist.all_reduce(code, op=dist.ReduceOp.MAX, group=self.group.pg)
        return int(code.item())

    def before_state_changes(self) -> None:
        """Called by the trainer right before the first call that changes, in place, the state a save in
        flight may still be copying in the background (``optimizer.step()``; the forward too for a model with
        buffers): wait for that copy (counted as blocking)."""
        if self.store is not None and self.store.staging_in_flight:
            with self.watchdog.paused("checkpoint_save"):  # a hang here is the save's, under its timeout
                self.store.wait_staged()

    def _account(self, failed: bool, seen_here: bool) -> None:
        if not failed:
            self.failed_in_row = 0
            return
        if not seen_here:  # failed on another rank (e.g. rank 0's manifest): count it here too
            self.metrics.save_failures.inc()
        self.failed_in_row += 1
        if self.failed_in_row >= self.cfg.checkpoint.max_consecutive_failures:
            raise SaveFailed(f"{self.failed_in_row} checkpoint saves failed in a row: {self._error()}")

    def _error(self) -> str:
        return (self.store.last_error if self.store is not None else "") or "failed on another rank"

    def poll(self) -> None:
        """Collect a finished async save and export what this rank saw: failures, the last commit."""
        if self.store is None:
            return
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
            if self.group.rank == 0 and res.bytes is not None:
                m.save_bytes.set(res.bytes)
            m.last_checkpoint_step.set(res.step)

    def finish(self) -> None:
        """The run is over: wait for the save in flight and export its result."""
        if self.store is None:
            return
        with self.watchdog.paused("checkpoint_save"):
            self.store.wait()
        self.poll()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
