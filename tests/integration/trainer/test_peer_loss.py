"""A survivor of a lost node exits 75 and then escalates, with real launcher processes
(tests/unit/trainer/test_peer_loss.py has the rest)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.trainer import PLUGIN, Proc, free_port
from trainer.contract import EXIT_CRASH, EXIT_PEER_LOST

# No checkpoint commits during these runs: every peer loss is "without progress".
NO_SAVES = ["--checkpoint.interval-steps", "100000"]


def _two_nodes(
    tmp: Path, name: str, ckpt: Path, restarts: int, env: dict[str, str], saves: list[str] = NO_SAVES
) -> list[Proc]:
    port = free_port()
    return [
        Proc(
            [
                "-m",
                "trainer.launch",
                "--nnodes=2",
                f"--node-rank={rank}",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                "--nproc-per-node=1",
                f"--max-restarts={restarts}",
                "--",
                *PLUGIN,
                "--steps",
                "100000",
                "--checkpoint.uri",
                str(ckpt),
                *saves,
            ],
            tmp,
            f"{name}-node{rank}",
            env,
        )
        for rank in (0, 1)
    ]


def _lose_master(tmp: Path, name: str, ckpt: Path, restarts: int, env: dict[str, str]) -> Proc:
    """Run two nodes until they train together, kill node 0 (master and store); node 1, finished."""
    nodes = _two_nodes(tmp, name, ckpt, restarts, env)
    try:
        nodes[0].wait_for(lambda e: e.get("event") == "step_done" and e["step"] >= 3)
        nodes[0].kill_tree()
        nodes[1].wait()
    finally:
        for n in nodes:
            n.kill_tree()
    return nodes[1]


@pytest.mark.slow
def test_survivor_of_a_lost_node_exits_75_then_escalates_without_progress(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    env = {"TRAINPLANE_MAX_PEER_LOSSES": "1"}
    # as the job stack runs it (--max-restarts=3): the worker's gloo collective breaks and it exits 75,
    # which ends the fixed-size group's run without an in-pod restart
    first = _lose_master(tmp_path, "a", ckpt, 3, env)
    assert first.p.returncode == EXIT_PEER_LOST, first.tail()
    assert "restart not counted" in first.err.read_text().strip().splitlines()[-1]
    # the same node loses its peer again with no new checkpoint: counted (no torchrun restarts this time,
    # so the worker's own code 75 is what torchrun reports)
    second = _lose_master(tmp_path, "b", ckpt, 0, env)
    assert second.p.returncode == EXIT_CRASH, second.tail()
    last = second.err.read_text().strip().splitlines()[-1]
    assert "2 peer losses in a row without a new checkpoint" in last and "counted as a crash" in last
    assert "trainplane: a peer is gone: RuntimeError" in second.err.read_text()  # the worker said why


# Well under torchrun's rendezvous timeout (the old launcher waited there for the vanished peer, over 150 s
# in a trial), and far above the seconds a survivor needs to notice its broken collective: a functional
# bound, not a speed assertion.
LOST_PEER_BOUND_S = 60


@pytest.mark.slow
def test_master_whose_peer_node_dies_exits_75_at_once_without_an_in_pod_restart(tmp_path: Path) -> None:
    # A fixed-size job (--nnodes=2) as the job stack runs it (--max-restarts=3). The lost node is node
    # rank 1, so the survivor hosts the store: torchrun's in-pod restart would wait in the rendezvous for
    # the vanished peer instead of failing the pod, and the JobSet would not restart the gang until
    # Kubernetes marked the lost node's pod failed.
    nodes = _two_nodes(tmp_path, "m", tmp_path / "ckpt", 3, {}, ["--checkpoint.interval-steps", "2"])
    try:
        nodes[0].wait_for(lambda e: e.get("event") == "checkpoint_committed")
        nodes[1].kill_tree()
        try:
            nodes[0].wait(LOST_PEER_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"node 0 still running {LOST_PEER_BOUND_S} s after its peer died; {nodes[0].tail()}")
    finally:
        for n in nodes:
            n.kill_tree()
    assert nodes[0].p.returncode == EXIT_PEER_LOST, nodes[0].tail()
    summary = json.loads(nodes[0].out.read_text().strip().splitlines()[-1])
    assert summary["event"] == "launcher_exit" and summary["exit_code"] == EXIT_PEER_LOST
    assert summary["restarts"] == 0, summary  # the gang restarts, not this pod's workers
    # a checkpoint committed before the loss: progress, so not counted
    assert "restart not counted" in nodes[0].err.read_text().strip().splitlines()[-1]


@pytest.mark.slow
def test_elastic_job_that_loses_a_node_reforms_in_pod_at_the_smaller_size(tmp_path: Path) -> None:
    # An elastic job (--nnodes=1:2, c10d) keeps torchrun's in-pod restart after a peer loss: the survivor
    # re-forms the group with the nodes that are left, which is what an elastic job is for.
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [
        Proc(
            [
                "-m",
                "trainer.launch",
                "--nnodes=1:2",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint={endpoint}",
                "--rdzv-id=elastic",
                # In a cluster the c10d store lives on the endpoint's pod, node 0's; here both nodes are
                # 127.0.0.1, so without is_host whichever binds first hosts it, and killing node 1 could
                # take the store with it (seen in CI: rendezvous failed, exit 75).
                f"--rdzv-conf=last_call_timeout=1,is_host={'true' if rank == 0 else 'false'}",
                "--nproc-per-node=1",
                "--max-restarts=3",
                "--",
                *PLUGIN,
                "--steps",
                "100000",
                "--checkpoint.uri",
                str(tmp_path / "ckpt"),
                "--checkpoint.interval-steps",
                "2",
            ],
            tmp_path,
            f"e-node{rank}",
        )
        for rank in (0, 1)
    ]
    try:
        nodes[0].wait_for(lambda e: e.get("event") == "start" and e["world_size"] == 2)
        nodes[0].wait_for(lambda e: e.get("event") == "checkpoint_committed")
        nodes[1].kill_tree()
        # the same launcher's workers again (torchrun's restart count), now alone
        nodes[0].wait_for(
            lambda e: e.get("event") == "start" and e["world_size"] == 1 and e["restart_count"] >= 1
        )
    finally:
        for n in nodes:
            n.kill_tree()
    assert "no in-pod restart" not in nodes[0].err.read_text()
