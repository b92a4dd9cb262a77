"""Kueue: flavors matching pool labels and taints, team ClusterQueues in one cohort, LocalQueues,
waitForPodsReady, and Kueue objects only after the chart that installs their CRDs."""

from __future__ import annotations

import functools

import pytest
import yaml

from tests.helpers.plans import plan_object, platform_object
from tests.helpers.queues import GKE_LEVELS, _kueue_objects, _of, _topology_cel, capacity_pools

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans


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
        # 32 GPUs hold both quotas: each team gets its own, and borrowing past it would only hold
        # quota its namespace ResourceQuota never lets its pods use.
        assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": gpus, "borrowingLimit": "0"}
    local = {
        (q.inputs["metadata"]["namespace"], q.inputs["metadata"]["name"], q.inputs["spec"]["clusterQueue"])
        for q in kueue(result, "LocalQueue")
    }
    # The name jobs put in kueue.x-k8s.io/queue-name (bundle.team_local_queue).
    assert local == {("research", "research-gpus", "research"), ("vision", "vision-gpus", "vision")}


def _gpu_quotas(result) -> dict[str, dict[str, tuple[int, int | None]]]:
    """flavor -> team -> (nominal GPU quota, borrowingLimit)."""
    out: dict[str, dict[str, tuple[int, int | None]]] = {}
    for q in kueue(result, "ClusterQueue"):
        for f in q.inputs["spec"]["resourceGroups"][0]["flavors"]:
            gpu = next(r for r in f["resources"] if r["name"] == "nvidia.com/gpu")
            limit = gpu.get("borrowingLimit")
            out.setdefault(f["name"], {})[q.inputs["metadata"]["name"]] = (
                int(gpu["nominalQuota"]),
                None if limit is None else int(limit),
            )
    return out


def test_a_flavors_nominal_quotas_never_add_up_past_its_gpus():
    """aws-h100-reserved: research 64 and eval 16 GPUs on a 32-GPU Capacity Block. Each team used to get
    min(quota, 32) on it (48 nominal): Kueue admitted both and the second job waited Pending there."""
    result = plan_object(platform_object("aws-h100-reserved"))
    quotas = _gpu_quotas(result)
    # 4 nodes x 8 GPUs, split 64:16 (25.6 : 6.4, the larger remainder gets the GPU left over).
    assert quotas["h100-capacity-block"] == {"research": (26, 6), "eval": (6, 10)}
    # The ODCR has 2 nodes: 16 GPUs, 12.8 : 3.2.
    assert quotas["h100-reservation"] == {"research": (13, 3), "eval": (3, 13)}
    for flavor, teams in quotas.items():
        capacity = {"h100-reservation": 16}.get(flavor, 32)
        assert sum(nominal for nominal, _ in teams.values()) <= capacity, flavor
        for team, (nominal, limit) in teams.items():
            # Share plus borrowing reaches the team's quota on the flavor, never more.
            assert nominal + limit == min({"research": 64, "eval": 16}[team], capacity)


def test_three_teams_split_a_flavor_by_largest_remainder_in_team_order():
    from contract.quota import gpu_shares

    teams = [(n, 16) for n in ("a", "b", "c")]
    # 32 x 16/48 = 10.67 each: floors 10, two GPUs left, equal remainders go to the first teams.
    assert gpu_shares(32, teams) == {"a": 11, "b": 11, "c": 10}
    assert gpu_shares(32, teams[::-1]) == {"c": 11, "b": 11, "a": 10}
    # Quotas that fit are kept, a zero quota gets nothing.
    assert gpu_shares(48, teams) == {"a": 16, "b": 16, "c": 16}
    assert gpu_shares(8, [("x", 0), *teams[:1]]) == {"x": 0, "a": 8}
    obj = platform_object("aws-h100-reserved")
    obj["teams"] = [{"name": n, "gpuQuota": 16} for n in ("a", "b", "c")]
    quotas = _gpu_quotas(plan_object(obj))
    assert quotas["h100-capacity-block"] == {"a": (11, 5), "b": (11, 5), "c": (10, 6)}
    assert quotas["h100-reservation"] == {"a": (6, 10), "b": (5, 11), "c": (5, 11)}


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
    # A GPU node from zero takes minutes to tens of minutes: at least Kueue's own 30m default
    # (apis/config/v1beta2/defaults.go), and a lost node's replacement comes from zero too.
    assert config["waitForPodsReady"]["timeout"] == "30m"
    assert config["waitForPodsReady"]["recoveryTimeout"] == "30m"
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


def test_pods_ready_timeouts_come_from_the_platform_spec():
    obj = platform_object("onprem-dev")
    obj["queueing"] = {"podsReady": {"timeoutMinutes": 45, "recoveryTimeoutMinutes": 60}}
    config = _manager_config(plan_object(obj))
    assert config["waitForPodsReady"]["timeout"] == "45m"
    assert config["waitForPodsReady"]["recoveryTimeout"] == "60m"


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
    # h200-spot has 64 GPUs (8 nodes), h200-od 16 (2 nodes), split llm 64 : eval 16 (contract/quota.py);
    # each share brings the EFA devices of the nodes its GPUs fill (2 per GPU).
    assert flavors["h200-spot"]["nvidia.com/gpu"] == "51" and flavors["h200-spot"][EFA] == "102"
    assert flavors["h200-on-demand"]["nvidia.com/gpu"] == "13" and flavors["h200-on-demand"][EFA] == "26"
    eval_ = {f["name"]: _resources(f) for f in queues["eval"]["resourceGroups"][0]["flavors"]}
    assert eval_["h200-spot"]["nvidia.com/gpu"] == "13" and eval_["h200-spot"][EFA] == "26"
    # Together exactly what the flavor has.
    assert int(flavors["h200-spot"][EFA]) + int(eval_["h200-spot"][EFA]) == 8 * 16


def test_extended_quota_follows_the_densest_pool_and_stops_at_what_the_flavor_has():
    from components.bundle import NodePoolInfo, gpu_taint
    from components.incluster.queueing import flavors

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


# ---- flavors per capacity kind, fallback order, Topology, ProvisioningRequest ------------------------


def test_flavors_follow_the_capacity_fallback_order_with_a_quota_each():
    """Kueue tries a ClusterQueue's flavors in order: reserved, on-demand, DWS, then spot. Each flavor's
    GPU quota is min(team quota, the flavor's GPUs at max scale); the namespace quota caps the total."""
    objects = _kueue_objects(capacity_pools())
    (cq,) = _of(objects, "ClusterQueue")
    (group,) = cq["spec"]["resourceGroups"]
    names = [f["name"] for f in group["flavors"]]
    assert names == [
        "h100-reservation",
        "h100-capacity-block",
        "h100-on-demand",
        "h100-flex-start",
        "h100-queued",
        "h100-spot",
    ]
    gpus = {
        f["name"]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "nvidia.com/gpu")
        for f in group["flavors"]
    }
    assert gpus == {
        "h100-reservation": "16",  # 4 nodes x 8 = 32 GPUs, the team's 16
        "h100-capacity-block": "16",
        "h100-on-demand": "16",
        "h100-flex-start": "16",
        "h100-queued": "16",
        "h100-spot": "16",
    }
    big = _of(_kueue_objects(capacity_pools(), team_quota=64), "ClusterQueue")[0]
    quota = {
        f["name"]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "nvidia.com/gpu")
        for f in big["spec"]["resourceGroups"][0]["flavors"]
    }
    assert quota["h100-on-demand"] == "16" and quota["h100-spot"] == "64"  # what the flavor has


def test_topology_only_on_flavors_kueue_can_place_by_topology():
    """TAS counts existing nodes only: an autoscaling pool without a ProvisioningRequest class (spot,
    0..8) gets no topologyName; a fixed reserved pool and a queued-provisioning pool do."""
    objects = _kueue_objects(capacity_pools())
    flavor = {o["metadata"]["name"]: o["spec"] for o in _of(objects, "ResourceFlavor")}
    (topology,) = _of(objects, "Topology")
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == list(GKE_LEVELS)
    name = topology["metadata"]["name"]
    assert flavor["h100-reservation"]["topologyName"] == name
    assert flavor["h100-queued"]["topologyName"] == name
    assert "topologyName" not in flavor["h100-spot"] and "topologyName" not in flavor["h100-on-demand"]


def test_queued_pools_get_the_provisioning_request_check_on_their_flavor_only():
    objects = _kueue_objects(capacity_pools())
    (config,) = _of(objects, "ProvisioningRequestConfig")
    assert config["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert config["spec"]["managedResources"] == ["nvidia.com/gpu"]
    # Once provisioned, Kueue pins the workload's pods to the nodes GKE made for its request (their label
    # autoscaling.gke.io/provisioning-request = the request's ResizeRequestName detail), so another
    # workload's pods cannot take them (kueue v0.19.2 admissionchecks/provisioning/controller.go).
    assert config["spec"]["podSetUpdates"] == {
        "nodeSelector": [
            {
                "key": "autoscaling.gke.io/provisioning-request",
                "valueFromProvisioningClassDetail": "ResizeRequestName",
            }
        ]
    }
    (check,) = _of(objects, "AdmissionCheck")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]
    (cq,) = _of(objects, "ClusterQueue")
    assert cq["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": check["metadata"]["name"], "onFlavors": ["h100-queued"]}]
    }
    # Without a queued pool: no check, no strategy.
    plain = _kueue_objects(capacity_pools()[:3])
    assert (
        not _of(plain, "AdmissionCheck")
        and "admissionChecksStrategy" not in _of(plain, "ClusterQueue")[0]["spec"]
    )


def test_existing_cluster_topology_levels_make_a_topology():
    result = plan("onprem-dev")
    (topology,) = kueue(result, "Topology")
    levels = topology.inputs["spec"]["levels"]
    assert [lv["nodeLabel"] for lv in levels] == ["lab.example.com/rack", "kubernetes.io/hostname"]
    assert _topology_cel(levels) == []
    (flavor,) = kueue(result, "ResourceFlavor")
    assert flavor.inputs["spec"]["topologyName"] == topology.inputs["metadata"]["name"]
    assert topology.urn in flavor.deps  # the flavor names it: created after it


def test_the_jobset_controller_is_pinned_and_kueue_runs_jobsets():
    result = plan("aws-dev")
    (release,) = [
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"].endswith("/jobset")
    ]
    assert release.inputs["chart"] == "oci://registry.k8s.io/jobset/charts/jobset"
    assert release.inputs["version"] == "0.12.0" and release.inputs["namespace"] == "jobset-system"
    # The chart's values.yaml names a staging image at tag `main`: pinned to the release's image.
    assert release.inputs["values"]["image"]["repository"] == "registry.k8s.io/jobset/jobset"
    assert release.inputs["values"]["image"]["tag"] == "v0.12.0"
    assert "jobset.x-k8s.io/jobset" in _manager_config(result)["integrations"]["frameworks"]
    # Kueue starts once the JobSet CRD is there.
    (kueue_release,) = [
        r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"].endswith("/kueue")
    ]
    assert release.urn in kueue_release.deps


def test_bad_topology_levels_are_one_line_errors():
    import pytest

    from components.spec import ConfigError, PlatformSpec

    def problems(levels, stack="onprem-dev"):
        obj = platform_object(stack)
        obj["nodePools"][-1]["topologyLevels"] = levels
        with pytest.raises(ConfigError) as e:
            PlatformSpec.load(obj)
        return e.value.problems

    assert problems(["kubernetes.io/hostname", "lab.example.com/rack"]) == [
        "platform.nodePools[0].topologyLevels: must end with kubernetes.io/hostname (the node); "
        "list the broadest level first"
    ]
    assert problems(["bad key!", "kubernetes.io/hostname"]) == [
        "platform.nodePools[0].topologyLevels[0]: 'bad key!' is not a node label key"
    ]
    # The clouds know their nodes' topology labels: the key is the existing cluster's.
    (line,) = [p for p in problems(["kubernetes.io/hostname"], "aws-dev") if "topologyLevels" in p]
    assert line.startswith("platform.nodePools[1].topologyLevels:")
