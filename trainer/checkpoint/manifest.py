"""The commit manifest: what a committed checkpoint is, how it is written and how it is checked.

``<root>/step-<N>/manifest.json`` is written last, by rank 0, after DCP returned (so every rank's shards
and ``.metadata`` are complete). It lists every file with its size and its CRC-32 (format 2; format 1,
written before checksums existed, has sizes only and is still accepted). A directory without a manifest is
*torn* (the save never committed); one whose files no longer match it is *damaged*.
"""

from __future__ import annotations

import json
import os
import re
import time
import zlib
from dataclasses import dataclass
from typing import Any

import fsspec
from torch.distributed.checkpoint import CheckpointException

MANIFEST = "manifest.json"
SKIPPED = "skipped.json"  # written beside a damaged checkpoint that resume skipped; never deleted by us
MANIFEST_FORMAT = 2  # 2: per-file "crc32" and the training "config"; 1: sizes only (still accepted)
STEP_RE = re.compile(r"^step-(\d+)$")
_CRC_CHUNK = 8 << 20  # read size when verifying

Inspection = tuple[str, dict[str, Any] | None, str]  # (status, manifest or None, why)


@dataclass(frozen=True)
class SaveResult:
    step: int
    bytes: int | None  # rank 0: the committed checkpoint; other ranks: their own shards (None: not counted)
    seconds: float
    blocking_seconds: float


@dataclass(frozen=True)
class Candidate:
    """A committed checkpoint that passed the cheap checks (manifest parses, sizes match)."""

    step: int
    manifest: dict[str, Any]


class CheckpointError(Exception):
    """A checkpoint could not be verified or loaded; the message is one line."""


def crc32(data: Any, crc: int = 0) -> int:
    """zlib's CRC-32 (as gzip/zip), chosen over google-crc32c although that is faster alone (11 GB/s here
    against 2.5 GB/s): google-crc32c 1.9.0 parses only read-only ``bytes`` (``y#``) and releases the GIL
    only for those, so every tensor buffer DCP writes would first be copied into a ``bytes`` object while
    holding the GIL. zlib takes any buffer, without a copy, and releases the GIL for large ones, so writer
    threads checksum in parallel with the training thread (measured in docs/BENCHMARKS.md).

    >>> f"{crc32(b'123456789'):08x}"
    'cbf43926'
    """
    return zlib.crc32(data, crc)


def file_sizes(fs: fsspec.AbstractFileSystem, d: str) -> dict[str, int]:
    """File name -> size for the files directly in ``d`` (raises FileNotFoundError if it is gone)."""
    return {e["name"].rstrip("/").rsplit("/", 1)[-1]: e["size"] for e in fs.ls(d, detail=True)}


def inspect_dir(fs: fsspec.AbstractFileSystem, d: str, step: int) -> Inspection:
    """("ok", manifest, ""), ("torn", None, why) or ("damaged", manifest-or-None, why) for ``d``.

    Torn: no manifest, so the save never committed. Damaged: it committed, and then something changed
    (a listed file is missing or has another size, the manifest does not parse, or an earlier resume
    found it unloadable and left ``skipped.json``). Checksums are verified separately: they need the
    whole checkpoint read.
    """
    try:
        sizes = file_sizes(fs, d)
    except FileNotFoundError:
        return "torn", None, "directory vanished"
    if MANIFEST not in sizes:
        return "torn", None, "no manifest"
    try:
        man = json.loads(fs.cat_file(f"{d}/{MANIFEST}"))
    except (FileNotFoundError, ValueError, UnicodeDecodeError) as e:
        return "damaged", None, f"manifest unreadable: {type(e).__name__}"
    files = man.get("files") if isinstance(man, dict) else None
    if not isinstance(files, dict) or ".metadata" not in files or man.get("step") != step:
        return "damaged", None, "manifest does not describe this step"
    if SKIPPED in sizes:
        return "damaged", man, "skipped.json present (found unloadable before)"
    return _sizes_match(man, files, sizes)


def _sizes_match(man: dict[str, Any], files: dict[str, Any], sizes: dict[str, int]) -> Inspection:
    for name, size in files.items():
        if sizes.get(name) != size:
            got = "missing" if name not in sizes else f"{sizes[name]} bytes"
            return "damaged", man, f"{name}: {got}, manifest says {size} bytes"
    return "ok", man, ""


def file_problem(fs: fsspec.AbstractFileSystem, path: str, want: str) -> str | None:
    """Read one file back and compare its CRC-32 with the manifest's hex string; the problem or None."""
    name = path.rsplit("/", 1)[-1]
    crc = 0
    try:
        with fs.open(path, "rb") as f:
            while chunk := f.read(_CRC_CHUNK):
                crc = crc32(chunk, crc)
    except OSError as e:
        return f"{name}: {type(e).__name__}: {e}"
    return None if f"{crc:08x}" == want else f"{name}: CRC-32 {crc:08x}, manifest says {want}"


@dataclass(frozen=True)
class ManifestFields:
    """What the store knows about a save besides the files: the job's identity of the trajectory."""

    world_size: int
    config_hash: str
    config: dict[str, Any]


def build_manifest(
    step: int, files: dict[str, int], crcs: dict[str, int] | None, fields: ManifestFields
) -> dict[str, Any]:
    """The manifest of ``step``; raises CheckpointError if a file has no checksum (it is not ours)."""
    missing = sorted(set(files) - set(crcs)) if crcs is not None else []
    if missing:  # every file DCP wrote went through a checksum stream; anything else is not ours
        raise CheckpointError(f"step {step}: files without a checksum: {', '.join(missing)}")
    return {
        "step": step,
        "world_size": fields.world_size,
        "config_hash": fields.config_hash,
        "config": fields.config,
        "bytes": sum(files.values()),
        "files": files,
        **({"crc32": {name: f"{crcs[name]:08x}" for name in files}} if crcs is not None else {}),
        "time": time.time(),
        "format": MANIFEST_FORMAT,
    }


def write_manifest(fs: fsspec.AbstractFileSystem, d: str, man: dict[str, Any], local: bool) -> None:
    """Write the manifest atomically: tmp + fsync + rename locally, one PUT on object stores."""
    blob = json.dumps(man, sort_keys=True, default=str).encode()
    if not local:
        fs.pipe_file(f"{d}/{MANIFEST}", blob)  # one PUT: atomic on S3 and GCS
        return
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


def one_line(e: BaseException) -> str:
    """An exception as one line of at most ~300 characters; DCP's errors as the failing rank's own."""
    if isinstance(e, CheckpointException) and e.failures:  # the ranks' own errors, not DCP's tracebacks
        rank, (inner, _) = next(iter(sorted(e.failures.items(), key=lambda kv: kv[0])))
        return f"rank {rank}: {type(inner).__name__}: {one_line(inner)}"
    text = " ".join(str(e).split())
    return (text[:300] + "...") if len(text) > 300 else text


def protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)
