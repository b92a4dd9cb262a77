"""Checkpoints with torch.distributed.checkpoint (DCP) and a commit manifest.

Layout: ``<root>/step-<N>/`` holds DCP's shard files and ``.metadata``; ``manifest.json`` is written last
by rank 0, after DCP returned (which means every rank's shards and ``.metadata`` are complete). A crash,
SIGKILL or a second signal at any moment leaves either a committed checkpoint or a directory without a
manifest ("torn"), which resume skips and removes.

The manifest lists every file with its size and its CRC-32, computed by each rank while DCP's writer
threads write its files. A committed checkpoint that no longer matches its manifest (a truncated shard, bit
rot, a partial overwrite), or that DCP cannot load (a corrupted ``.metadata``, a missing shard), is
"damaged": resume skips it with a warning and the next older one is used; it is never deleted: it is moved
to ``damaged-step-<N>-<time>/`` with a ``skipped.json`` note saying why, for an operator.

Roots are local/NFS/Lustre paths (DCP's FileSystemWriter, fsync'd) or fsspec URLs such as ``s3://`` and
``gs://`` (DCP's FsspecWriter). Object-store endpoints and credentials come from the standard environment
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``STORAGE_EMULATOR_HOST``, ``GOOGLE_APPLICATION_CREDENTIALS``...).

Modules: ``manifest`` (format, checks, CRC-32), ``writers`` (checksumming DCP writers, the root probe),
``stager`` (CPU staging for async saves), ``root`` (discovery, verification, load, damaged and old
checkpoints), ``store`` (``CheckpointStore``: when to save, save, commit).
"""

from trainer.checkpoint.manifest import (
    MANIFEST,
    MANIFEST_FORMAT,
    SKIPPED,
    Candidate,
    CheckpointError,
    SaveResult,
    crc32,
)
from trainer.checkpoint.root import CheckpointRoot, Group
from trainer.checkpoint.stager import _CpuStager
from trainer.checkpoint.store import CheckpointStore, SaveSchedule, materialise
from trainer.checkpoint.writers import probe_error, probe_root
from trainer.contract import ENV_FAULT_COMMIT_DELAY

__all__ = [
    "ENV_FAULT_COMMIT_DELAY",
    "MANIFEST",
    "MANIFEST_FORMAT",
    "SKIPPED",
    "Candidate",
    "CheckpointError",
    "CheckpointRoot",
    "CheckpointStore",
    "Group",
    "SaveResult",
    "SaveSchedule",
    "_CpuStager",
    "crc32",
    "materialise",
    "probe_error",
    "probe_root",
]
