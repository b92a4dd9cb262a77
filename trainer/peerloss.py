"""Peer loss: another node of the job vanished (spot reclaim, hardware failure) while this one was healthy.

When one node of a multi-node job disappears, the others fail too, but as a knock-on: their collectives
break (gloo "Connection reset by peer", NCCL ``ncclRemoteError``) and torchrun's restart cannot
rendezvous again (the c10d store or the master is gone: ``DistNetworkError: Broken pipe``). Measured here
with two launchers on CPU/gloo: the survivor of a lost master exits within ~7 s. If such a survivor exits
before the lost node's own pod is marked disrupted, its code decides the JobSet's failure rule, and a
spot reclaim (not counted) becomes a counted restart. So the workers and the launcher report a peer loss
with its own code, ``EXIT_PEER_LOST`` (75), which the failure policy retries without counting.

A real crash elsewhere looks the same from here (the crashing node's peers see their collectives
break), so an uncounted peer loss is bounded: each node keeps a count of its consecutive peer losses in
the checkpoint root, next to the checkpoints, with the newest committed step at the time. A new
committed checkpoint resets it; after ``TRAINPLANE_MAX_PEER_LOSSES`` (default 3) in a row without one,
the next peer loss exits with the counted crash code (1), so the JobSet's ``maxRestarts`` ends a loop
that makes no progress. Without a checkpoint root there is no durable place to count in, and a peer loss
is counted from the start.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from trainer.contract import (
    DEFAULT_MAX_PEER_LOSSES,
    ENV_MAX_PEER_LOSSES,
    EXIT_CRASH,
    EXIT_PEER_LOST,
)

# Text of the errors a collective raises when the other end went away. gloo: "Read error ...:
# Connection reset by peer" / "Connection closed by peer" (third_party/gloo transport/tcp/pair.cc); NCCL:
# ncclRemoteError "A call failed possibly due to a network error or a remote process exiting prematurely"
# (nccl.h.in); a broken store connection: "Broken pipe", "Connection reset by peer".
_REMOTE_MARKERS = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "ncclRemoteError",
    "remote process exiting",
)
RECORD_PREFIX = ".trainplane-peer-loss-"


def is_peer_loss(exc: BaseException) -> bool:
    """Whether a worker's exception is a collective or store that broke because a peer went away.

    DistNetworkError and DistStoreError are always about the connection; other errors (DistBackendError,
    gloo's RuntimeError) only when their text names a remote end. A local NCCL or CUDA error is not.
    """
    import torch.distributed as dist

    if isinstance(exc, dist.DistNetworkError | dist.DistStoreError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(m in text for m in _REMOTE_MARKERS)


def is_rendezvous_failure(exc: BaseException) -> bool:
    """Whether torchrun's agent failed to (re-)form the group: the store or the other nodes are gone."""
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous.api import RendezvousError

    return isinstance(exc, RendezvousError | dist.DistError | TimeoutError)


def node_id(node_rank: object = None) -> str:
    """This node's stable name among the job's nodes: the pod's index (NODE_RANK, which the job stack sets
    from the completion index), else torchrun's --node-rank, else the host name."""
    rank = os.environ.get("NODE_RANK") or (str(node_rank) if node_rank not in (None, "") else "")
    return f"node-{rank}" if rank else socket.gethostname()


def max_peer_losses() -> int:
    raw = os.environ.get(ENV_MAX_PEER_LOSSES, "")
    try:
        return max(int(raw), 0) if raw else DEFAULT_MAX_PEER_LOSSES
    except ValueError:
        return DEFAULT_MAX_PEER_LOSSES


@dataclass(frozen=True)
class Verdict:
    code: int
    count: int
    newest_step: int
    message: str


def decide(previous: dict[str, Any] | None, newest_step: int, limit: int) -> tuple[int, int]:
    """(exit code, consecutive count) for a peer loss, given the node's previous record (pure).

    >>> decide(None, -1, 3), decide({"count": 3, "step": 40}, 40, 3), decide({"count": 3, "step": 40}, 50, 3)
    ((75, 1), (1, 4), (75, 1))
    """
    same = previous is not None and previous.get("step") == newest_step
    count = int(previous.get("count", 0)) + 1 if same and previous is not None else 1
    return (EXIT_PEER_LOST if count <= limit else EXIT_CRASH), count


def settle(uri: str | None, node: str, *, keep: int = 2, limit: int | None = None) -> Verdict:
    """Count this peer loss against the node's record in the checkpoint root ``uri``; the exit code."""
    limit = max_peer_losses() if limit is None else limit
    if not uri:
        return Verdict(EXIT_CRASH, 0, -1, "no checkpoint root to count peer losses in: counted as a crash")
    from trainer.checkpoint import CheckpointRoot

    try:
        root = CheckpointRoot(uri, keep=keep)
        newest = root.newest_committed()
        step = newest.step if newest is not None else -1
        path = f"{root.root}/{RECORD_PREFIX}{node}.json"
        try:
            previous = json.loads(root.fs.cat_file(path))
        except (FileNotFoundError, ValueError):
            previous = None
        code, count = decide(previous, step, limit)
        record = {"count": count, "step": step, "time": time.time(), "code": code}
        root.fs.pipe_file(path, json.dumps(record).encode())
    except Exception as e:  # the root cannot be read or written: do not risk an uncounted loop
        return Verdict(
            EXIT_CRASH, 0, -1, f"cannot record the peer loss in {uri} ({type(e).__name__}): counted"
        )
    at = f"newest checkpoint step {step}" if step >= 0 else "no committed checkpoint"
    if code == EXIT_PEER_LOST:
        return Verdict(
            code, count, step, f"peer loss {count} of {limit} in a row ({at}): restart not counted"
        )
    return Verdict(
        code, count, step, f"{count} peer losses in a row without a new checkpoint ({at}): counted as a crash"
    )


def report(verdict: Verdict, cause: str) -> int:
    """One line on stderr for the pod's log; the code to exit with."""
    print(f"trainplane.launch: a peer node is gone ({cause}); {verdict.message}", file=sys.stderr)
    return verdict.code
