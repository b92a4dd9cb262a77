"""The GPU health agents as shipped: the controller process against the fake Kubernetes API server, its
one-line exit 2 without an API, the agents on a bare python, the diag script under bash
(tests/unit/test_gpu_health.py has the rest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.incluster import gpu_health_agent as agent
from components.incluster.gpu_health_agent import (
    PENDING_TAINT,
    UNHEALTHY_TAINT,
)
from components.spec import APPLICATION_XIDS
from tests.helpers.fake_k8s import FakeCluster
from tests.helpers.gpu_health import node


def diag_pod(node_name, result, created="2026-11-20T11:00:00Z"):
    state = (
        {"terminated": {"exitCode": 0, "message": f"result={result} rc=0\n"}} if result else {"running": {}}
    )
    return {
        "metadata": {"name": f"diag-{node_name}", "creationTimestamp": created},
        "spec": {"nodeName": node_name},
        "status": {"initContainerStatuses": [{"name": "dcgm-diag", "state": state}]},
    }


def test_controller_process_taints_and_untaints_nodes(tmp_path):
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    old = {"key": UNHEALTHY_TAINT, "value": "xid-79", "effect": "NoSchedule"}
    nodes = [
        node("good"),
        node("xid"),
        node("short", allocatable="7"),
        node("fresh", age_s=120),
        node("recovered", taints=[gpu_taint, old]),
        node("cpu", capacity=None, pool="system"),
        node("raced", allocatable="5"),
    ]
    pods = [diag_pod(n, "pass") for n in ("good", "xid", "short", "recovered", "raced")]
    pods.append(diag_pod("fresh", None))
    pods.append(diag_pod("good", "fail", created="2026-11-20T10:00:00Z"))  # an older pod of a rollout
    cluster = FakeCluster(nodes, pods, xids=[("xid", "3", 79), ("good", "1", 13)], changed=["raced"])
    config = {
        "pools": [{"name": "h100", "matchLabels": {"trainplane.dev/pool": "h100"}, "expectedGpus": 8}],
        "diagnostic": {
            "enabled": True,
            "namespace": "gpu-operator",
            "podSelector": "app=trainplane-gpu-diag",
            "container": "dcgm-diag",
        },
        "ignoredXids": list(APPLICATION_XIDS),
        "startupGraceSeconds": 1200,
        "prometheusUrl": cluster.url,
        "xidQuery": "max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS)",
        "intervalSeconds": 30,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "token").write_text("sa-token\n")
    args = ["--config", str(tmp_path / "config.json"), "--once", "--api-url", cluster.url]
    args += ["--token-file", str(tmp_path / "token")]
    try:
        run = subprocess.run(
            [sys.executable, agent.__file__, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        cluster.server.close()
    assert run.returncode == 0, run.stderr
    assert cluster.auth == {"Bearer sa-token"}
    patches = cluster.patches
    assert patches["xid"] == [gpu_taint, {"key": UNHEALTHY_TAINT, "value": "xid-79", "effect": "NoSchedule"}]
    assert patches["short"][-1] == {"key": UNHEALTHY_TAINT, "value": "gpus-unhealthy", "effect": "NoSchedule"}
    assert patches["fresh"][-1] == {"key": PENDING_TAINT, "value": "pending", "effect": "NoSchedule"}
    assert patches["recovered"] == [gpu_taint]
    # Healthy and unchanged ("good": its newest diagnostic passed, XID 13 is an application error),
    # outside any GPU pool, or changed meanwhile (the guarded patch fails): nothing went through.
    assert set(patches) == {"xid", "short", "fresh", "recovered"}
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert [(e["node"], e["status"]) for e in events if e["event"] == "taint_patch_failed"] == [
        ("raced", 422)
    ]


def test_controller_without_api_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    run = subprocess.run(
        [sys.executable, agent.__file__, "--config", str(tmp_path / "config.json"), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "shipped",
    [
        ["agent_runtime.py", "gpu_health_agent.py"],
        ["agent_runtime.py", "kueue_quota.py", "block_window_agent.py"],
    ],
)
def test_agents_run_from_their_shipped_files_on_a_bare_python(tmp_path, shipped):
    # They run on a stock python image from a ConfigMap: the standard library and the files shipped
    # beside them only. -S -E: no site-packages (no project install), the script's folder on the path.
    import subprocess

    here = Path(agent.__file__).parent
    for f in shipped:
        (tmp_path / f).write_text((here / f).read_text())
    script = tmp_path / shipped[-1]
    out = subprocess.run([sys.executable, "-S", "-E", str(script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--config" in out.stdout and "--once" in out.stdout
    # without the API it says so in one line, exit 2
    (tmp_path / "config.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    out = subprocess.run(
        [sys.executable, "-S", "-E", str(script), "--config", str(tmp_path / "config.json"), "--once"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_diag_script_is_valid_bash():
    from components.incluster.gpu_health import diag_script

    for level in (1, 2, 3):
        run = subprocess.run(["bash", "-n"], input=diag_script(level), text=True, capture_output=True)
        assert run.returncode == 0, run.stderr
