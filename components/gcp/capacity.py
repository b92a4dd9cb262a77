"""How a GKE node pool gets its machines, per `capacity` (pure: no pulumi_gcp; node_pool.py merges these
pieces into the NodePool it registers, beside the GPU fabric's own).

- on-demand: nothing to add (GKE's default reservation affinity, any open reservation, is kept as it was).
- spot: `spot: true`; the autoscaler takes any zone with capacity (location policy ANY).
- reservation: SPECIFIC_RESERVATION affinity on the reservation's full name, with the key
  `compute.googleapis.com/reservation-name` and the value
  `projects/<project>/reservations/<name>[/reservationBlocks/<block>]` (pulumi_gcp 10.2
  NodePoolNodeConfigReservationAffinity; cluster-toolkit modules/compute/gke-node-pool
  reservation_definitions.tf builds the same value); location policy ANY, which "prioritizes
  utilization of unused reservations" (pulumi_gcp NodePoolAutoscaling.location_policy).
- flex-start: `flex_start: true` with `max_run_duration` (the node is deleted after it, 7 days at most),
  no reservation (NO_RESERVATION), no auto repair, autoscaling from 0 with location policy ANY (GKE
  "Run a small batch workload with flex-start": --flex-start --max-run-duration --reservation-affinity=none
  --no-enable-autorepair --location-policy=ANY --num-nodes=0; cluster-toolkit gke-node-pool
  preconditions: flex-start needs auto_repair false and NO_RESERVATION, and never spot).
- queued: flex-start with queued provisioning, `queued_provisioning.enabled` on top of the flex-start
  settings (GKE "Run a large-scale workload with flex-start with queued provisioning": --flex-start
  --enable-queued-provisioning ...). Nodes come only through a ProvisioningRequest of class
  `queued-provisioning.gke.io`, which Kueue's ProvisioningRequest admission check creates for a
  workload; its maximum run time travels as the workload annotation
  `provreq.kueue.x-k8s.io/maxRunDurationSeconds` (GKE docs, Kueue example Job). GKE taints the nodes
  `cloud.google.com/gke-queued=true:NoSchedule` itself; the pool declares the taint in its NodePoolInfo
  so jobs and the GPU operator's DaemonSets tolerate it, and labels its nodes `cloud.google.com/gke-queued`
  as cluster-toolkit does (nodeSelectors need the label; GKE applies only the taint).

Flex-start nodes carry `cloud.google.com/gke-flex-start=true` (kubernetes/autoscaler
cloudprovider/gce gke labels `FlexStartLabel`; GKE's flex-start examples select on it).

Example:
    >>> from components.spec import NodePoolSpec
    >>> pool = NodePoolSpec(name="h100-q", gpu="H100", gpusPerNode=8, capacity="queued", maxRunHours=24)
    >>> capacity_info(pool)["workload_annotations"]
    {'provreq.kueue.x-k8s.io/maxRunDurationSeconds': '86400'}
"""

from __future__ import annotations

from typing import Any

from components.bundle import TaintInfo
from components.spec import NodePoolSpec
from components.spec.capacity import DWS

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"
QUEUED_LABEL = "cloud.google.com/gke-queued"
QUEUED_TAINT = TaintInfo(key=QUEUED_LABEL, value="true", effect="NoSchedule")
SPOT_LABEL = "cloud.google.com/gke-spot"
# Kueue ProvisioningRequestConfig.provisioningClassName for GKE queued provisioning.
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
# Kueue copies `provreq.kueue.x-k8s.io/<param>` workload annotations into the ProvisioningRequest's
# parameters (Kueue provisioning admission check docs).
MAX_RUN_ANNOTATION = "provreq.kueue.x-k8s.io/maxRunDurationSeconds"
# GKE's ceiling and default for flex-start and queued provisioning: 7 days.
MAX_RUN_HOURS = 168


def max_run_seconds(pool: NodePoolSpec) -> int:
    return (pool.max_run_hours or MAX_RUN_HOURS) * 3600


def reservation_value(project: str | None, reservation: str) -> str:
    """The full name GKE matches a specific reservation by.

    >>> reservation_value("ml-prod", "h100-res/reservationBlocks/block-1")
    'projects/ml-prod/reservations/h100-res/reservationBlocks/block-1'
    >>> reservation_value("ml-prod", "projects/shared-host/reservations/h100-res")
    'projects/shared-host/reservations/h100-res'
    """
    if reservation.startswith("projects/"):
        return reservation
    return f"projects/{project}/reservations/{reservation}"


def capacity_node_config(pool: NodePoolSpec, project: str | None) -> dict[str, Any]:
    """node_config entries (pulumi_gcp 10.2 NodePoolNodeConfig) for the pool's capacity."""
    config: dict[str, Any] = {"spot": pool.capacity == "spot"}
    if pool.capacity == "reservation":
        assert pool.reservation, "the spec requires a reservation"
        config["reservation_affinity"] = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [reservation_value(project, pool.reservation)],
        }
    elif pool.capacity in DWS:
        config["flex_start"] = True
        config["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
        if pool.capacity == "flex-start":
            config["max_run_duration"] = f"{max_run_seconds(pool)}s"
    return config


def location_policy(pool: NodePoolSpec) -> str:
    """Spot, reservations and DWS: any zone that has the capacity; on-demand: keep zones even."""
    return "BALANCED" if pool.capacity == "on-demand" else "ANY"


def auto_repair(pool: NodePoolSpec) -> bool:
    """GKE refuses auto repair on flex-start and queued pools."""
    return pool.capacity not in DWS


def capacity_pool_args(pool: NodePoolSpec) -> dict[str, Any]:
    """NodePool arguments besides node_config: queued provisioning."""
    return {"queued_provisioning": {"enabled": True}} if pool.capacity == "queued" else {}


def capacity_node_labels(pool: NodePoolSpec) -> dict[str, str]:
    """Labels the node pool sets on its nodes for its capacity (GKE adds the flex-start/spot ones itself)."""
    return {QUEUED_LABEL: "true"} if pool.capacity == "queued" else {}


def capacity_info(pool: NodePoolSpec) -> dict[str, Any]:
    """What workloads must know about the pool's capacity (NodePoolInfo fields): the labels its nodes
    carry, the taints GKE puts on them, the Kueue provisioning class and the workload annotations."""
    labels: dict[str, str] = {}
    if pool.capacity == "spot":
        labels[SPOT_LABEL] = "true"
    if pool.capacity in DWS:
        labels[FLEX_START_LABEL] = "true"
    labels.update(capacity_node_labels(pool))
    queued = pool.capacity == "queued"
    return {
        "labels": labels,
        "taints": (QUEUED_TAINT,) if queued else (),
        "provisioning_class": QUEUED_PROVISIONING_CLASS if queued else None,
        "workload_annotations": {MAX_RUN_ANNOTATION: str(max_run_seconds(pool))} if queued else {},
        "reservation": pool.reservation,
    }
