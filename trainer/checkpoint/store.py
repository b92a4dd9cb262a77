"""CheckpointStore: decides when to save, saves (synchronously or async), commits and accounts.

A save is committed when rank 0 has written the manifest after DCP returned; retention runs after each
commit. One save is in flight at a time (the checkpoint process group is shared); an async save blocks
the loop only for staging the state into CPU memory (on a GPU, not even that: the copy runs in DCP's
staging thread and the trainer waits for it before the next optimizer step, ``wait_staged``), and its
failure is collected later, at a step boundary (``take_outcome``).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException
from torch.distributed.checkpoint.state_dict_saver import AsyncSaveResponse
from torch.distributed.checkpoint.stateful import Stateful

from trainer.checkpoint.manifest import (
    MANIFEST,
    ManifestFields,
    SaveResult,
    build_manifest,
    file_sizes,
    one_line,
    write_manifest,
)
from trainer.checkpoint.root import CheckpointRoot, Group
from trainer.checkpoint.stager import ReusableStager, _CpuStager, default_stager
from trainer.checkpoint.writers import make_writer
from trainer.contract import ENV_CKPT_STAGING, ENV_FAULT_COMMIT_DELAY

if TYPE_CHECKING:
    from trainer.config import TrainConfig


@dataclass(frozen=True)
class SaveSchedule:
    """When to save: every ``interval`` steps and at ``last_step``; periodic saves async if allowed.

    >>> s = SaveSchedule(interval=10, last_step=25)
    >>> [step for step in range(1, 26) if s.due(step)], s.asynchronous(10), s.asynchronous(25)
    ([10, 20, 25], True, False)
    """

    interval: int | None = None  # None: only explicit saves
    last_step: int | None = None
    async_save: bool = True

    def due(self, step: int) -> bool:
        return step == self.last_step or (self.interval is not None and step % self.interval == 0)

    def is_last(self, step: int) -> bool:
        return step == self.last_step

    def asynchronous(self, step: int) -> bool:
        """The final save is synchronous: the run is complete only once it committed."""
        return self.async_save and not self.is_last(step)


@dataclass
class _InFlight:
    """The async save in flight: its commit (a Future of the pool), DCP's staging Future while the copy
    may still run in the background, and what the training thread has waited for it so far."""

    step: int
    commit: Future[SaveResult]
    staging: Future[None] | None
    blocked: float


def _shard_bytes(writer: Any) -> int | None:
    """What a rank other than 0 reports in ``checkpoint_shards_written``: the bytes of its own shard files
    (rank 0 reports the whole checkpoint, from the manifest). None when the writer does not count them
    (checksums off, in benchmarks only): unknown, rather than 0 for shards that were written."""
    written = getattr(writer, "written", None)
    return int(written) if written is not None else None


def materialise(state: Mapping[str, Any]) -> dict[str, Any]:
    """Statefuls -> their state dicts (what DCP itself does first); plain values as they are."""
    return {k: v.state_dict() if isinstance(v, Stateful) else v for k, v in state.items()}


class CheckpointStore(CheckpointRoot):
    """Saves, commits, finds, verifies, loads and prunes checkpoints under one root."""

    checksums = True  # False only to measure what they cost (tests/benchmarks/bench_trainer.py)

    def __init__(
        self,
        uri: str,
        *,
        keep: int,
        config_hash: str,
        config: dict[str, Any] | None = None,
        thread_count: int = 4,
        group: Group | None = None,
        log: Callable[..., None] | None = None,
        schedule: SaveSchedule | None = None,
    ) -> None:
        super().__init__(uri, keep=keep, group=group, log=log)
        self.thread_count = thread_count
        self.schedule = schedule or SaveSchedule()
        self._fields = ManifestFields(self.world_size, config_hash, config or {})
        self._pool: ThreadPoolExecutor | None = None
        self._pending: _InFlight | None = None
        self._stagers: tuple[_CpuStager, ReusableStager] | None = None
        self.last_result: SaveResult | None = None
        # Outcome of the newest finished save that the trainer has not collected yet: True failed,
        # False committed, None nothing new. Failures of async saves surface here, at a step boundary.
        self._outcome: bool | None = None
        self.last_error = ""
        self.failures = 0  # saves that failed as seen by this rank

    @classmethod
    def for_run(cls, cfg: TrainConfig, group: Group, log: Callable[..., None]) -> CheckpointStore:
        """The store of a training run: its root, retention and schedule from ``cfg.checkpoint``."""
        ck = cfg.checkpoint
        return cls(
            ck.uri or "",
            keep=ck.keep,
            config_hash=cfg.training_hash(),
            config=cfg.training_config(),
            thread_count=ck.thread_count,
            group=group,
            log=log,
            schedule=SaveSchedule(ck.interval_steps, cfg.steps, ck.async_save),
        )

    @property
    def config_hash(self) -> str:
        return self._fields.config_hash

    # ---- when ----------------------------------------------------------------------------------
    def due(self, step: int) -> bool:
        """Whether ``step`` is a checkpoint step: every ``intervalSteps`` and the last step."""
        return self.schedule.due(step)

    def is_last(self, step: int) -> bool:
        return self.schedule.is_last(step)

    def asynchronous(self, step: int) -> bool:
        return self.schedule.asynchronous(step)

    # ---- save / commit -------------------------------------------------------------------------
    def save(self, state: Mapping[str, Any], step: int, *, asynchronous: bool, blocked: float = 0.0) -> bool:
        """Save ``state`` (plain values or Statefuls) as step ``step``.

        Async returns once the state is copied (staged), or with background staging once the copy
        started, True; its failure is collected later (``take_outcome``). A synchronous save returns
        whether it committed, the same answer on every rank (a collective): callers rely on it to decide
        between 143 and a failure. ``blocked``: seconds the training thread already waited for this save
        (the previous save, the outcome collective), counted in its blocking figure.
        """
        t0 = time.perf_counter()
        self.wait()  # saves are serialised: one in flight at a time, and the group is shared
        blocked += time.perf_counter() - t0
        plain = materialise(state)
        if asynchronous:
            return self._save_async(plain, step, blocked)
        return self._save_sync(plain, step, blocked)

    def _writer(self, step: int) -> Any:
        return make_writer(
            self._url(step), local=self.local, checksums=self.checksums, thread_count=self.thread_count
        )

    def _save_async(self, state: dict[str, Any], step: int, blocked: float) -> bool:
        t0 = time.perf_counter()
        writer = self._writer(step)
        cpu, default = self._stager_pair()
        stager = cpu if _CpuStager.handles(state) and not default.background else default
        try:
            res = dcp.async_save(state, storage_writer=writer, process_group=self.pg, async_stager=stager)
        except (Exception, CheckpointException) as e:
            self._failed(step, e)
            return False
        # torch 2.13 state_dict_saver.async_save: a stager whose ``stage`` returns a Future (background
        # staging) gives an AsyncSaveResponse(staging_completion, upload_completion); otherwise one Future.
        staging, upload = (
            (res.staging_completion, res.upload_completion)
            if isinstance(res, AsyncSaveResponse)
            else (None, res)
        )
        call = time.perf_counter() - t0
        commit = self._commit_pool().submit(self._finish_async, upload, writer, step, t0)
        self._pending = _InFlight(step, commit, staging, blocked + call)
        self._log(
            "checkpoint_save_started",
            ckpt_step=step,
            mode="async",
            staging="background" if staging is not None else "inline",
            blocking_s=round(blocked + call, 4),  # so far: a background copy's wait is added later
        )
        return True

    @property
    def staging_in_flight(self) -> bool:
        """Whether the save in flight may still be copying the live state (background staging)."""
        return self._pending is not None and self._pending.staging is not None

    def wait_staged(self) -> float:
        """Wait until the save in flight no longer reads the live state (its copy is staged); the seconds
        waited, added to that save's blocking figure. Call before anything changes the state in place."""
        p = self._pending
        if p is None or p.staging is None:
            return 0.0
        t0 = time.perf_counter()
        try:
            p.staging.result()
        except Exception as e:  # the upload fails with it and is collected as the save's failure
            self._log("checkpoint_staging_failed", ckpt_step=p.step, error=one_line(e))
        dt = time.perf_counter() - t0
        p.staging, p.blocked = None, p.blocked + dt
        return dt

    def _save_sync(self, state: dict[str, Any], step: int, blocked: float) -> bool:
        t0 = time.perf_counter()
        writer = self._writer(step)
        self._log("checkpoint_save_started", ckpt_step=step, mode="sync")
        problem: str | None = None
        nbytes: int | None = 0
        try:
            dcp.save(state, storage_writer=writer, process_group=self.pg)
            if self.rank == 0:
                nbytes = self._commit(step, getattr(writer, "crcs", None), fault_delay=True)
            else:
                nbytes = _shard_bytes(writer)
        except (Exception, CheckpointException) as e:
            problem = f"{type(e).__name__}: {one_line(e)}"
        # nobody reports success before the manifest exists, and everybody learns of a failed commit
        problem = self.agree(problem)
        if problem:
            self._failed(step, problem)
            return False
        dt = time.perf_counter() - t0
        if self.rank == 0:  # deleting old multi-GB checkpoints need not hold up training
            self._commit_pool().submit(self.prune, step)
        self._done(SaveResult(step, nbytes, dt, blocked + dt))
        return True

    def _finish_async(self, fut: Any, writer: Any, step: int, t0: float) -> SaveResult:
        fut.result()
        nbytes = self._commit(step, getattr(writer, "crcs", None)) if self.rank == 0 else _shard_bytes(writer)
        # the blocking figure is the training thread's to add up (``wait``): 0 here
        res = SaveResult(step, nbytes, time.perf_counter() - t0, 0.0)
        if self.rank == 0:
            self.prune(step)
        return res

    def poll(self) -> None:
        """Report a finished async save; cheap, called at step boundaries."""
        if self._pending is not None and self._pending.commit.done():
            self.wait()

    def wait(self) -> None:
        """Block until the in-flight async save (if any) is written and committed."""
        if self._pending is None:
            return
        # no wait_staged here: the commit follows the upload, which follows the staging
        p, self._pending = self._pending, None
        try:
            self._done(replace(p.commit.result(), blocking_seconds=p.blocked))
        except (Exception, CheckpointException) as e:  # CheckpointException derives from BaseException
            self._failed(p.step, e)

    def take_outcome(self) -> bool | None:
        """True if the newest finished save failed here, False if it committed, None if nothing new."""
        out, self._outcome = self._outcome, None
        return out

    def _failed(self, step: int, error: BaseException | str) -> None:
        self.last_error = error if isinstance(error, str) else f"{type(error).__name__}: {one_line(error)}"
        self._outcome = True
        self.failures += 1
        where = {}
        if isinstance(error, BaseException) and error.__traceback__ is not None:
            # the innermost frame: which library call failed is what an operator needs to report it
            last = traceback.extract_tb(error.__traceback__)[-1]
            where = {"where": f"{last.filename}:{last.lineno} in {last.name}"}
        self._log("checkpoint_failed", ckpt_step=step, error=self.last_error, **where)

    def _done(self, res: SaveResult) -> None:
        self.last_result = res
        self._outcome = False
        # only rank 0 writes the manifest; the others report that their shards are written
        event = "checkpoint_committed" if self.rank == 0 else "checkpoint_shards_written"
        self._log(
            event,
            ckpt_step=res.step,
            bytes=res.bytes,
            save_s=round(res.seconds, 4),
            blocking_s=round(res.blocking_seconds, 4),
        )

    def _commit(self, step: int, crcs: dict[str, int] | None, fault_delay: bool = False) -> int:
        d = self.step_dir(step)
        delay = float(os.environ.get(ENV_FAULT_COMMIT_DELAY, "0") or 0) if fault_delay else 0.0
        if delay:
            self._log("fault_commit_delay", ckpt_step=step, seconds=delay)
            time.sleep(delay)
        self.fs.invalidate_cache()
        files = file_sizes(self.fs, d)
        files.pop(MANIFEST, None)
        man = build_manifest(step, files, crcs, self._fields)
        write_manifest(self.fs, d, man, self.local)
        return int(man["bytes"])

    # ---- resources -----------------------------------------------------------------------------
    def _commit_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="ckpt-commit")
        return self._pool

    def _stager_pair(self) -> tuple[_CpuStager, ReusableStager]:
        # One stager for the whole run: it caches its CPU staging buffers by source storage, so after the
        # first save an async save is a copy into warm memory instead of allocating (and page-faulting)
        # the whole state again.
        background = True if os.environ.get(ENV_CKPT_STAGING) == "background" else None
        if self._stagers is None:
            self._stagers = (_CpuStager(), default_stager(background))
        elif not self._stagers[1].usable():
            self._stagers = (self._stagers[0], default_stager(background))
        return self._stagers

    def close(self) -> None:
        self.wait()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._stagers is not None:
            self._stagers[0].close()
            self._stagers[1].close()
