"""GPU operator: values per cloud profile, GKE's driver path, time-slicing and MIG, Helm wait."""

from __future__ import annotations

import functools

import pytest
import yaml

from components.spec import ConfigError, PlatformSpec
from infra.mockcloud.kubernetes import plan_incluster
from tests.conftest import platform_object

RELEASE = "kubernetes:helm.sh/v3:Release"


@functools.cache
def plan(stack: str):
    return plan_incluster(platform_object(stack), stack)


def release(result, chart: str):
    found = [r for r in result.of_type(RELEASE) if r.inputs["chart"].rsplit("/", 1)[-1] == chart]
    assert len(found) == 1, [r.inputs["chart"] for r in result.of_type(RELEASE)]
    return found[0]


def operator_values(result) -> dict:
    return release(result, "gpu-operator").inputs["values"]


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_release_is_pinned_namespaced_and_waits_long(stack):
    r = release(plan(stack), "gpu-operator")
    assert r.inputs["version"] == "v26.7.0"
    assert r.inputs["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    assert r.inputs["name"] == "gpu-operator"
    assert r.inputs["namespace"] == "gpu-operator"
    # Helm's 300 s default is too short for the driver DaemonSet on fresh GPU nodes.
    assert r.inputs["timeout"] >= 1800
    values = r.inputs["values"]
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["daemonsets"][
        "tolerations"
    ]


def test_eks_leaves_driver_and_toolkit_to_the_ami():
    values = operator_values(plan("aws-dev"))
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    assert "cdi" not in values and "hostPaths" not in values
    assert not plan("aws-dev").of_type("kubernetes:apps/v1:DaemonSet")


def test_gke_follows_nvidias_gke_path():
    result = plan("gcp-dev")
    values = operator_values(result)
    assert values["driver"] == {"enabled": False}
    assert values["hostPaths"] == {"driverInstallDir": "/home/kubernetes/bin/nvidia"}
    assert values["toolkit"]["installDir"] == "/home/kubernetes/bin/nvidia"
    # gcp-dev runs 1.33: containerd's config comes from drop-in files.
    assert values["toolkit"]["env"] == [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
    assert values["cdi"] == {"enabled": True}

    (quota,) = [
        r
        for r in result.of_type("kubernetes:core/v1:ResourceQuota")
        if r.inputs["metadata"]["namespace"] == "gpu-operator"
    ]
    (expr,) = quota.inputs["spec"]["scopeSelector"]["matchExpressions"]
    assert expr == {
        "scopeName": "PriorityClass",
        "operator": "In",
        "values": ["system-node-critical", "system-cluster-critical"],
    }
    # The release waits for the quota, or GKE rejects the operator's system-node-critical pods.
    assert quota.urn in release(result, "gpu-operator").deps

    (ds,) = result.of_type("kubernetes:apps/v1:DaemonSet")
    assert ds.inputs["metadata"]["namespace"] == "kube-system"
    pod = ds.inputs["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"} in terms[0]["matchExpressions"]
    (installer,) = pod["initContainers"]
    env = {e["name"]: e["value"] for e in installer["env"]}
    assert env["NVIDIA_INSTALL_DIR_HOST"] == values["hostPaths"]["driverInstallDir"]
    assert installer["securityContext"] == {"privileged": True}
    assert {"operator": "Exists"} in pod["tolerations"]


def test_gke_before_133_keeps_the_toolkit_default_config_source():
    obj = platform_object("gcp-dev")
    obj["cluster"]["kubernetesVersion"] = "1.32"
    values = operator_values(plan_incluster(obj))
    assert "env" not in values["toolkit"]


def test_existing_cluster_driver_is_operator_managed_by_default_and_toggles():
    assert operator_values(plan("onprem-dev"))["driver"] == {"enabled": True}
    assert "toolkit" not in operator_values(plan("onprem-dev"))
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"driver": False}
    assert operator_values(plan_incluster(obj))["driver"] == {"enabled": False}
    del obj["gpuOperator"]
    assert operator_values(plan_incluster(obj))["driver"] == {"enabled": True}


def test_time_slicing_writes_the_device_plugin_config():
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"timeSlicing": {"replicas": 4}}
    values = operator_values(plan_incluster(obj))
    config = values["devicePlugin"]["config"]
    assert config["create"] is True and config["name"] == "device-plugin-config"
    parsed = yaml.safe_load(config["data"][config["default"]])
    assert parsed["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert parsed["flags"]["migStrategy"] == "none"
    assert "devicePlugin" not in operator_values(plan("onprem-dev"))


def test_mig_strategy_reaches_the_operator():
    obj = platform_object("aws-dev")
    obj["gpuOperator"] = {"mig": {"strategy": "mixed"}}
    assert operator_values(plan_incluster(obj))["mig"] == {"strategy": "mixed"}
    assert operator_values(plan("aws-dev"))["mig"] == {"strategy": "none"}


def test_mig_profile_becomes_the_mig_managers_default_config():
    obj = platform_object("aws-dev")
    obj["gpuOperator"] = {"mig": {"strategy": "single", "profile": "all-1g.10gb"}}
    values = operator_values(plan_incluster(obj))
    assert values["migManager"] == {"config": {"default": "all-1g.10gb"}}
    assert "migManager" not in operator_values(plan("aws-dev"))


def test_extra_pool_taints_are_tolerated_by_operator_daemonsets():
    obj = platform_object("onprem-dev")
    obj["nodePools"][0]["taints"].append(
        {"key": "lab.example/reserved", "value": "ml", "effect": "NoSchedule"}
    )
    tolerations = operator_values(plan_incluster(obj))["daemonsets"]["tolerations"]
    assert {"key": "lab.example/reserved", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_time_slicing_with_mig_is_a_config_error():
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"mig": {"strategy": "single"}, "timeSlicing": {"replicas": 2}}
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert any(
        p.startswith("platform.gpuOperator.timeSlicing: time-slicing cannot be combined with MIG")
        for p in e.value.problems
    ), e.value.problems
