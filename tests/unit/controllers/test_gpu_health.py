"""GPU node health (issue 14, point 8): which node states lead to which taint, the controller run as a
real process against a fake API server and Prometheus, and what the platform deploys for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.spec import APPLICATION_XIDS, ConfigError, PlatformSpec
from contract.recovery import CONTROLLER_PERMISSIONS
from controllers import gpu_health_agent as agent
from controllers.gpu_health_agent import (
    PENDING_TAINT,
    UNHEALTHY_TAINT,
    Diag,
    Policy,
    assess,
    desired_taints,
    diag_of,
    taint_value,
)
from tests.helpers.gpu_health import NOW, node, objects
from tests.helpers.plans import ROOT, plan_object, planned, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

POLICY = Policy(diagnostic=True, startup_grace_s=1200, ignored_xids=frozenset(APPLICATION_XIDS))
PASS = Diag("pass")


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


# ---- what the platform deploys -----------------------------------------------------------------


def plan(stack: str):
    return planned(stack)


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
    assert config["quarantine"]["evictGpuPods"] is True
    # The ConfigMap carries the config, no source: the code is the controller image's.
    assert set(objects(result, "core/v1:ConfigMap")["trainplane-gpu-health"]["data"]) == {"config.json"}


def test_controller_rbac_is_the_contract_and_nothing_more():
    result = plan("aws-dev")
    (cluster_role,) = objects(result, "rbac.authorization.k8s.io/v1:ClusterRole").values()
    granted = {
        (r["apiGroups"][0], res, v)
        for r in cluster_role["rules"]
        for res in r["resources"]
        for v in r["verbs"]
    }
    wanted = {(g, res, v) for g, res, verbs in CONTROLLER_PERMISSIONS for v in verbs}
    # kopf, run standalone without scanning or Event posting, needs nothing more (no CRDs, namespaces,
    # peerings; no finalizers or progress annotations, so no other write).
    assert granted == wanted
    (role,) = objects(result, "rbac.authorization.k8s.io/v1:Role").values()
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    deployment = objects(result, "apps/v1:Deployment")["trainplane-gpu-health"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"} and deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert "initContainers" not in pod
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # The controller runs off the GPU nodes (it tolerates none of their taints).
    assert "tolerations" not in pod
    sas = objects(result, "core/v1:ServiceAccount")
    assert sas["trainplane-gpu-diag"]["automountServiceAccountToken"] is False


def _controller_pod(images: dict[str, str] | None = None) -> dict:
    obj = platform_object("aws-dev")
    if images is not None:
        obj["images"] = images
    return objects(plan_object(obj), "apps/v1:Deployment")["trainplane-gpu-health"]["spec"]["template"][
        "spec"
    ]


def test_controller_runs_the_images_entry_point_installing_nothing():
    from components.spec.images import CONTROLLER_IMAGE_UNSET

    pod = _controller_pod()
    (container,) = pod["containers"]
    assert "initContainers" not in pod
    assert container["command"] == ["trainplane-controller", "gpu-health"]
    assert container["args"] == ["--liveness=http://0.0.0.0:8080/healthz"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["GPU_HEALTH_CONFIG"] == "/etc/trainplane/config.json" and "PYTHONPATH" not in env
    # No image set: the marker no registry serves (an explicit failure), not a stock image.
    assert container["image"] == CONTROLLER_IMAGE_UNSET and ".invalid/" in CONTROLLER_IMAGE_UNSET


def test_controller_image_is_the_platforms_or_the_agents_own_by_digest():
    shared = "registry.example/trainplane-controller@sha256:" + "0" * 64
    own = "registry.example/gpu-health@sha256:" + "1" * 64
    assert _controller_pod({"controller": shared})["containers"][0]["image"] == shared
    pod = _controller_pod({"controller": shared, "gpuHealthController": own})
    assert pod["containers"][0]["image"] == own


def test_the_operator_watches_the_diagnostic_pods_the_platform_labels():
    # The operator's index is declared before its config is read, so it names the label itself.
    from components.incluster.gpu_health import DIAG

    assert (
        f'labels={{"app": "{DIAG}"}}' in Path(agent.__file__).with_name("gpu_health_operator.py").read_text()
    )


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

    values = ROOT.parent / "shared/reference/charts/gpu-operator-v26.7.0.values.yaml"
    if not values.exists():
        pytest.skip("upstream chart defaults not on this machine")
    dcgm = yaml.safe_load(values.read_text())["dcgm"]
    assert DCGM_IMAGE == f"{dcgm['repository']}/{dcgm['image']}:{dcgm['version']}"


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


def test_controller_knows_which_teams_quarantine_their_straggler_nodes():
    obj = platform_object("onprem-dev")
    assert config_of(plan_object(obj))["stragglers"] == {
        "alert": "TrainplaneStragglerNode",
        "quarantineNamespaces": [],
    }
    obj["teams"][0]["stragglers"] = "quarantine"
    config = config_of(plan_object(obj))
    assert config["stragglers"]["quarantineNamespaces"] == [obj["teams"][0]["name"]]
    assert config["quarantine"] == {
        "evictGpuPods": True,
        "rediagnose": True,
        "replaceAfterMinutes": 30,
        # Issue 30 (4): the rerun waits for the node's GPU pods, a skipped run is retried.
        "waitForGpuPods": True,
        "rediagnoseRetries": 3,
        "rediagnoseBackoffSeconds": 60,
    }
