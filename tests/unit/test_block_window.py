"""The Capacity Block window (issue 18, defect 8): Kueue admits to a block's flavor only inside the block's
dates. The controller is run for real, from the files the platform ships, against the fake API server of
test_gpu_health.py holding the plan's own ClusterQueues."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time

from components.incluster.block_window_agent import desired, open_gpus, patch_ops
from tests.helpers.plans import planned
from tests.unit.test_gpu_health import FakeCluster

STACK = "aws-h100-reserved"
FLAVOR = "h100-capacity-block"
HOUR = 3600.0
TEAMS = [
    {"team": "research", "gpuQuota": 64, "clusterQueue": "research"},
    {"team": "eval", "gpuQuota": 16, "clusterQueue": "eval"},
]


def flavor(start: float, end: float, borrowing: bool = True) -> dict:
    return {
        "name": FLAVOR,
        "pools": [{"name": "h100-block", "gpus": 32, "start": start, "end": end}],
        "teams": TEAMS,
        "borrowing": borrowing,
    }


def test_the_block_flavor_has_quota_only_between_start_and_half_an_hour_before_the_end():
    start, end = 1000 * HOUR, 1336 * HOUR  # a 14-day block
    drain = 1800
    fl = flavor(start, end)
    assert desired(fl, start - 1, drain) == {"research": (0, 0), "eval": (0, 0)}
    # Inside: the plan's split of 32 GPUs (kueue_quota.py), each may borrow up to its own quota.
    assert desired(fl, start, drain) == {"research": (26, 6), "eval": (6, 10)}
    assert desired(fl, end - drain - 1, drain) == {"research": (26, 6), "eval": (6, 10)}
    # EC2 starts reclaiming the instances 30 minutes before the end: no new job from then on.
    assert desired(fl, end - drain, drain) == {"research": (0, 0), "eval": (0, 0)}
    assert desired(flavor(start, end, borrowing=False), start, drain) == {"research": (26, 0), "eval": (6, 0)}
    # Two blocks behind one flavor: only the running one counts.
    two = [*fl["pools"], {"name": "b2", "gpus": 16, "start": end, "end": end + 100 * HOUR}]
    assert open_gpus(two, start + HOUR, drain) == 32
    assert open_gpus(two, end + HOUR, drain) == 16


def test_a_queue_already_right_is_not_patched():
    cq = {
        "metadata": {"resourceVersion": "7"},
        "spec": {
            "resourceGroups": [
                {
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "96"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "26", "borrowingLimit": "6"},
                            ],
                        }
                    ]
                }
            ]
        },
    }
    assert patch_ops(cq, FLAVOR, 26, 6) == []
    assert patch_ops(cq, FLAVOR, 0, 0) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/1/nominalQuota", "value": "0"},
        {"op": "add", "path": "/spec/resourceGroups/0/flavors/0/resources/1/borrowingLimit", "value": "0"},
    ]


def _shipped(tmp_path, config_edit):
    """The controller's files as the platform ships them (its ConfigMap), the config edited."""
    result = planned(STACK)
    (cm,) = [
        r.inputs
        for r in result.of_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"]["name"] == "trainplane-block-window"
    ]
    for name, text in cm["data"].items():
        (tmp_path / name).write_text(text)
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
    (tmp_path / "token").write_text("sa-token\n")
    args = ["--config", str(tmp_path / "config.json"), "--once", "--api-url", cluster.url]
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-S",
                "-E",
                str(tmp_path / "agent.py"),
                *args,
                "--token-file",
                str(tmp_path / "token"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        cluster.server.shutdown()
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
    assert cluster.auth == {"Bearer sa-token"}
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


def test_the_platform_deploys_the_controller_with_least_privilege():
    result = planned(STACK)

    def named(kind: str) -> dict:
        (obj,) = [
            r.inputs
            for r in result.of_type(f"kubernetes:{kind}")
            if r.inputs["metadata"]["name"] == "trainplane-block-window"
        ]
        return obj

    (rule,) = named("rbac.authorization.k8s.io/v1:ClusterRole")["rules"]
    assert rule == {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["clusterqueues"],
        "resourceNames": ["eval", "research"],
        "verbs": ["get", "patch"],
    }
    binding = named("rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "trainplane-block-window", "namespace": "kueue-system"}
    ]
    assert named("core/v1:ServiceAccount")["metadata"]["namespace"] == "kueue-system"
    deploy = named("apps/v1:Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (c,) = pod["containers"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    config = json.loads(named("core/v1:ConfigMap")["data"]["config.json"])
    (pool,) = config["flavors"][0]["pools"]
    # The stack's blockStart / blockEnd.
    assert (pool["start"], pool["end"]) == (1796124600.0, 1797334200.0)
    # Stacks without a Capacity Block get none of it.
    assert not [
        r for r in planned("aws-dev").resources if "trainplane-block-window" in str(r.inputs.get("metadata"))
    ]
