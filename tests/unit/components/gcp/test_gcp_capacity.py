"""GKE node pools per capacity kind (issue 13 point 2) on the reference stack gcp-h100-dws (a specific
reservation, flex-start and queued provisioning), and what the pools hand to the in-cluster layer."""

from __future__ import annotations

import pytest

from components.gcp.capacity import capacity_node_config, location_policy
from components.spec import NodePoolSpec
from tests.helpers.plans import planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NP = "gcp:container/nodePool:NodePool"
STACK = "gcp-h100-dws"
QUEUED_TAINT = {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def result():
    return planned(STACK)


def _np(result, name):
    return next(r.inputs for r in result.of_type(NP) if r.inputs["name"] == name)


# (pool, reservation affinity, flexStart, maxRunDuration, queued provisioning, auto repair, location policy)
TABLE = [
    (
        "h100-res",
        {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["projects/example-ml-prod/reservations/h100-reservation"],
        },
        None,
        None,
        None,
        True,
        "ANY",
    ),
    ("h100-flex", {"consumeReservationType": "NO_RESERVATION"}, True, "86400s", None, False, "ANY"),
    (
        "h100-queued",
        {"consumeReservationType": "NO_RESERVATION"},
        True,
        None,
        {"enabled": True},
        False,
        "ANY",
    ),
]


@pytest.mark.parametrize(("pool", "affinity", "flex", "run", "queued", "repair", "policy"), TABLE)
def test_each_capacity_kind_reaches_gke_as_documented(
    result, pool, affinity, flex, run, queued, repair, policy
):
    np = _np(result, pool)
    cfg = np["nodeConfig"]
    assert cfg.get("reservationAffinity") == affinity
    assert cfg.get("flexStart") == flex
    assert cfg.get("maxRunDuration") == run
    assert not cfg.get("spot")
    assert np.get("queuedProvisioning") == queued
    assert np["management"]["autoRepair"] is repair
    assert np["autoscaling"]["locationPolicy"] == policy
    assert np["autoscaling"]["totalMinNodeCount"] == 0
    assert not np.get("placementPolicy")


def test_reservation_pool_lives_in_the_reservations_zone(result):
    assert _np(result, "h100-res")["nodeLocations"] == ["us-central1-a"]


@pytest.mark.parametrize(
    ("capacity", "config", "policy"),
    [("on-demand", {"spot": False}, "BALANCED"), ("spot", {"spot": True}, "ANY")],
)
def test_on_demand_and_spot_keep_their_settings(capacity, config, policy):
    pool = NodePoolSpec(name="p", gpu="H100", gpusPerNode=8, capacity=capacity)
    assert capacity_node_config(pool, "proj") == config
    assert location_policy(pool) == policy


def test_pools_hand_capacity_facts_to_the_in_cluster_layer(result):
    pools = {p["name"]: p for p in result.outputs["nodePools"]}
    res, flex, queued = pools["h100-res"], pools["h100-flex"], pools["h100-queued"]
    assert (res["capacity"], res["reservation"]) == ("reservation", "h100-reservation")
    assert res["provisioningClass"] is None and res["workloadAnnotations"] == {}
    assert flex["labels"]["cloud.google.com/gke-flex-start"] == "true"
    assert flex["provisioningClass"] is None and QUEUED_TAINT not in flex["taints"]
    # Queued pools: nodes only through a ProvisioningRequest of GKE's class; the job tolerates GKE's taint
    # and carries the maximum run time (72 h) as the annotation Kueue copies into the request.
    assert queued["provisioningClass"] == "queued-provisioning.gke.io"
    assert queued["workloadAnnotations"] == {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "259200"}
    assert QUEUED_TAINT in queued["taints"]
    assert queued["labels"]["cloud.google.com/gke-queued"] == "true"
    assert _np(result, "h100-queued")["nodeConfig"]["labels"]["cloud.google.com/gke-queued"] == "true"
    # GKE puts the taint on the nodes itself: only the NodePoolInfo declares it, for tolerations.
    taints = _np(result, "h100-queued")["nodeConfig"].get("taints") or []
    assert all(t["key"] != "cloud.google.com/gke-queued" for t in taints)
