"""A checkpoint root as resume and retention see it: which steps exist, which are committed, damaged or
torn, reading them back (CRC-32 verification, DCP load), moving damaged ones aside and pruning old ones.

Every decision that ranks must share is collective on the checkpoint process group (rank 0 lists and
decides, the others receive the answer), so all ranks move on together.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import fsspec
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException

from trainer.checkpoint.manifest import (
    SKIPPED,
    STEP_RE,
    Candidate,
    CheckpointError,
    Inspection,
    file_problem,
    inspect_dir,
    one_line,
    protocols,
)
from trainer.checkpoint.writers import make_reader


@dataclass(frozen=True)
class Group:
    """The ranks that save together: the process group DCP uses (None: one process), and our place in it."""

    pg: dist.ProcessGroup | None = None
    rank: int = 0
    world_size: int = 1


def _no_log(*_: Any, **__: Any) -> None:
    pass


class CheckpointRoot:
    """Finds, inspects, verifies, loads, sets aside and prunes the checkpoints under one root."""

    def __init__(
        self, uri: str, *, keep: int, group: Group | None = None, log: Callable[..., None] | None = None
    ) -> None:
        self.uri = uri.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.uri)
        self.local = "file" in protocols(self.fs)
        self.keep = keep
        self.group = group or Group()
        self.pg, self.rank, self.world_size = self.group.pg, self.group.rank, self.group.world_size
        self.thread_count = 4  # reader threads for verification; the store sets its writer count
        self._log = log or _no_log
        self._lock = threading.Lock()  # retention runs in the commit thread

    # ---- paths ---------------------------------------------------------------------------------
    def step_dir(self, step: int) -> str:
        return f"{self.root}/step-{step}"

    def _url(self, step: int) -> str:
        return self.step_dir(step) if self.local else f"{self.uri}/step-{step}"

    # ---- discovery -----------------------------------------------------------------------------
    def all_steps(self) -> list[int]:
        self.fs.invalidate_cache()
        try:
            names = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        steps = [int(m.group(1)) for n in names if (m := STEP_RE.match(n.rstrip("/").rsplit("/", 1)[-1]))]
        return sorted(steps)

    def inspect(self, step: int) -> Inspection:
        """("ok", manifest, ""), ("torn", None, why) or ("damaged", manifest-or-None, why)."""
        return inspect_dir(self.fs, self.step_dir(step), step)

    def manifest(self, step: int) -> dict[str, Any] | None:
        """The manifest of a step if the checkpoint is committed and its files have the listed sizes."""
        status, man, _ = self.inspect(step)
        return man if status == "ok" else None

    def committed_steps(self) -> list[int]:
        return [s for s in self.all_steps() if self.manifest(s) is not None]

    def newest_committed(self) -> Candidate | None:
        for s in reversed(self.all_steps()):
            man = self.manifest(s)
            if man is not None:
                return Candidate(s, man)
        return None

    def candidates(self) -> tuple[list[Candidate], int]:
        """Committed checkpoints to try, newest first, and how many damaged ones were skipped.

        Rank 0 lists and logs; every rank gets the same answer (a collective on the checkpoint group).
        """
        box: list[Any] = [None]
        if self.rank == 0:
            box[0] = self._list_candidates()
        self._bcast(box)
        return box[0]

    def _list_candidates(self) -> tuple[list[Candidate], int]:
        found: list[Candidate] = []
        damaged = 0
        for s in reversed(self.all_steps()):
            status, man, why = self.inspect(s)
            if status == "ok":
                assert man is not None
                found.append(Candidate(s, man))
            elif status == "torn":
                self._log("checkpoint_torn_skipped", ckpt_step=s, path=self._url(s), reason=why)
            else:
                damaged += 1
                self.mark_skipped(s, why)
        return found, damaged

    def _bcast(self, box: list[Any]) -> None:
        if self.pg is not None and dist.is_initialized():
            dist.broadcast_object_list(box, src=0, group=self.pg)

    def agree(self, problem: str | None) -> str | None:
        """Collective: every rank's problem (or None) -> the first one found, the same on every rank."""
        if self.pg is None or not dist.is_initialized():
            return problem
        out: list[str | None] = [None] * dist.get_world_size(self.pg)
        dist.all_gather_object(out, problem, group=self.pg)
        return next((p for p in out if p), None)

    # ---- verification and load -----------------------------------------------------------------
    def verify(self, cand: Candidate) -> str | None:
        """Read the files back and compare CRC-32 with the manifest; collective. Returns the problem or None.

        The files are split over the ranks (file i is read by rank i mod world), so the job reads the
        checkpoint once in total, in parallel. Manifests of format 1 carry no checksums: sizes only.
        """
        crcs = cand.manifest.get("crc32") or {}
        names = sorted(crcs)
        world = dist.get_world_size(self.pg) if self.pg is not None and dist.is_initialized() else 1
        mine = names[self.rank % world :: world] if world > 1 else names
        d = self.step_dir(cand.step)
        problem: str | None = None
        if mine:
            threads = min(len(mine), self.thread_count)
            with ThreadPoolExecutor(threads, thread_name_prefix="ckpt-verify") as ex:
                checks = ex.map(lambda name: file_problem(self.fs, f"{d}/{name}", crcs[name]), mine)
                problem = next((p for p in checks if p), None)
        return self.agree(problem)

    def load(self, state: dict[str, Any], cand: Candidate) -> None:
        """Load into ``state`` in place (DCP reshards to this world size). Raises CheckpointError.

        DCP's load is collective (its errors reach every rank), so every rank raises or none does.
        """
        try:
            reader = make_reader(self._url(cand.step), local=self.local)
            dcp.load(state, storage_reader=reader, process_group=self.pg)
        except (Exception, CheckpointException) as e:  # CheckpointException derives from BaseException
            raise CheckpointError(one_line(e)) from None

    def saved_keys(self, cand: Candidate) -> set[str]:
        """The checkpoint's flattened keys (``train.step``, ``train.rng_rank_0``...), from DCP's metadata."""
        reader = make_reader(self._url(cand.step), local=self.local)
        return set(reader.read_metadata().state_dict_metadata)

    # ---- damaged, torn and old checkpoints -----------------------------------------------------
    def mark_skipped(self, step: int, reason: str) -> None:
        """Move a committed checkpoint that resume cannot use out of the way; never delete it.

        Rank 0 renames ``step-N`` to ``damaged-step-N-<unix time>`` (ignored by discovery and retention) and
        leaves ``skipped.json`` in it saying why: the resumed run will save step N again, and must neither
        overwrite the evidence nor trip over it. If the move fails, the note goes into ``step-N`` itself,
        which makes discovery treat it as damaged from then on.
        """
        event = {"ckpt_step": step, "path": self._url(step), "reason": reason}
        if self.rank != 0:
            self._log("checkpoint_corrupt_skipped", **event)
            return
        src = self.step_dir(step)
        dst = f"{self.root}/damaged-step-{step}-{int(time.time())}"
        note = json.dumps({"step": step, "reason": reason, "time": time.time()}).encode()
        try:
            if self.local:
                os.rename(src, dst)
            else:  # copy + delete is what a "move" is on object stores; no moveTo (see writers._CrcFS)
                self.fs.copy(src, dst, recursive=True)
                self.fs.rm(src, recursive=True)
            self.fs.pipe_file(f"{dst}/{SKIPPED}", note)
            moved = dst if self.local else f"{self.uri.split('://')[0]}://{dst}"
            self._log("checkpoint_corrupt_skipped", **event, moved_to=moved)
        except Exception as e:  # a read-only or broken store: leave the note in place if we can
            with contextlib.suppress(Exception):
                self.fs.pipe_file(f"{src}/{SKIPPED}", note)
            self._log("checkpoint_corrupt_skipped", **event, move_error=one_line(e))

    def prune(self, newest: int) -> None:
        """Keep the newest K committed; drop torn directories older than the newest commit.

        Runs in the commit thread. Saves are serialised, so the only directory that can be in flight is
        newer than ``newest`` and is never touched here. Damaged checkpoints are left for an operator and
        do not count towards K.
        """
        with self._lock:
            status = {s: self.inspect(s)[0] for s in self.all_steps()}
            committed = [s for s, st in status.items() if st == "ok"]
            torn = [s for s, st in status.items() if st == "torn" and s < newest]
            for s in committed[: -self.keep]:
                self._remove(s, "retention")
            for s in torn:
                self._remove(s, "torn")

    def clean_torn(self) -> None:
        """At start-up (no save in flight): remove directories without a manifest (never committed)."""
        if self.rank != 0:
            return
        for s in self.all_steps():
            if self.inspect(s)[0] == "torn":
                self._remove(s, "torn")

    def _remove(self, step: int, reason: str) -> None:
        try:
            self.fs.rm(self.step_dir(step), recursive=True)
            self._log("checkpoint_removed", ckpt_step=step, reason=reason)
        except FileNotFoundError:
            pass
        except OSError as e:  # a store that refuses deletes must not end training
            self._log("checkpoint_remove_failed", ckpt_step=step, error=one_line(e))
