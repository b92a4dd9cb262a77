"""Checkpoints with torch.distributed.checkpoint (DCP) and a commit manifest.

Layout: ``<root>/step-<N>/`` holds DCP's shard files and ``.metadata``; ``manifest.json`` is written last
by rank 0, after DCP returned (which means every rank's shards and ``.metadata`` are complete). A step
directory counts only when its manifest parses and every file it lists exists with the listed size, so a
crash, SIGKILL or a second signal at any moment leaves either a trusted checkpoint or one resume ignores.
A shard truncated after the commit (disk trouble, partial copy) is caught by the same size check.

Roots are local/NFS/Lustre paths (DCP's FileSystemWriter, fsync'd) or fsspec URLs such as ``s3://`` and
``gs://`` (DCP's FsspecWriter). Object-store endpoints and credentials come from the standard environment
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``GOOGLE_APPLICATION_CREDENTIALS``...).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import fsspec
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException, FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

MANIFEST = "manifest.json"
_STEP_RE = re.compile(r"^step-(\d+)$")
# Test-only fault injection: seconds rank 0 sleeps between DCP finishing and writing the manifest of a
# synchronous save (preemption and final saves), so a test can deliver a second signal or a SIGKILL
# inside the commit window.
ENV_FAULT_COMMIT_DELAY = "TRAINPLANE_FAULT_COMMIT_DELAY_S"


@dataclass(frozen=True)
class SaveResult:
    step: int
    bytes: int
    seconds: float
    blocking_seconds: float


class CheckpointStore:
    """Saves, commits, finds, verifies, loads and prunes checkpoints under one root."""

    def __init__(
        self,
        uri: str,
        *,
        keep: int,
        config_hash: str,
        thread_count: int = 4,
        process_group: dist.ProcessGroup | None = None,
        rank: int = 0,
        world_size: int = 1,
        log: Callable[..., None] | None = None,
    ) -> None:
        self.uri = uri.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.uri)
        self.local = "file" in _protocols(self.fs)
        self.keep, self.config_hash, self.thread_count = keep, config_hash, thread_count
        self.pg, self.rank, self.world_size = process_group, rank, world_size
        self._log = log or (lambda *a, **k: None)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ckpt-commit")
        self._pending: tuple[int, float, float, Future[SaveResult]] | None = None
        # One stager for the whole run: it caches its CPU staging buffers by source storage, so after the
        # first save an async save is a copy into warm memory instead of allocating (and page-faulting)
        # the whole state again. Pinned memory only helps device-to-host copies.
        cuda = torch.cuda.is_available()
        self._cpu_stager = _CpuStager()
        self._stager = DefaultStager(
            StagingOptions(
                use_pinned_memory=cuda,
                use_shared_memory=False,
                use_async_staging=False,
                use_non_blocking_copy=cuda,
            )
        )
        self.last_result: SaveResult | None = None

    # ---- paths ---------------------------------------------------------------------------------
    def step_dir(self, step: int) -> str:
        return f"{self.root}/step-{step}"

    def _url(self, step: int) -> str:
        return self.step_dir(step) if self.local else f"{self.uri}/step-{step}"

    def _writer(self, step: int) -> FileSystemWriter:
        if self.local:
            return FileSystemWriter(self.step_dir(step), thread_count=self.thread_count, sync_files=True)
        return FsspecWriter(self._url(step), thread_count=self.thread_count, sync_files=False)

    def _reader(self, step: int) -> FileSystemReader:
        return FileSystemReader(self.step_dir(step)) if self.local else FsspecReader(self._url(step))

    # ---- discovery -----------------------------------------------------------------------------
    def all_steps(self) -> list[int]:
        self.fs.invalidate_cache()
        try:
            names = self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return []
        steps = [int(m.group(1)) for n in names if (m := _STEP_RE.match(n.rstrip("/").rsplit("/", 1)[-1]))]
        return sorted(steps)

    def manifest(self, step: int) -> dict[str, Any] | None:
        """The manifest of a step if the checkpoint is complete and intact, else None."""
        d = self.step_dir(step)
        try:
            man = json.loads(self.fs.cat_file(f"{d}/{MANIFEST}"))
            sizes = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e["size"] for e in self.fs.ls(d, detail=True)}
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None
        files = man.get("files") if isinstance(man, dict) else None
        if not isinstance(files, dict) or ".metadata" not in files or man.get("step") != step:
            return None
        if any(sizes.get(name) != size for name, size in files.items()):
            return None
        return man

    def committed_steps(self) -> list[int]:
        return [s for s in self.all_steps() if self.manifest(s) is not None]

    def latest(self) -> int | None:
        """Newest committed, intact step (rank 0 decides; all ranks get the same answer)."""
        found: list[int | None] = [None]
        if self.rank == 0:
            for s in reversed(self.all_steps()):
                if self.manifest(s) is not None:
                    found[0] = s
                    break
                self._log("checkpoint_torn_skipped", ckpt_step=s, path=self._url(s))
        if self.pg is not None and dist.is_initialized():
            dist.broadcast_object_list(found, src=0, group=self.pg)
        return found[0]

    # ---- save / commit -------------------------------------------------------------------------
    def save(self, state: dict[str, Any], step: int, *, asynchronous: bool) -> None:
        """Save ``state`` as step ``step``. Async returns once the state is copied (staged)."""
        self.wait()  # saves are serialised: one in flight at a time, and the group is shared
        t0 = time.perf_counter()
        if asynchronous:
            stager = self._cpu_stager if _CpuStager.handles(state) else self._stager
            fut = dcp.async_save(
                state, storage_writer=self._writer(step), process_group=self.pg, async_stager=stager
            )
            blocking = time.perf_counter() - t0
            commit = self._pool.submit(self._finish_async, fut, step, t0, blocking)
            self._pending = (step, t0, blocking, commit)
            self._log("checkpoint_save_started", ckpt_step=step, mode="async", blocking_s=round(blocking, 4))
        else:
            self._log("checkpoint_save_started", ckpt_step=step, mode="sync")
            dcp.save(state, storage_writer=self._writer(step), process_group=self.pg)
            nbytes = self._commit(step, fault_delay=True) if self.rank == 0 else 0
            if self.pg is not None and dist.is_initialized():
                dist.barrier(group=self.pg)  # nobody reports success before the manifest exists
            dt = time.perf_counter() - t0
            if self.rank == 0:  # deleting old multi-GB checkpoints need not hold up training
                self._pool.submit(self._prune, step)
            self._done(SaveResult(step, nbytes, dt, dt))

    def _finish_async(self, fut: Future[Any], step: int, t0: float, blocking: float) -> SaveResult:
        fut.result()
        nbytes = self._commit(step) if self.rank == 0 else 0
        res = SaveResult(step, nbytes, time.perf_counter() - t0, blocking)
        if self.rank == 0:
            self._prune(step)
        return res

    def poll(self) -> None:
        """Report a finished async save; cheap, called at step boundaries."""
        if self._pending is not None and self._pending[3].done():
            self.wait()

    def wait(self) -> None:
        """Block until the in-flight async save (if any) is written and committed."""
        if self._pending is None:
            return
        step, _, _, commit = self._pending
        self._pending = None
        try:
            self._done(commit.result())
        except (Exception, CheckpointException) as e:  # CheckpointException derives from BaseException
            self._log("checkpoint_failed", ckpt_step=step, error=f"{type(e).__name__}: {e}")

    def _done(self, res: SaveResult) -> None:
        self.last_result = res
        # only rank 0 writes the manifest; the others report that their shards are written
        event = "checkpoint_committed" if self.rank == 0 else "checkpoint_shards_written"
        self._log(
            event,
            ckpt_step=res.step,
            bytes=res.bytes,
            save_s=round(res.seconds, 4),
            blocking_s=round(res.blocking_seconds, 4),
        )

    def _commit(self, step: int, fault_delay: bool = False) -> int:
        d = self.step_dir(step)
        delay = float(os.environ.get(ENV_FAULT_COMMIT_DELAY, "0") or 0) if fault_delay else 0.0
        if delay:
            self._log("fault_commit_delay", ckpt_step=step, seconds=delay)
            time.sleep(delay)
        self.fs.invalidate_cache()
        files = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e["size"] for e in self.fs.ls(d, detail=True)}
        files.pop(MANIFEST, None)
        man = {
            "step": step,
            "world_size": self.world_size,
            "config_hash": self.config_hash,
            "bytes": sum(files.values()),
            "files": files,
            "time": time.time(),
            "format": 1,
        }
        blob = json.dumps(man, sort_keys=True).encode()
        if self.local:
            # tmp + fsync + rename: the manifest appears whole or not at all
            tmp = f"{d}/{MANIFEST}.tmp"
            with open(tmp, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, f"{d}/{MANIFEST}")
            dfd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        else:
            self.fs.pipe_file(f"{d}/{MANIFEST}", blob)  # one PUT: atomic on S3 and GCS
        return man["bytes"]

    def _prune(self, newest: int) -> None:
        """Keep the newest K committed; drop torn directories older than the newest commit.

        Runs in the commit thread. Saves are serialised, so the only directory that can be in flight is
        newer than ``newest`` and is never touched here.
        """
        steps = self.all_steps()
        committed = [s for s in steps if self.manifest(s) is not None]
        torn = [s for s in steps if s < newest and s not in committed]
        doomed = committed[: -self.keep] + torn
        for s in sorted(set(doomed)):
            self._remove(s, "retention" if s in committed else "torn")

    def clean_torn(self) -> None:
        """At start-up (no save in flight): remove every directory that is not a trusted checkpoint."""
        if self.rank != 0:
            return
        for s in self.all_steps():
            if self.manifest(s) is None:
                self._remove(s, "torn")

    def _remove(self, step: int, reason: str) -> None:
        try:
            self.fs.rm(self.step_dir(step), recursive=True)
            self._log("checkpoint_removed", ckpt_step=step, reason=reason)
        except FileNotFoundError:
            pass

    # ---- load ----------------------------------------------------------------------------------
    def load(self, state: dict[str, Any], step: int) -> dict[str, Any]:
        """Load ``step`` into ``state`` in place (DCP reshards to this world size); returns the manifest."""
        man = self.manifest(step) if self.rank == 0 else None
        box = [man]
        if self.pg is not None and dist.is_initialized():
            dist.broadcast_object_list(box, src=0, group=self.pg)
        if box[0] is None:
            raise RuntimeError(f"checkpoint step {step} is not committed")
        dcp.load(state, storage_reader=self._reader(step), process_group=self.pg)
        return box[0]

    def close(self) -> None:
        self.wait()
        self._pool.shutdown(wait=True)
        self._stager.close()
        self._cpu_stager.close()


class _CpuStager:
    """Stages a state dict of plain CPU tensors into warm CPU buffers with a few long copies.

    DCP's DefaultStager copies tensor by tensor on the calling thread, and every copy is an OpenMP
    parallel region. Once a long-lived thread of the process has run one (gloo's worker threads do, for
    DCP's planning gathers), libgomp counts more threads than cores and stops spinning between regions,
    so each of the few hundred copies pays a thread wake-up: measured here, staging 254 MiB went from
    0.021 s to 0.040 s. This stager splits the tensors by bytes over a small pool of threads that copy
    serially (one intra-op thread each, GIL released during the copy), so the cost is a handful of
    wake-ups. Buffers are reused across saves (saves are serialised, so the previous save's writers are
    done with them) and are dropped when the state no longer contains their source.

    Only for dicts/lists/tuples of plain CPU tensors and Python scalars/bytes/strings; anything else
    (GPU tensors, DTensor, ShardedTensor) goes to DCP's DefaultStager.
    """

    _synchronize_after_execute = False
    _LEAVES = (int, float, bool, str, bytes, type(None))

    def __init__(self, threads: int | None = None) -> None:
        self._n = max(1, min(8, threads or torch.get_num_threads()))
        self._pool = ThreadPoolExecutor(self._n, thread_name_prefix="ckpt-stage", initializer=_one_thread)
        self._buffers: dict[tuple[int, int], torch.Tensor] = {}

    @property
    def should_synchronize_after_execute(self) -> bool:
        return False

    @classmethod
    def handles(cls, obj: Any) -> bool:
        if type(obj) is torch.Tensor:
            return obj.device.type == "cpu" and obj.layout == torch.strided and not obj.is_quantized
        if isinstance(obj, dict):
            return all(isinstance(k, (str, int)) and cls.handles(v) for k, v in obj.items())
        if isinstance(obj, (list, tuple)):
            return all(cls.handles(v) for v in obj)
        return isinstance(obj, cls._LEAVES)

    def stage(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        copies: list[tuple[torch.Tensor, torch.Tensor, int]] = []  # (dst bytes, src bytes, nbytes)
        staged: dict[tuple[int, int], torch.Tensor] = {}  # this save's storages: (data_ptr, nbytes)

        def storage_of(t: torch.Tensor) -> torch.Tensor:
            src = t.untyped_storage()
            key = (src.data_ptr(), src.nbytes())
            buf = staged.get(key)
            if buf is None:
                buf = self._buffers.get(key)
                if buf is None:
                    buf = torch.empty(src.nbytes(), dtype=torch.uint8)
                staged[key] = buf
                whole = torch.empty(0, dtype=torch.uint8).set_(src)
                copies.append((buf, whole, src.nbytes()))
            return buf

        def walk(obj: Any) -> Any:
            if type(obj) is torch.Tensor:
                buf = storage_of(obj)
                out = torch.empty(0, dtype=obj.dtype)
                return out.set_(buf.untyped_storage(), obj.storage_offset(), obj.size(), obj.stride())
            if isinstance(obj, dict):
                return type(obj)((k, walk(v)) for k, v in obj.items())
            if isinstance(obj, list):
                return [walk(v) for v in obj]
            if isinstance(obj, tuple):
                return tuple(walk(v) for v in obj)
            return obj

        out = walk(state_dict)
        self._buffers = staged  # buffers whose source left the state are freed here
        shares: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in range(self._n)]
        load = [0] * self._n
        for dst, src, n in sorted(copies, key=lambda c: -c[2]):
            i = load.index(min(load))
            shares[i].append((dst, src))
            load[i] += n
        for f in [self._pool.submit(_copy_all, part) for part in shares if part]:
            f.result()
        return out

    def synchronize_staging(self) -> None:
        pass

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._buffers = {}


def _one_thread() -> None:
    torch.set_num_threads(1)  # per thread under OpenMP: serial copies, no OpenMP team in this thread


@torch.no_grad()
def _copy_all(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    for dst, src in pairs:
        dst.copy_(src)


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)
