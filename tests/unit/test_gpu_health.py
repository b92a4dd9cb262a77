"""GPU node health (issue 14, point 8): which node states lead to which taint, the controller run as a
real process against a fake API server and Prometheus, and what the platform deploys for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.incluster import gpu_health_agent as agent
from components.incluster.gpu_health_agent import (
    PENDING_TAINT,
    UNHEALTHY_TAINT,
    Diag,
    Policy,
    assess,
    desired_taints,
    diag_of,
    taint_value,
)
from components.spec import APPLICATION_XIDS, ConfigError, PlatformSpec
from tests.helpers.plans import plan_object, planned, platform_object

NOW = time.mktime(time.strptime("2026-11-20T12:00:00", "%Y-%m-%dT%H:%M:%S")) - time.timezone
POLICY = Policy(diagnostic=True, startup_grace_s=1200, ignored_xids=frozenset(APPLICATION_XIDS))
PASS = Diag("pass")


def node(name="gpu-a", capacity="8", allocatable=None, age_s=3600, taints=None, conditions=(), pool="h100"):
    status = {"conditions": list(conditions)}
    if capacity is not None:
        status["capacity"] = {"nvidia.com/gpu": capacity, "cpu": "192"}
        status["allocatable"] = {"nvidia.com/gpu": allocatable or capacity, "cpu": "191"}
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - age_s))
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "41",
            "creationTimestamp": created,
            "labels": {"trainplane.dev/pool": pool},
        },
        "spec": {"taints": taints or [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": status,
    }


def verdict(n, expected=8, diag=PASS, xids=()):
    return assess(n, expected_gpus=expected, diag=diag, xids=list(xids), now=NOW, policy=POLICY)


# ---- the decision ------------------------------------------------------------------------------


def test_a_healthy_node_carries_no_taint_of_ours():
    v = verdict(node())
    assert v.reasons == () and not v.pending and v.taints() == []


@pytest.mark.parametrize(
    ("n", "kwargs", "reason"),
    [
        # The device plugin withdrew a GPU after a critical XID.
        (node(allocatable="7"), {}, "gpus-unhealthy"),
        # A GPU fell off the bus: fewer than the machine type has.
        (node(capacity="7"), {}, "gpus-missing"),
        # Still no GPUs after the startup grace.
        (node(capacity=None, age_s=3600), {}, "gpus-missing"),
        # EKS node monitoring agent.
        (
            node(conditions=[{"type": "AcceleratedHardwareReady", "status": "False"}]),
            {},
            "accelerated-hardware",
        ),
        (node(), {"diag": Diag("fail", "result=fail rc=226")}, "diag-failed"),
        (node(), {"diag": Diag("error", "result=error rc=-1")}, "diag-error"),
        (node(), {"xids": [79]}, "xid-79"),
    ],
)
def test_each_fault_taints_the_node_unhealthy(n, kwargs, reason):
    v = verdict(n, **kwargs)
    assert v.reasons == (reason,)
    assert v.taints() == [{"key": UNHEALTHY_TAINT, "value": reason, "effect": "NoSchedule"}]


def test_what_is_not_a_fault():
    # Application XIDs leave the GPU healthy; a young node may still be starting its device plugin;
    # with MIG the count is a profile question; a diagnostic skipped on a busy node is no verdict.
    assert verdict(node(), xids=[13, 31, 43]).reasons == ()
    assert verdict(node(capacity=None, age_s=300)).reasons == ()
    assert verdict(node(capacity="56"), expected=None).reasons == ()
    assert verdict(node(), diag=Diag("skipped")).taints() == []
    assert verdict(node(conditions=[{"type": "AcceleratedHardwareReady", "status": "True"}])).reasons == ()


def test_the_node_waits_for_its_diagnostic_unless_it_is_already_broken():
    assert verdict(node(), diag=Diag("pending")).taints() == [
        {"key": PENDING_TAINT, "value": "pending", "effect": "NoSchedule"}
    ]
    assert verdict(node(allocatable="6"), diag=Diag("pending")).taints()[0]["key"] == UNHEALTHY_TAINT
    off = assess(node(), expected_gpus=8, diag=None, xids=[], now=NOW, policy=Policy(diagnostic=False))
    assert off.taints() == []


def test_taint_keys_are_the_autoscalers_and_never_a_pool_taint():
    # startup-taint: the autoscaler waits for the node; status-taint: ready but unusable, so it adds capacity.
    assert PENDING_TAINT.startswith("startup-taint.cluster-autoscaler.kubernetes.io/")
    assert UNHEALTHY_TAINT.startswith("status-taint.cluster-autoscaler.kubernetes.io/")
    for key in (PENDING_TAINT, UNHEALTHY_TAINT):
        prefix, name = key.split("/")
        assert len(name) <= 63 and len(prefix) <= 253


def test_other_taints_stay_and_an_unchanged_verdict_changes_nothing():
    foreign = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}
    ours = {
        "key": UNHEALTHY_TAINT,
        "value": "xid-79",
        "effect": "NoSchedule",
        "timeAdded": "2026-11-20T11:00:00Z",
    }
    n = node(taints=[foreign, ours])
    # Still broken for the same reason: the taint (and its timeAdded) stays as it is.
    assert desired_taints(n, verdict(n, xids=[79])) == [foreign, ours]
    # Healthy again: only ours goes.
    assert desired_taints(n, verdict(n)) == [foreign]


def test_taint_values_are_label_values():
    assert taint_value("xid-79") == "xid-79"
    assert taint_value("diag failed: memory/GPU 3") == "diag-failed--memory-GPU-3"
    assert len(taint_value("x" * 100)) == 63


def test_the_diagnostic_verdict_is_read_from_the_termination_message():
    def pod(state):
        return {"status": {"initContainerStatuses": [{"name": "dcgm-diag", **state}]}}

    done = {"state": {"terminated": {"exitCode": 0, "message": "result=fail rc=226\n| Memory | Fail |"}}}
    assert diag_of(pod(done), "dcgm-diag").result == "fail"
    assert diag_of(pod({"state": {"running": {}}}), "dcgm-diag").result == "pending"
    garbled = {"state": {"terminated": {"exitCode": 137, "message": ""}}}
    assert diag_of(pod(garbled), "dcgm-diag").result == "error"
    assert diag_of({"status": {}}, "dcgm-diag").result == "pending"


# ---- the controller as a process ---------------------------------------------------------------


def apply_json_patch(obj: dict, patch: list) -> bool:
    """Apply [test resourceVersion, replace/add ...] to `obj` in place as the API server does; False when
    the test fails (the object changed since it was read)."""
    test, *ops = patch
    if test != {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": obj["metadata"]["resourceVersion"],
    }:
        return False
    for op in ops:
        *parents, last = op["path"].strip("/").split("/")
        cur = obj
        for key in parents:
            cur = cur[int(key)] if isinstance(cur, list) else cur[key]
        cur[last] = op["value"]
    obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    return True


class FakeCluster:
    """Nodes, diagnostic pods and Prometheus behind one loopback HTTP server; `objects` (API path -> object)
    are served as they are and take JSON patches guarded by their resourceVersion (other controllers'
    tests, e.g. test_block_window.py)."""

    def __init__(self, nodes, pods, xids, changed=(), objects=None):
        self.objects = objects or {}
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        # Nodes another writer changes after the controller listed them (their resourceVersion moves on).
        self.current = json.loads(json.dumps(self.nodes))
        for name in changed:
            self.current[name]["metadata"]["resourceVersion"] = "42"
        self.pods, self.xids = pods, xids
        self.patches: dict[str, list] = {}
        self.auth: set[str] = set()
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                if url.path == "/api/v1/query":
                    result = [
                        {"metric": {"node": n, "gpu": g}, "value": [0, str(x)]} for n, g, x in cluster.xids
                    ]
                    return self.reply(
                        200, {"status": "success", "data": {"resultType": "vector", "result": result}}
                    )
                cluster.auth.add(self.headers.get("Authorization", ""))
                if url.path == "/api/v1/nodes":
                    return self.reply(200, {"items": list(cluster.nodes.values())})
                if url.path == "/api/v1/namespaces/gpu-operator/pods":
                    assert urllib.parse.parse_qs(url.query)["labelSelector"] == ["app=trainplane-gpu-diag"]
                    return self.reply(200, {"items": cluster.pods})
                self.reply(*cluster.get_object(url.path))

            def do_PATCH(self):
                name = self.path.rsplit("/", 1)[-1]
                assert self.headers["Content-Type"] == "application/json-patch+json"
                patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path in cluster.objects:
                    return self.reply(*cluster.patch_object(self.path, patch))
                test, add = patch
                current = cluster.current[name]
                version = current["metadata"]["resourceVersion"]
                if test != {"op": "test", "path": "/metadata/resourceVersion", "value": version}:
                    return self.reply(422, {"reason": "Invalid", "message": "test operation failed"})
                cluster.patches[name] = add["value"]
                self.reply(200, current)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def get_object(self, path: str) -> tuple[int, dict]:
        return (200, self.objects[path]) if path in self.objects else (404, {})

    def patch_object(self, path: str, patch: list) -> tuple[int, dict]:
        if not apply_json_patch(self.objects[path], patch):
            return 422, {"reason": "Invalid", "message": "test operation failed"}
        self.patches.setdefault(path, []).append(patch[1:])
        return 200, self.objects[path]


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
        cluster.server.shutdown()
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


# ---- what the platform deploys -----------------------------------------------------------------


def plan(stack: str):
    return planned(stack)


def objects(result, kind: str) -> dict[str, dict]:
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in result.resources
        if r.type == f"kubernetes:{kind}" and "trainplane-gpu" in r.inputs["metadata"]["name"]
    }


def config_of(result) -> dict:
    return json.loads(objects(result, "core/v1:ConfigMap")["trainplane-gpu-health"]["data"]["config.json"])


@pytest.mark.parametrize(
    ("stack", "match"),
    [
        ("aws-dev", {"trainplane.dev/pool": "h100"}),
        ("onprem-dev", {"node.kubernetes.io/instance-type": "dgx-a100"}),
    ],
)
def test_controller_knows_each_gpu_pool_and_its_gpu_count(stack, match):
    result = plan(stack)
    config = config_of(result)
    (pool,) = config["pools"]
    assert pool["matchLabels"] == match and pool["expectedGpus"] == 8
    assert config["diagnostic"]["enabled"] is True and config["diagnostic"]["namespace"] == "gpu-operator"
    assert config["prometheusUrl"] == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    data = objects(result, "core/v1:ConfigMap")["trainplane-gpu-health"]["data"]
    assert data["agent.py"] == Path(agent.__file__).read_text()
    assert data["agent_runtime.py"] == (Path(agent.__file__).parent / "agent_runtime.py").read_text()


def test_controller_rbac_is_least_privilege():
    result = plan("aws-dev")
    (cluster_role,) = objects(result, "rbac.authorization.k8s.io/v1:ClusterRole").values()
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}
    ]
    (role,) = objects(result, "rbac.authorization.k8s.io/v1:Role").values()
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert role["metadata"]["namespace"] == "gpu-operator"
    deployment = objects(result, "apps/v1:Deployment")["trainplane-gpu-health"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # The controller runs off the GPU nodes (it tolerates none of their taints).
    assert "tolerations" not in pod
    sas = objects(result, "core/v1:ServiceAccount")
    assert sas["trainplane-gpu-diag"]["automountServiceAccountToken"] is False


def test_diagnostic_runs_on_every_gpu_node_once_with_the_configured_level():
    obj = platform_object("aws-dev")
    obj["gpuHealth"] = {"diagnostic": {"level": 2}}
    result = plan_object(obj)
    ds = objects(result, "apps/v1:DaemonSet")["trainplane-gpu-diag"]
    assert ds["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["runtimeClassName"] == "nvidia"
    keys = {t["key"] for t in pod["tolerations"]}
    assert {"nvidia.com/gpu", PENDING_TAINT, UNHEALTHY_TAINT} <= keys
    (init,) = pod["initContainers"]
    assert init["image"].startswith("nvcr.io/nvidia/cloud-native/dcgm:")
    script = objects(result, "core/v1:ConfigMap")["trainplane-gpu-diag"]["data"]["diag.sh"]
    assert "dcgmi diag -r 2" in script and "226|205) report fail" in script
    # The diagnostic needs the operator's RuntimeClass and validation: it waits for the release.
    (release,) = [
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "gpu-operator"
    ]
    (ds_res,) = [
        r
        for r in result.of_type("kubernetes:apps/v1:DaemonSet")
        if r.inputs["metadata"]["name"] == "trainplane-gpu-diag"
    ]
    assert release.urn in ds_res.deps


def test_diag_image_is_the_dcgm_the_operator_chart_pins():
    import yaml

    from components.incluster.gpu_health import DCGM_IMAGE

    values = (
        Path(__file__).resolve().parents[2].parent
        / "shared/reference/charts/gpu-operator-v26.7.0.values.yaml"
    )
    if not values.exists():
        pytest.skip("upstream chart defaults not on this machine")
    dcgm = yaml.safe_load(values.read_text())["dcgm"]
    assert DCGM_IMAGE == f"{dcgm['repository']}/{dcgm['image']}:{dcgm['version']}"


def test_diag_script_is_valid_bash():
    from components.incluster.gpu_health import diag_script

    for level in (1, 2, 3):
        run = subprocess.run(["bash", "-n"], input=diag_script(level), text=True, capture_output=True)
        assert run.returncode == 0, run.stderr


def test_count_follows_time_slicing_and_is_off_with_mig():
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"timeSlicing": {"replicas": 4}}
    assert config_of(plan_object(obj))["pools"][0]["expectedGpus"] == 32
    obj["gpuOperator"] = {"mig": {"strategy": "single", "profile": "all-1g.10gb"}}
    assert config_of(plan_object(obj))["pools"][0]["expectedGpus"] is None


def test_switches():
    obj = platform_object("onprem-dev")
    obj["gpuHealth"] = {"diagnostic": {"enabled": False}}
    result = plan_object(obj)
    assert config_of(result)["diagnostic"]["enabled"] is False
    assert not objects(result, "apps/v1:DaemonSet")
    obj["gpuHealth"] = {"enabled": False}
    result = plan_object(obj)
    assert not [
        r for r in result.resources if "trainplane-gpu-health" in json.dumps(r.inputs.get("metadata", {}))
    ]


def test_training_jobs_never_tolerate_the_health_taints():
    from tests.helpers.jobs import pod_spec, reference_plan

    keys = {t["key"] for t in pod_spec(reference_plan())["tolerations"]}
    assert keys and not keys & {PENDING_TAINT, UNHEALTHY_TAINT}
    assert all(t["operator"] == "Equal" for t in pod_spec(reference_plan())["tolerations"])


def test_bad_gpu_health_config_is_one_line_per_key():
    obj = platform_object("onprem-dev")
    obj["gpuHealth"] = {"diagnostic": {"level": 5}, "startupGraceMinutes": 1}
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert sorted(p.split(":")[0] for p in e.value.problems) == [
        "platform.gpuHealth.diagnostic.level",
        "platform.gpuHealth.startupGraceMinutes",
    ]
