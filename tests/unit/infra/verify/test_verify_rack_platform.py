"""verify rack-platform: the aws-gb200 plan passes; each planted defect is caught by its rule's name."""

from __future__ import annotations

import copy
from functools import cache

import pytest
import yaml

from infra.verify import plan_from_stack, verify
from infra.verify.checks.rack_platform import rack_findings

pytestmark = pytest.mark.plans


@cache
def _plan():
    return plan_from_stack("aws-gb200")


def _parts():
    plan = _plan()
    pools = list(plan.node_pools)
    dra = copy.deepcopy(dict(plan.releases("dra-driver-nvidia-gpu")[0].values))
    kueue = plan.releases("kueue")[0].values
    config = yaml.safe_load(kueue["managerConfig"]["controllerManagerConfigYaml"])
    queues = {o.name: copy.deepcopy(dict(o.spec)) for o in plan.objects("ClusterQueue")}
    flavors = {o.name: dict(o.spec.get("nodeLabels") or {}) for o in plan.objects("ResourceFlavor")}
    return pools, plan.kubernetes_version, dra, config, queues, flavors


def test_rack_platform_passes_the_reference_stack() -> None:
    (res,) = [c for c in verify(_plan(), ("rack-platform",)).checks if c.name == "rack-platform"]
    assert res.status == "pass", res.failures
    pool = next(p for p in _plan().node_pools if p.rack)
    assert (pool.rack.gpus, pool.rack.nodes) == (72, 18)
    assert pool.topology_levels[-2:] == ("nvidia.com/gpu.clique", "kubernetes.io/hostname")


def test_whole_rack() -> None:
    pools, version, dra, config, queues, flavors = _parts()
    pools = [p.model_copy(update={"max_nodes": 10}) if p.rack else p for p in pools]
    assert any(
        f.startswith("whole-rack:") for f in rack_findings(pools, version, dra, config, queues, flavors)
    )


def test_dra_kubernetes_too_old() -> None:
    pools, _, dra, config, queues, flavors = _parts()
    assert any(
        f.startswith("dra-kubernetes:") for f in rack_findings(pools, "1.33", dra, config, queues, flavors)
    )


def test_never_admitted_without_device_class_mapping() -> None:
    pools, version, dra, config, queues, flavors = _parts()
    config.pop("resources")
    found = list(rack_findings(pools, version, dra, config, queues, flavors))
    assert any(f.startswith("never-admitted:") and "kueue#10504" in f for f in found)


def test_channel_quota_missing() -> None:
    pools, version, dra, config, queues, flavors = _parts()
    for spec in queues.values():
        for group in spec["resourceGroups"]:
            group["coveredResources"].remove("compute-domain.nvidia.com/channel")
    assert any(
        f.startswith("channel-quota:") for f in rack_findings(pools, version, dra, config, queues, flavors)
    )


def test_dra_driver_missing_or_not_on_rack_nodes() -> None:
    pools, version, dra, config, queues, flavors = _parts()
    assert any(
        f.startswith("dra-driver: no") for f in rack_findings(pools, version, None, config, queues, flavors)
    )
    terms = dra["kubeletPlugin"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["system"]
    found = list(rack_findings(pools, version, dra, config, queues, flavors))
    assert any(f.startswith("dra-driver: the kubelet plugin") for f in found)


def test_fleet_worker_without_driver_and_manager_without_mapping() -> None:
    from infra.verify.checks.rack_platform import fleet_findings

    pools = list(_plan().node_pools)
    found = list(fleet_findings("mgr", {}, [("w1", pools, False)]))
    assert any(f.startswith("fleet-dra-driver: worker w1") for f in found)
    assert any(f.startswith("fleet-never-admitted: manager mgr") for f in found)
    _, _, _, config, _, _ = _parts()
    assert list(fleet_findings("mgr", config, [("w1", pools, True)])) == []


@cache
def _gke_plan():
    return plan_from_stack("gcp-gb200")


def _gke_parts():
    plan = _gke_plan()
    kueue = plan.releases("kueue")[0].values
    config = yaml.safe_load(kueue["managerConfig"]["controllerManagerConfigYaml"])
    queues = {o.name: copy.deepcopy(dict(o.spec)) for o in plan.objects("ClusterQueue")}
    flavors = {o.name: dict(o.spec.get("nodeLabels") or {}) for o in plan.objects("ResourceFlavor")}
    dra = dict(plan.releases("dra-driver-nvidia-gpu")[0].values)
    return list(plan.node_pools), plan.kubernetes_version, dra, config, queues, flavors


def test_gke_rack_platform_maps_and_queues_dranets_rdma_nics() -> None:
    (res,) = [c for c in verify(_gke_plan(), ("rack-platform",)).checks if c.name == "rack-platform"]
    assert res.status == "pass", res.failures
    pools, _, _, config, queues, _ = _gke_parts()
    rack = next(p.rack for p in pools if p.rack)
    assert (rack.nic_device_class, rack.nics_per_node) == ("mrdma.google.com", 4)
    assert {"name": rack.nic_kueue_resource, "deviceClassNames": ["mrdma.google.com"]} in config["resources"][
        "deviceClassMappings"
    ]
    (queue,) = queues.values()
    quota = {r["name"]: r["nominalQuota"] for r in queue["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota[rack.nic_kueue_resource] == "72"  # 4 NICs x 18 nodes, as the team's 72 GPUs


def test_never_admitted_without_the_dranet_class_mapping() -> None:
    pools, version, dra, config, queues, flavors = _gke_parts()
    config["resources"]["deviceClassMappings"] = [
        m
        for m in config["resources"]["deviceClassMappings"]
        if "mrdma.google.com" not in m["deviceClassNames"]
    ]
    found = list(rack_findings(pools, version, dra, config, queues, flavors))
    assert found == [
        "never-admitted: Kueue's deviceClassMappings lacks mrdma.google.com, the RDMA NIC class of rack pool "
        "gb200: every job on it claims its NICs and would never be admitted (kueue#10504)"
    ]


def test_rdma_quota_missing() -> None:
    pools, version, dra, config, queues, flavors = _gke_parts()
    for spec in queues.values():
        for group in spec["resourceGroups"]:
            group["coveredResources"].remove("trainplane.dev/rdma-nic")
    found = list(rack_findings(pools, version, dra, config, queues, flavors))
    assert found and all(f.startswith("rdma-quota: ClusterQueue") for f in found)
