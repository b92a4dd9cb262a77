"""The A4X pool of stacks/Pulumi.gcp-gb200.yaml as GCP would receive it: the specific reservation, the 1x72
workload policy its placement names, GKE managed DRANET, Hyperdisk, and the rack it exports."""

from __future__ import annotations

import pytest

from contract.rack import CLIQUE_LABEL
from tests.helpers.gcp import one, plan, pool

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"


def test_a4x_pool_is_bound_to_its_reservation_with_the_1x72_workload_policy():
    result = plan("gcp-gb200")
    policy = one(result, POLICY, next(r.name for r in result.of_type(POLICY)))
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}
    assert policy.inputs["region"] == "us-central1"
    node_pool = pool(result, "gb200").inputs
    assert node_pool["placementPolicy"] == {"type": "COMPACT", "policyName": policy.inputs["name"]}
    cfg = node_pool["nodeConfig"]
    assert cfg["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/example-ml-prod/reservations/gb200-rack-1"],
    }
    assert cfg["machineType"] == "a4x-highgpu-4g"
    assert cfg["guestAccelerators"][0]["type"] == "nvidia-gb200"
    assert cfg["guestAccelerators"][0]["count"] == 4
    assert cfg["diskType"] == "hyperdisk-balanced"


def test_a4x_pool_uses_gke_managed_dranet_and_no_extra_vpcs():
    result = plan("gcp-gb200")
    node_pool = pool(result, "gb200").inputs
    assert node_pool["networkConfig"] == {"acceleratorNetworkProfile": "auto"}
    assert node_pool["nodeConfig"]["labels"]["cloud.google.com/gke-networking-dra-driver"] == "true"
    assert not result.of_type("gcp:compute/network:Network")[1:]  # only the platform's own VPC


def test_only_the_rack_pool_gets_a_workload_policy():
    assert len(plan("gcp-gb200").of_type(POLICY)) == 1
    assert not plan("gcp-h100-mega").of_type(POLICY)


def test_a4x_pool_exports_its_rack_clique_level_and_arm_taint():
    out = next(p for p in plan("gcp-gb200").outputs["nodePools"] if p["name"] == "gb200")
    assert out["rack"]["gpus"] == 72 and out["rack"]["nodes"] == 18
    assert out["rack"]["cliqueLabel"] == CLIQUE_LABEL
    assert out["topologyLevels"] == [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        CLIQUE_LABEL,
        "kubernetes.io/hostname",
    ]
    assert {"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"} in out["taints"]
    system = next(p for p in plan("gcp-gb200").outputs["nodePools"] if p["name"] == "system")
    assert system["rack"] is None


def test_the_dra_driver_runs_on_the_a4x_nodes_tolerating_gkes_arm_taint():
    result = plan("gcp-gb200")
    (release,) = [r for r in result.of_type("kubernetes:helm.sh/v3:Release") if "dra-driver" in r.name]
    values = release.inputs["values"]
    assert values["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    (term,) = values["kubeletPlugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert {"key": "trainplane.dev/pool", "operator": "In", "values": ["gb200"]} in term["matchExpressions"]
    tolerated = {t["key"] for t in values["kubeletPlugin"]["tolerations"] if t["operator"] == "Exists"}
    assert "kubernetes.io/arch" in tolerated
