"""GKE node pools as GCP would receive them: accelerators, driver mode, taints, labels, placement."""

from __future__ import annotations

import pytest

from tests.helpers.gcp import NODE_POOL, SA, mutated, one, plan, plan_platform, pool
from tests.helpers.plans import upstream

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]


@pytest.mark.parametrize(
    ("stack", "name", "machine", "accelerator", "count", "ssds"),
    [
        ("gcp-dev", "h100", "a3-highgpu-8g", "nvidia-h100-80gb", 8, 16),
        ("gcp-h100-mega", "h100mega", "a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, 16),
        ("gcp-byo-network", "l4", "g2-standard-48", "nvidia-l4", 4, 4),
    ],
)
def test_gpu_pool_carries_the_catalog_accelerators_with_driver_installation_disabled(
    stack, name, machine, accelerator, count, ssds
):
    cfg = pool(plan(stack), name).inputs["nodeConfig"]
    assert cfg["machineType"] == machine
    assert cfg["guestAccelerators"] == [
        {
            "type": accelerator,
            "count": float(count),
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
        }
    ]
    assert cfg["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": float(ssds)}
    assert cfg["imageType"] == "COS_CONTAINERD"
    assert cfg["gvnic"] == {"enabled": True}


@pytest.mark.parametrize(
    ("stack", "name", "gpu", "capacity"),
    [
        ("gcp-dev", "h100", "H100", "spot"),
        ("gcp-h100-mega", "h100mega", "H100-MEGA", "spot"),
        ("gcp-byo-network", "l4", "L4", "on-demand"),
    ],
)
def test_gpu_pool_declares_gkes_taint_and_the_operator_labels(stack, name, gpu, capacity):
    cfg = pool(plan(stack), name).inputs["nodeConfig"]
    assert cfg["taints"] == GPU_TAINT
    assert cfg["labels"] == {
        "trainplane.dev/pool": name,
        "trainplane.dev/gpu": gpu,
        "trainplane.dev/capacity": capacity,
        "gke-no-default-nvidia-gpu-device-plugin": "true",
    }
    assert cfg["spot"] is (capacity == "spot")


def test_system_pool_has_no_accelerator_taint_or_device_plugin_label():
    cfg = pool(plan("gcp-dev"), "system").inputs["nodeConfig"]
    assert "guestAccelerators" not in cfg
    assert cfg.get("taints", []) == []
    assert "gke-no-default-nvidia-gpu-device-plugin" not in cfg["labels"]
    assert cfg["labels"] == {"trainplane.dev/pool": "system", "trainplane.dev/capacity": "on-demand"}
    assert cfg["spot"] is False
    assert cfg["machineType"] == "e2-standard-4"


@pytest.mark.parametrize("stack", ["gcp-dev", "gcp-h100-mega", "gcp-byo-network"])
def test_every_pool_hides_node_credentials_and_runs_as_the_node_service_account(stack):
    result = plan(stack)
    project = result.of_type(NODE_POOL)[0].inputs["project"]
    (node_sa,) = [r for r in result.of_type(SA) if r.inputs["accountId"].endswith("-nodes")]
    email = f"{node_sa.inputs['accountId']}@{project}.iam.gserviceaccount.com"
    for p in result.of_type(NODE_POOL):
        cfg = p.inputs["nodeConfig"]
        assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert cfg["shieldedInstanceConfig"]["enableIntegrityMonitoring"] is True
        assert cfg["serviceAccount"] == email
        assert cfg["metadata"] == {"disable-legacy-endpoints": "true"}


def test_autoscaling_uses_whole_pool_limits_down_to_zero():
    result = plan("gcp-dev")
    h100 = pool(result, "h100").inputs
    assert h100["autoscaling"] == {
        "totalMinNodeCount": 0.0,
        "totalMaxNodeCount": 4.0,
        "locationPolicy": "ANY",
    }
    assert h100["initialNodeCount"] == 0.0
    system = pool(result, "system").inputs
    assert system["autoscaling"] == {
        "totalMinNodeCount": 2.0,
        "totalMaxNodeCount": 4.0,
        "locationPolicy": "BALANCED",
    }
    # 2 nodes over 3 zones: one per zone at creation, then the autoscaler keeps the total within 2..4.
    assert system["initialNodeCount"] == 1.0


@pytest.mark.parametrize("stack", ["gcp-dev", "gcp-h100-mega", "gcp-byo-network"])
def test_node_counts_are_left_to_the_autoscaler(stack):
    for p in plan(stack).of_type(NODE_POOL):
        assert {"nodeCount", "initialNodeCount"} <= set(p.ignore_changes)


def test_compact_pool_sits_in_one_zone_with_a_compact_placement_policy():
    mega = pool(plan("gcp-h100-mega"), "h100mega").inputs
    assert mega["placementPolicy"] == {"type": "COMPACT"}
    assert mega["nodeLocations"] == ["us-central1-c"]


def test_spread_pool_uses_the_platform_zones_without_placement_policy():
    h100 = pool(plan("gcp-dev"), "h100").inputs
    assert "placementPolicy" not in h100
    assert h100["nodeLocations"] == ["us-central1-a", "us-central1-b", "us-central1-c"]


@pytest.mark.parametrize("stack", ["gcp-dev", "gcp-h100-mega", "gcp-byo-network"])
def test_pools_wait_for_the_cluster_but_never_for_each_other(stack):
    result = plan(stack)
    pools = result.of_type(NODE_POOL)
    cluster = one(result, "gcp:container/cluster:Cluster")
    for p in pools:
        waits = upstream(result, p)
        assert cluster.urn in waits
        assert not waits & {q.urn for q in pools}, f"{p.name} waits for another pool"


def test_pool_outputs_describe_nodes_as_kubernetes_sees_them():
    pools = {p["name"]: p for p in plan("gcp-dev").outputs["nodePools"]}
    h100 = pools["h100"]
    assert h100["gpusPerNode"] == 8
    assert h100["machineTypes"] == ["a3-highgpu-8g"]
    assert h100["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert h100["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-h100-80gb"
    assert h100["labels"]["cloud.google.com/gke-spot"] == "true"
    assert h100["labels"]["trainplane.dev/gpu"] == "H100"
    assert pools["system"]["taints"] == [] and pools["system"]["gpu"] is None


def test_hyperdisk_only_machines_get_a_hyperdisk_boot_disk():
    obj = mutated("gcp-dev")
    # An RDMA machine (GPUDirect RDMA) needs one zone: its RoCE network profile is per zone.
    obj["nodePools"][1] = {
        "name": "h200",
        "gpu": "H200",
        "gpusPerNode": 8,
        "capacity": "spot",
        "maxNodes": 2,
        "zones": ["us-central1-a"],
    }
    obj["teams"][0]["gpuQuota"] = 16
    cfg = pool(plan_platform(obj), "h200").inputs["nodeConfig"]
    assert cfg["machineType"] == "a3-ultragpu-8g"
    assert cfg["diskType"] == "hyperdisk-balanced"
    assert cfg["guestAccelerators"][0]["type"] == "nvidia-h200-141gb"


def _secure_boot(result) -> dict[str, bool]:
    return {
        p.inputs["name"]: p.inputs["nodeConfig"]["shieldedInstanceConfig"]["enableSecureBoot"]
        for p in result.of_type(NODE_POOL)
    }


def test_secure_boot_stays_where_managed_lustre_can_mount():
    """Managed Lustre CSI mounts on Secure Boot nodes only of GPU machine types (Managed Lustre docs)."""
    # Lustre platform: the GPU pool keeps Secure Boot, the CPU pool that team pods use drops it.
    assert _secure_boot(plan("gcp-h100-mega")) == {"system": False, "h100mega": True}
    # No Lustre: Secure Boot everywhere.
    assert set(_secure_boot(plan("gcp-dev")).values()) == {True}
    assert set(_secure_boot(plan("gcp-byo-network")).values()) == {True}


def test_a_tainted_cpu_pool_keeps_secure_boot_with_lustre():
    obj = mutated("gcp-h100-mega")
    obj["nodePools"].append(
        {
            "name": "infra",
            "machineType": "n2-standard-8",
            "maxNodes": 2,
            "taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}],
        }
    )
    assert _secure_boot(plan_platform(obj)) == {"system": False, "h100mega": True, "infra": True}
