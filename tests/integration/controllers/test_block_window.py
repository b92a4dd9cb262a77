"""The Capacity Block window controller, run as the pod runs it (`python -m controllers block-window`, the
image's entry point) against the fake Kubernetes API server,
closes and reopens the block on the plan's ClusterQueues (tests/unit/controllers/test_block_window.py has the rest)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time

from tests.helpers.fake_k8s import FakeCluster
from tests.helpers.plans import ROOT, planned
from tests.helpers.procs import run_group

STACK = "aws-h100-reserved"
FLAVOR = "h100-capacity-block"
HOUR = 3600.0


def _shipped(tmp_path, config_edit):
    """The controller's config as the platform writes it (its ConfigMap: config.json only), edited."""
    result = planned(STACK)
    (cm,) = [
        r.inputs
        for r in result.of_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"]["name"] == "trainplane-block-window"
    ]
    assert set(cm["data"]) == {"config.json"}  # no source: the code is the image's
    config = json.loads(cm["data"]["config.json"])
    config_edit(config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    queues = {
        f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{r.inputs['metadata']['name']}": {
            "apiVersion": r.inputs["apiVersion"],
            "kind": "ClusterQueue",
            "metadata": {**r.inputs["metadata"], "resourceVersion": "1"},
            "spec": copy.deepcopy(r.inputs["spec"]),
        }
        for r in result.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    }
    return config, queues


def _run(tmp_path, queues) -> tuple[FakeCluster, subprocess.CompletedProcess]:
    cluster = FakeCluster([], [], [], objects=queues)
    kubeconfig = cluster.server.kubeconfig(tmp_path / "kubeconfig")
    args = ["--config", str(tmp_path / "config.json"), "--once", "--kubeconfig", kubeconfig]
    try:
        run = run_group(
            [sys.executable, "-m", "controllers", "block-window", *args],
            timeout=60,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
        )
    finally:
        cluster.server.close()
    assert run.returncode == 0, run.stderr
    return cluster, run


def _gpu(queue: dict) -> dict:
    fl = next(f for f in queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == FLAVOR)
    return next(r for r in fl["resources"] if r["name"] == "nvidia.com/gpu")


def test_the_shipped_controller_closes_and_reopens_the_block_on_the_plans_cluster_queues(tmp_path):
    now = time.time()

    def before_start(config):
        for p in config["flavors"][0]["pools"]:
            p["start"], p["end"] = now + 24 * HOUR, now + 100 * HOUR

    config, queues = _shipped(tmp_path, before_start)
    assert [f["name"] for f in config["flavors"]] == [FLAVOR]
    research = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/research"
    eval_ = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/eval"
    # The plan gives the block its share; before the block starts the controller takes it away.
    assert _gpu(queues[research]) == {"name": "nvidia.com/gpu", "nominalQuota": "26", "borrowingLimit": "6"}
    cluster, run = _run(tmp_path, queues)
    assert cluster.auth == {"Bearer read-only"}  # the kubeconfig's token
    assert _gpu(queues[research]) == {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "0"}
    assert _gpu(queues[eval_]) == {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "0"}
    # Only the block's flavor changed: the on-demand flavor keeps its quota.
    od = next(
        f for f in queues[research]["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "h100-on-demand"
    )
    assert next(r for r in od["resources"] if r["name"] == "nvidia.com/gpu")["nominalQuota"] == "26"
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert {(e["clusterQueue"], e["nominal"]) for e in events if e["event"] == "quota_set"} == {
        ("research", 0),
        ("eval", 0),
    }

    def running(config):
        for p in config["flavors"][0]["pools"]:
            p["start"], p["end"] = now - HOUR, now + 100 * HOUR

    _shipped(tmp_path, running)
    cluster, run = _run(tmp_path, queues)
    assert _gpu(queues[research]) == {"name": "nvidia.com/gpu", "nominalQuota": "26", "borrowingLimit": "6"}
    assert _gpu(queues[eval_]) == {"name": "nvidia.com/gpu", "nominalQuota": "6", "borrowingLimit": "10"}
    # A second round finds nothing to change.
    cluster, run = _run(tmp_path, queues)
    assert cluster.patches == {}
