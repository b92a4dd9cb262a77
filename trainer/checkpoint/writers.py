"""DCP storage writers that checksum what they write, and the write probe of a checkpoint root.

Each rank computes the CRC-32 of its own files while DCP's writer threads write them (a pass-through
stream, so no second read and nothing on the training thread); the checksums travel to rank 0 with DCP's
own write results, and rank 0 puts them in the manifest.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import fsspec
import torch
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
from torch.distributed.checkpoint.metadata import MetadataIndex
from torch.distributed.checkpoint.storage import StorageWriter, WriteResult

from trainer.checkpoint.manifest import crc32, one_line, protocols

# A pseudo write result that carries one rank's file checksums to the coordinator inside DCP's own gather
# of write results; the coordinator strips it before DCP builds `.metadata`.
_CRC_FQN = "__trainplane_crc32__"


class _CrcStream:
    """Write-through wrapper: computes the CRC-32 of everything written, in the writer's thread."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.crc: int | None = 0
        self.size = 0  # bytes written through this stream

    def write(self, b: Any) -> int:
        n = self._raw.write(b)
        view = memoryview(b).cast("B")
        n = len(view) if n is None else n
        self.size += n
        if self.crc is not None:
            self.crc = crc32(view[:n], self.crc)
        return n

    def seek(self, *args: Any) -> int:
        # DCP writes sequentially; if that ever changes, record no checksum rather than a wrong one
        self.crc = None
        return self._raw.seek(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _CrcFS:
    """DCP file-system proxy whose write streams record each file's CRC-32 by file name."""

    def __init__(self, fs: Any, sink: dict[str, int], sizes: dict[str, int]) -> None:
        self._fs, self._sink, self._sizes = fs, sink, sizes

    @contextlib.contextmanager
    def create_stream(self, path: Any, mode: str) -> Iterator[Any]:
        with self._fs.create_stream(path, mode) as raw:
            if "w" not in mode:
                yield raw
                return
            stream = _CrcStream(raw)
            yield stream
        name = os.fspath(path).rstrip("/").rsplit("/", 1)[-1].removesuffix(".tmp")
        self._sizes[name] = stream.size
        if stream.crc is not None:
            self._sink[name] = stream.crc  # after close: the file is complete

    def rename(self, path: Any, new_path: Any) -> None:
        """DCP renames ``.metadata.tmp`` to ``.metadata``. On object stores that is copy + delete anyway;
        doing it directly skips gcsfs's ``mv``, which first tries GCS's objects.moveTo and retries it for
        ~30 s wherever that answers 501 (the GCS emulator; seen here with gcsfs 2026.7.0)."""
        fsspec_fs = getattr(self._fs, "fs", None)
        if fsspec_fs is None or "file" in protocols(fsspec_fs):
            self._fs.rename(path, new_path)
            return
        fsspec_fs.copy(os.fspath(path), os.fspath(new_path))
        fsspec_fs.rm_file(os.fspath(path))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fs, name)


class _ChecksumWriter:
    """Mixin for DCP's file-system writers: CRC-32 per file, gathered to the coordinator.

    ``write_data`` runs on every rank (in DCP's writer threads, or in the async-save thread) and appends a
    pseudo result holding this rank's checksums; ``finish`` runs on the coordinator with every rank's
    results, takes the checksums out, and hands DCP the real results only, so ``.metadata`` is unchanged.
    """

    crcs: dict[str, int]
    sizes: dict[str, int]  # this rank's files as it wrote them: name -> bytes
    fs: Any  # set by DCP's writer (its storage layer), wrapped here

    def _install_checksums(self) -> None:
        self.crcs, self.sizes = {}, {}
        self.fs = _CrcFS(self.fs, self.crcs, self.sizes)

    @property
    def written(self) -> int:
        """Bytes of the shard files this rank wrote (DCP's ``.metadata``, rank 0's, not counted)."""
        return sum(n for name, n in self.sizes.items() if not name.startswith(".metadata"))

    def write_data(self, plan: Any, planner: Any) -> torch.futures.Future[list[WriteResult]]:
        results = super().write_data(plan, planner).wait()  # type: ignore[misc]
        mine = {k: v for k, v in self.crcs.items() if not k.startswith(".metadata")}
        fut: torch.futures.Future[list[WriteResult]] = torch.futures.Future()
        fut.set_result([*results, WriteResult(MetadataIndex(_CRC_FQN), 0, mine)])
        return fut

    def finish(self, metadata: Any, results: list[list[WriteResult]]) -> None:
        real: list[list[WriteResult]] = []
        for per_rank in results:
            for r in per_rank:
                if r.index.fqn == _CRC_FQN:
                    self.crcs.update(r.storage_data)
            real.append([r for r in per_rank if r.index.fqn != _CRC_FQN])
        super().finish(metadata, real)  # type: ignore[misc]


class _LocalWriter(_ChecksumWriter, FileSystemWriter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._install_checksums()


class _RemoteWriter(_ChecksumWriter, FsspecWriter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._install_checksums()


def probe_root(uri: str) -> None:
    """Create the root and write, read back and delete one small object; raise OSError-like errors.

    Run before the first step, so that a root that cannot be written (a path under a regular file, a
    directory that cannot be created, a bucket that is missing or denies writes) is a configuration error
    instead of a run whose every save fails.
    """
    fs, root = fsspec.core.url_to_fs(uri.rstrip("/"))
    if "file" in protocols(fs):
        fs.makedirs(root, exist_ok=True)
    probe = f"{root}/.trainplane-probe-{uuid.uuid4().hex[:12]}"
    fs.pipe_file(probe, b"trainplane write probe\n")
    try:
        fs.rm_file(probe)
    except Exception:  # a write-only bucket: the probe object stays; saving still works
        pass


def probe_error(uri: str, e: BaseException) -> str:
    """The one-line message for a root that failed ``probe_root``."""
    return f"config error: checkpoint.uri: cannot write to {uri}: {type(e).__name__}: {one_line(e)}"


def make_writer(url: str, *, local: bool, checksums: bool, thread_count: int) -> StorageWriter:
    """DCP's file-system writer for ``url`` (fsync'd locally), checksumming unless ``checksums`` is off."""
    if local:
        local_cls = _LocalWriter if checksums else FileSystemWriter
        return local_cls(url, thread_count=thread_count, sync_files=True)
    remote_cls = _RemoteWriter if checksums else FsspecWriter
    return remote_cls(url, thread_count=thread_count, sync_files=False)


def make_reader(url: str, *, local: bool) -> FileSystemReader:
    return FileSystemReader(url) if local else FsspecReader(url)
