"""What a test session makes once and every xdist worker reads: a folder beside the workers' own, and a
lock so that the first worker to need a thing makes it while the others wait for it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def shared_dir(basetemp: Path, name: str) -> Path:
    """Folder `name` of this session: beside the xdist workers' own (their basetemp's parent, the
    session's), or in this process's basetemp without xdist (its parent is shared with other sessions)."""
    d = (basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp) / name
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold `lock` (a file, created if missing) against the other workers of the session."""
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
