"""GPU operator: values per cloud profile, GKE's driver path, time-slicing and MIG, Helm wait."""

from __future__ import annotations

import pytest
import yaml

from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import ROOT, plan_object, planned, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

RELEASE = "kubernetes:helm.sh/v3:Release"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"


def plan(stack: str):
    return planned(stack)


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
    assert not [ds for ds in plan("aws-dev").of_type(DAEMONSET) if ds.name.endswith("cos-driver-installer")]


def test_gke_follows_nvidias_gke_path():
    result = plan("gcp-dev")
    values = operator_values(result)
    assert values["driver"] == {"enabled": False}
    assert values["hostPaths"] == {"driverInstallDir": "/home/kubernetes/bin/nvidia"}
    assert values["toolkit"]["installDir"] == "/home/kubernetes/bin/nvidia"
    # gcp-dev runs 1.34: containerd's config comes from drop-in files.
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

    (ds,) = [ds for ds in result.of_type(DAEMONSET) if ds.name.endswith("cos-driver-installer")]
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
    values = operator_values(plan_object(obj))
    assert "env" not in values["toolkit"]


def test_existing_cluster_driver_is_operator_managed_by_default_and_toggles():
    assert operator_values(plan("onprem-dev"))["driver"] == {"enabled": True}
    assert "toolkit" not in operator_values(plan("onprem-dev"))
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"driver": False}
    assert operator_values(plan_object(obj))["driver"] == {"enabled": False}
    del obj["gpuOperator"]
    assert operator_values(plan_object(obj))["driver"] == {"enabled": True}


def test_time_slicing_writes_the_device_plugin_config():
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"timeSlicing": {"replicas": 4}}
    values = operator_values(plan_object(obj))
    config = values["devicePlugin"]["config"]
    assert config["create"] is True and config["name"] == "device-plugin-config"
    parsed = yaml.safe_load(config["data"][config["default"]])
    assert parsed["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert parsed["flags"]["migStrategy"] == "none"
    assert "devicePlugin" not in operator_values(plan("onprem-dev"))


def test_mig_strategy_reaches_the_operator():
    # An existing cluster without prices: MIG on priced pools is refused (test_mig_on_priced_pools_...).
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"mig": {"strategy": "mixed"}}
    assert operator_values(plan_object(obj))["mig"] == {"strategy": "mixed"}
    assert operator_values(plan("onprem-dev"))["mig"] == {"strategy": "none"}


def test_mig_profile_becomes_the_mig_managers_default_config():
    obj = platform_object("onprem-dev")
    obj["gpuOperator"] = {"mig": {"strategy": "single", "profile": "all-1g.10gb"}}
    values = operator_values(plan_object(obj))
    assert values["migManager"] == {"config": {"default": "all-1g.10gb"}}
    assert "migManager" not in operator_values(plan("onprem-dev"))


@pytest.mark.parametrize(
    ("strategy", "advertises"),
    [("mixed", "no nvidia.com/gpu ($0)"), ("single", "its MIG slices as nvidia.com/gpu (N x the price)")],
)
def test_mig_on_priced_pools_is_one_config_error(strategy, advertises):
    """Issue 30, major 6: MIG mixed left a node's GPUs at $0 in the cost rules, single at N x."""
    obj = platform_object("aws-dev")
    obj["gpuOperator"] = {"mig": {"strategy": strategy}}
    with pytest.raises(ConfigError) as e:
        PlatformSpec.load(obj)
    assert e.value.problems == [
        f"platform.gpuOperator.mig.strategy: {strategy} cannot be costed: a MIG node advertises {advertises} "
        "and the cost rules price physical GPUs of pools h100; use timeSlicing, or MIG on a cluster whose "
        "pools have no price"
    ]


def test_extra_pool_taints_are_tolerated_by_operator_daemonsets():
    obj = platform_object("onprem-dev")
    obj["nodePools"][0]["taints"].append(
        {"key": "lab.example/reserved", "value": "ml", "effect": "NoSchedule"}
    )
    tolerations = operator_values(plan_object(obj))["daemonsets"]["tolerations"]
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


# ---- DCGM exporter: labels of the GPU's workload, the fields the alerts need (issue 10 defect 4) ----


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_dcgm_service_monitor_keeps_the_workload_labels(stack):
    monitor = operator_values(plan(stack))["dcgmExporter"]["serviceMonitor"]
    # Without honorLabels the exporter pod's own pod/namespace win and the workload lands in exported_pod.
    assert monitor["honorLabels"] is True
    # ...and the exporter pod's target labels must go, or an unallocated GPU still carries them.
    assert {"action": "labeldrop", "regex": "pod|namespace|container"} in monitor["relabelings"]
    assert {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "node",
        "action": "replace",
    } in monitor["relabelings"]


def test_dcgm_exporter_collects_every_dcgm_field_rules_and_dashboards_use():
    import csv
    import io

    from components.incluster.dashboards.metrics import DCGM_DEFAULT_FIELDS, DCGM_METRICS
    from tests.helpers.promql import all_exprs, metric_names

    result = plan("aws-dev")
    env = {e["name"]: e["value"] for e in operator_values(result)["dcgmExporter"]["env"]}
    namespace, name = env["DCGM_EXPORTER_CONFIGMAP_DATA"].split(":")
    (cm,) = [
        c.inputs
        for c in result.of_type("kubernetes:core/v1:ConfigMap")
        if c.inputs["metadata"]["name"] == name and c.inputs["metadata"]["namespace"] == namespace
    ]
    # The exporter exits without it: it exists before the operator starts the exporter.
    (cm_res,) = [c for c in result.of_type("kubernetes:core/v1:ConfigMap") if c.inputs is cm]
    assert cm_res.urn in release(result, "gpu-operator").deps
    rows = [[c.strip() for c in row] for row in csv.reader(io.StringIO(cm["data"]["metrics"])) if row]
    assert all(len(row) == 3 and row[1] in {"gauge", "counter", "label"} for row in rows), rows
    collected = {row[0] for row in rows}
    # A custom list replaces the exporter's default one: nothing of the default may be lost.
    assert set(DCGM_DEFAULT_FIELDS) <= collected
    used = {n for _, e in all_exprs() for n in metric_names(e) if n.startswith("DCGM_")}
    assert used <= collected, used - collected
    assert used <= DCGM_METRICS
    # The health controller's XID signal reads the exporter's windowed XID count (issue 30 (5)).
    from components.incluster.gpu_health import XID_QUERY

    assert metric_names(XID_QUERY) == {"DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_DEV_XID_ERRORS"}
    assert metric_names(XID_QUERY) <= collected & DCGM_METRICS
    # The health alerts need fields the exporter does not collect by default.
    assert {
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    } <= used - set(DCGM_DEFAULT_FIELDS)


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "onprem-dev"])
def test_operator_waits_for_the_prometheus_crds(stack):
    # The operator creates the DCGM ServiceMonitor only if monitoring.coreos.com CRDs exist when it runs.
    result = plan(stack)
    assert release(result, "kube-prometheus-stack").urn in release(result, "gpu-operator").deps


def test_operator_daemonsets_and_nfd_run_on_nodes_the_health_controller_holds_back():
    from controllers.gpu_health_agent import PENDING_TAINT, UNHEALTHY_TAINT

    values = operator_values(plan("onprem-dev"))
    for tolerations in (
        values["daemonsets"]["tolerations"],
        values["node-feature-discovery"]["worker"]["tolerations"],
    ):
        for key in (PENDING_TAINT, UNHEALTHY_TAINT, "nvidia.com/gpu"):
            assert {"key": key, "operator": "Exists", "effect": "NoSchedule"} in tolerations, key
    # The chart's own NFD tolerations stay (a value replaces the list).
    assert {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Equal",
        "value": "",
        "effect": "NoSchedule",
    } in values["node-feature-discovery"]["worker"]["tolerations"]
    obj = platform_object("onprem-dev")
    obj["gpuHealth"] = {"enabled": False}
    off = operator_values(plan_object(obj))["daemonsets"]["tolerations"]
    assert not [t for t in off if t["key"] in (PENDING_TAINT, UNHEALTHY_TAINT)]


def test_dcgm_exporter_values_fit_the_cluster_policy_schema():
    # The chart copies dcgmExporter into the ClusterPolicy (templates/clusterpolicy.yaml); its CRD must
    # accept honorLabels, the relabeling actions and env.
    import json

    import jsonschema

    from components.incluster.gpu_operator import dcgm_exporter_values

    crd = ROOT.parent / "shared/reference/crds/clusterpolicies.nvidia.com.json"
    if not crd.exists():
        pytest.skip("upstream CRD schemas not on this machine")
    schema = json.loads(crd.read_text())["versions"][0]["schema"]["properties"]["spec"]["properties"]
    values = dcgm_exporter_values()
    jsonschema.validate(values, schema["dcgmExporter"])
    with pytest.raises(jsonschema.ValidationError):  # the schema is strict enough to notice
        jsonschema.validate(
            {**values, "serviceMonitor": {"relabelings": [{"action": "bogus"}]}}, schema["dcgmExporter"]
        )
