"""A lost peer node: the survivor exits 75 (retried without counting), but only a few times in a row
without a new checkpoint, then 1 (counted). Real processes: two launchers as two "nodes" of one job
(static rendezvous, as the JobSet runtime runs them), the master node killed with SIGKILL like a
reclaimed VM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainer import peerloss
from trainer.contract import EXIT_CRASH, EXIT_PEER_LOST


class _Newest:
    def __init__(self, step: int) -> None:
        self.step = step


def test_a_new_checkpoint_resets_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.checkpoint import CheckpointRoot

    newest: dict[str, Any] = {"step": None}
    monkeypatch.setattr(
        CheckpointRoot,
        "newest_committed",
        lambda self: _Newest(newest["step"]) if newest["step"] is not None else None,
    )
    uri = str(tmp_path)
    codes = [peerloss.settle(uri, "node-1", limit=2).code for _ in range(3)]
    assert codes == [EXIT_PEER_LOST, EXIT_PEER_LOST, EXIT_CRASH]
    newest["step"] = 40  # progress: a checkpoint committed since
    assert [peerloss.settle(uri, "node-1", limit=2).code for _ in range(3)] == [75, 75, 1]
    # each node counts its own losses
    assert peerloss.settle(uri, "node-0", limit=2).code == EXIT_PEER_LOST


def test_without_a_durable_count_a_peer_loss_is_counted(tmp_path: Path) -> None:
    assert peerloss.settle(None, "node-1").code == EXIT_CRASH
    (tmp_path / "file").write_text("")
    verdict = peerloss.settle(str(tmp_path / "file" / "root"), "node-1")
    assert verdict.code == EXIT_CRASH and "counted" in verdict.message


def test_what_counts_as_a_lost_peer() -> None:
    import torch.distributed as dist

    gloo = (
        "Got the following error when running the callback: RuntimeError: [../gloo/transport/tcp/pair.cc:537] "
        "Read error [127.0.0.1]:4487: Connection reset by peer"
    )
    assert peerloss.is_peer_loss(RuntimeError(gloo))
    assert peerloss.is_peer_loss(dist.DistNetworkError("Broken pipe"))
    assert peerloss.is_peer_loss(dist.DistBackendError("NCCL error: ncclRemoteError: remote process exiting"))
    assert not peerloss.is_peer_loss(dist.DistBackendError("NCCL error: unhandled cuda error"))
    assert not peerloss.is_peer_loss(RuntimeError("CUDA out of memory"))
    assert not peerloss.is_peer_loss(ValueError("Connection reset by peer"))


def test_a_signalled_launcher_never_reports_its_own_shutdown_as_a_lost_peer(monkeypatch):
    # Seen in test_sigkill_inside_commit_window_...: SIGTERM to the launcher, rank 0 SIGKILLed inside its
    # commit, rank 1's collective broke and it wrote 75: the launcher exited 75 (uncounted) instead of 1.
    from trainer import launch, lifecycle

    monkeypatch.setattr(lifecycle, "worker_exit_code", lambda: EXIT_PEER_LOST)
    assert launch.signalled_code(15, preempted=False, finished=False) == EXIT_CRASH
    monkeypatch.setattr(lifecycle, "worker_exit_code", lambda: 74)
    assert launch.signalled_code(15, preempted=False, finished=False) == 74
