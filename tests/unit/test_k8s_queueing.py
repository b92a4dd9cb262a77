"""Kueue: flavors matching pool labels and taints, team ClusterQueues in one cohort, LocalQueues,
waitForPodsReady, and Kueue objects only after the chart that installs their CRDs."""

from __future__ import annotations

import functools

import yaml

from tests.conftest import plan_object, platform_object


@functools.cache
def plan(stack: str):
    obj = platform_object(stack)
    obj["teams"].append({"name": "vision", "gpuQuota": 8})
    return plan_object(obj, stack)


def kueue(result, kind: str) -> list:
    return [r for r in result.resources if r.type == f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}"]


def test_flavor_matches_the_pool_labels_and_taints():
    (flavor,) = kueue(plan("aws-dev"), "ResourceFlavor")
    assert flavor.inputs["metadata"]["name"] == "h100-spot"
    assert flavor.inputs["spec"]["nodeLabels"] == {
        "trainplane.dev/pool": "h100",
        "trainplane.dev/gpu": "H100",
        "trainplane.dev/capacity": "spot",
    }
    assert flavor.inputs["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    (onprem,) = kueue(plan("onprem-dev"), "ResourceFlavor")
    assert onprem.inputs["spec"]["nodeLabels"] == {"node.kubernetes.io/instance-type": "dgx-a100"}


def test_flavor_per_gpu_kind_and_capacity():
    obj = platform_object("aws-dev")
    obj["nodePools"].append({"name": "h100od", "gpu": "H100", "gpusPerNode": 8, "maxNodes": 2})
    names = sorted(f.inputs["metadata"]["name"] for f in kueue(plan_object(obj), "ResourceFlavor"))
    assert names == ["h100-on-demand", "h100-spot"]


def test_team_queues_share_one_cohort_with_their_nominal_gpu_quota():
    result = plan("aws-dev")
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in kueue(result, "ClusterQueue")}
    assert set(queues) == {"research", "vision"}
    for team, gpus in (("research", "16"), ("vision", "8")):
        spec = queues[team]
        assert spec["cohortName"] == "gpu-cohort"
        assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": team}}
        (group,) = spec["resourceGroups"]
        assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
        (flavor,) = group["flavors"]
        gpu = next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")
        assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": gpus}  # no borrowingLimit: may borrow
    local = {
        (q.inputs["metadata"]["namespace"], q.inputs["metadata"]["name"], q.inputs["spec"]["clusterQueue"])
        for q in kueue(result, "LocalQueue")
    }
    # The name jobs put in kueue.x-k8s.io/queue-name (bundle.team_local_queue).
    assert local == {("research", "research-gpus", "research"), ("vision", "vision-gpus", "vision")}


def test_borrowing_disabled_sets_zero_borrowing_limits():
    obj = platform_object("onprem-dev")
    obj["queueing"] = {"borrowing": False, "cohort": "lab"}
    (cq,) = kueue(plan_object(obj), "ClusterQueue")
    assert cq.inputs["spec"]["cohortName"] == "lab"
    for r in cq.inputs["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        assert r["borrowingLimit"] == "0"


def test_wait_for_pods_ready_and_crds_first():
    result = plan("gcp-dev")
    (release,) = [
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"].endswith("/kueue")
    ]
    assert release.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert release.inputs["version"] == "0.19.2"
    assert "repositoryOpts" not in release.inputs
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["waitForPodsReady"]["blockAdmission"] is True
    assert config["waitForPodsReady"]["timeout"] == "10m"
    assert "batch/job" in config["integrations"]["frameworks"]
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue"):
        for obj in kueue(result, kind):
            assert release.urn in obj.deps, (kind, obj.name)
    # Kueue's metrics ServiceMonitor needs the Prometheus CRDs.
    (prom,) = [
        r
        for r in result.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "kube-prometheus-stack"
    ]
    assert prom.urn in release.deps


def test_queueing_disabled_installs_no_kueue():
    obj = platform_object("onprem-dev")
    obj["queueing"] = {"enabled": False}
    result = plan_object(obj)
    assert not [r for r in result.resources if "kueue" in r.type or "kueue" in str(r.inputs.get("chart"))]


def _manager_config(result) -> dict:
    (release,) = [
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"].endswith("/kueue")
    ]
    return yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_kueue_manages_only_the_job_kinds_the_platform_runs():
    """With `pod` on, Kueue's pod webhook (failurePolicy Fail) gates every pod of the cluster."""
    config = _manager_config(plan("gcp-dev"))
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]


def test_kueue_webhooks_see_only_team_namespaces():
    result = plan("aws-dev")
    selector = _manager_config(result)["managedJobsNamespaceSelector"]
    (expr,) = selector["matchExpressions"]
    namespaces = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels") or {}
        for r in result.of_type("kubernetes:core/v1:Namespace")
    }

    def selected(labels: dict) -> bool:
        assert expr["operator"] == "Exists" and set(selector) == {"matchExpressions"}
        return expr["key"] in labels

    assert {ns for ns, labels in namespaces.items() if selected(labels)} == {"research", "vision"}
    assert {"monitoring", "gpu-operator", "kueue-system"} <= set(namespaces)


EFA = "vpc.amazonaws.com/efa"


def _resources(flavor: dict) -> dict[str, str]:
    return {r["name"]: r["nominalQuota"] for r in flavor["resources"]}


def test_cluster_queue_covers_the_pools_extended_resources():
    """A pod requesting a resource its ClusterQueue does not cover is inadmissible (kueue flavorassigner)."""
    result = plan_object(platform_object("aws-h200-efa"), "aws-h200-efa")
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in kueue(result, "ClusterQueue")}
    for team, spec in queues.items():
        (group,) = spec["resourceGroups"]
        assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", EFA], team
        for flavor in group["flavors"]:
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    flavors = {f["name"]: _resources(f) for f in queues["llm"]["resourceGroups"][0]["flavors"]}
    # The mock bundle's H200 pools are p5en (the catalog's cheapest 8x H200), 16 EFA devices a node.
    # llm (64 GPUs): all of h200-spot (8 nodes) and all of h200-od (2 nodes).
    assert flavors["h200-spot"]["nvidia.com/gpu"] == "64" and flavors["h200-spot"][EFA] == "128"
    assert flavors["h200-on-demand"]["nvidia.com/gpu"] == "16" and flavors["h200-on-demand"][EFA] == "32"
    # eval (16 GPUs): the EFA devices of the two nodes its GPUs fill.
    eval_ = {f["name"]: _resources(f) for f in queues["eval"]["resourceGroups"][0]["flavors"]}
    assert eval_["h200-spot"]["nvidia.com/gpu"] == "16" and eval_["h200-spot"][EFA] == "32"


def test_extended_quota_follows_the_densest_pool_and_stops_at_what_the_flavor_has():
    from components.bundle import NodePoolInfo, gpu_taint
    from components.kubernetes.queueing import flavors

    def pool(name: str, efa: int, nodes: int) -> NodePoolInfo:
        return NodePoolInfo(
            name=name,
            gpu="H200",
            gpus_per_node=8,
            capacity="spot",
            min_nodes=0,
            max_nodes=nodes,
            labels={"trainplane.dev/gpu": "H200", "trainplane.dev/pool": name},
            taints=(gpu_taint(),),
            extended_resources={EFA: efa} if efa else {},
        )

    # p5e (32 EFA) and p5en (16 EFA) pools in one flavor: a 16-GPU job on p5e needs 64 devices.
    (f,) = flavors((pool("p5e", 32, 4), pool("p5en", 16, 4)))
    assert f.extended == {EFA: 4 * 32 + 4 * 16}
    assert f.extended_quota(EFA, 16) == 64
    assert f.extended_quota(EFA, 64) == 192  # all the flavor has
    (plain,) = flavors((pool("noefa", 0, 2),))
    assert plain.extended_quota(EFA, 16) == 0
