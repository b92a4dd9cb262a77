"""How an EKS managed node group gets its instances, per `capacity` (pure: no pulumi_aws, so `trainplane
verify --cloud` and the rules share it with the node groups).

- on-demand, spot: the node group's capacity type, nothing in the launch template.
- reservation: an existing On-Demand Capacity Reservation, targeted from the launch template with
  preference `capacity-reservations-only`, so the pool launches into the reservation and nowhere else
  (EC2 API reference, LaunchTemplateCapacityReservationSpecificationRequest: "The instance will only run
  in a Capacity Reservation ... If capacity isn't available, the instance will fail to launch"); on-demand
  overflow is the on-demand pool's job, which keeps cost and Kueue flavors honest.
- capacity-block: an existing Capacity Block for ML: node group capacity type CAPACITY_BLOCK, launch
  template market type `capacity-block`, the block's id as the reservation target and the instance type,
  and NO instance types on the node group (EKS user guide, "Create a managed node group with Capacity
  Blocks for ML": LaunchTemplateData includes InstanceType, and the node group is created without
  InstanceTypes; terraform-aws-modules/terraform-aws-eks@v21.19.0
  modules/eks-managed-node-group/main.tf does the same for CAPACITY_BLOCK: `instance_type` on the
  template, `instance_types = null` on the group). The preference is left out as in the guide. The
  pool has minNodes 0 and the cluster autoscaler scales it up while the block is active; EC2 starts
  terminating what still runs 30 minutes before the block ends (docs/aws.md "Capacity").

Reserved pools run in the one zone of their reservation and get no placement group of trainplane's:
Capacity Blocks are already placed close together ("there is no need to use a cluster placement group
with a Capacity Block", EC2 user guide, "Work with Capacity Blocks"), and an ODCR made in a cluster
placement group would only match instances launched into that very group.

Nodes of instance types with an EC2 instance topology carry its network layers as labels, set by the
EKS cloud controller manager at registration whatever created the node (kubernetes/cloud-provider-aws
pkg/providers/v1/instances_v2.go getAdditionalLabels, from DescribeInstanceTopology; EKS user guide,
"Place distributed AI/ML workloads with network topology labels"): `topology_levels` lists them for the
in-cluster layer's Kueue Topology.

Example:
    >>> topology_levels(["p5.48xlarge"])
    ('topology.k8s.aws/network-node-layer-1', 'topology.k8s.aws/network-node-layer-2', 'topology.k8s.aws/network-node-layer-3', 'kubernetes.io/hostname')
    >>> topology_levels(["m6i.xlarge"])
    ()
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from components.spec import ConfigError, NodePoolSpec
from components.spec.capacity import RESERVED

# The node group's capacityType per capacity kind (EKS API reference, CreateNodegroup capacityType:
# ON_DEMAND | SPOT | CAPACITY_BLOCK). An ODCR's instances are on-demand instances.
CAPACITY_TYPES = {
    "on-demand": "ON_DEMAND",
    "spot": "SPOT",
    "reservation": "ON_DEMAND",
    "capacity-block": "CAPACITY_BLOCK",
}
# pulumi_aws 7.51 LaunchTemplateInstanceMarketOptions.market_type: spot | capacity-block | ...
CAPACITY_BLOCK_MARKET = "capacity-block"
# pulumi_aws 7.51 LaunchTemplateCapacityReservationSpecificationArgs.capacity_reservation_preference:
# "If capacity_reservation_id ... is specified in capacity_reservation_target, either omit
# capacity_reservation_preference or set it to capacity-reservations-only".
RESERVATIONS_ONLY = "capacity-reservations-only"

HOSTNAME_LABEL = "kubernetes.io/hostname"
NETWORK_LAYER_LABEL = "topology.k8s.aws/network-node-layer-"
# Instance families DescribeInstanceTopology answers for, by the number of network layers it returns
# (EC2 user guide, "Prerequisites for Amazon EC2 topology", Instance types).
TOPOLOGY_LAYERS = {
    **dict.fromkeys(
        (
            "g6e",
            "g7e",
            "hpc6a",
            "hpc6id",
            "hpc7g",
            "hpc7a",
            "hpc8a",
            "p3dn",
            "p4d",
            "p4de",
            "p5",
            "p5e",
            "p5en",
            "p6e-gb200",
            "trn1",
            "trn1n",
            "trn2",
            "trn2u",
        ),
        3,
    ),
    "p6-b200": 4,
    "p6-b300": 4,
}


def capacity_type(pool: NodePoolSpec) -> str:
    return CAPACITY_TYPES[pool.capacity]


def reserved(pool: NodePoolSpec) -> bool:
    """Whether the pool draws from a reservation the stack names (ODCR or Capacity Block)."""
    return pool.capacity in RESERVED


def single_zone(pool: NodePoolSpec) -> bool:
    """One subnet: EFA and compact pools (one placement group) and reserved pools (a zonal reservation)."""
    return bool(pool.efa) or pool.placement == "compact" or reserved(pool)


def placement_group(pool: NodePoolSpec) -> bool:
    """A cluster placement group of trainplane's: EFA and compact pools, unless a reservation places them."""
    return (bool(pool.efa) or pool.placement == "compact") and not reserved(pool)


def launch_template_capacity(pool: NodePoolSpec) -> dict[str, Any]:
    """LaunchTemplate arguments (pulumi_aws 7.51 input names) that point the pool's launches at its
    reservation; empty for on-demand and spot pools."""
    if not reserved(pool):
        return {}
    target = {"capacity_reservation_target": {"capacity_reservation_id": pool.reservation}}
    if pool.capacity == "capacity-block":
        return {
            "capacity_reservation_specification": target,
            "instance_market_options": {"market_type": CAPACITY_BLOCK_MARKET},
        }
    return {
        "capacity_reservation_specification": {"capacity_reservation_preference": RESERVATIONS_ONLY, **target}
    }


def template_instance_type(pool: NodePoolSpec, instance_types: Sequence[str]) -> str | None:
    """The launch template's InstanceType: only a Capacity Block pool names it there (module doc); every
    other pool leaves it to the node group, which may then list several (spot)."""
    if pool.capacity != "capacity-block":
        return None
    assert len(instance_types) == 1, f"capacity-block pool {pool.name} has one instance type"
    return instance_types[0]


def node_group_instance_types(pool: NodePoolSpec, instance_types: Sequence[str]) -> list[str] | None:
    """The node group's instanceTypes: none for a Capacity Block pool (the template names it)."""
    return None if pool.capacity == "capacity-block" else list(instance_types)


def topology_levels(instance_types: Iterable[str]) -> tuple[str, ...]:
    """Node labels of the network layers every instance type of a pool carries, broadest first, ending
    with the hostname; empty when some type has no EC2 instance topology."""
    layers = [TOPOLOGY_LAYERS.get(t.split(".", 1)[0], 0) for t in instance_types]
    depth = min(layers, default=0)
    if not depth:
        return ()
    return (*(f"{NETWORK_LAYER_LABEL}{i}" for i in range(1, depth + 1)), HOSTNAME_LABEL)


def pools_zone(pools: Iterable[NodePoolSpec], zone_names: Sequence[str | None]) -> str | None:
    """The one zone every GPU pool's nodes run in, or None when they span several (or the zones are
    unknown: a brought VPC). Zones as `Network.subnets_for` picks them: a pool's own zones (else all of
    the network's), the first of them in the network's order for a single-zone pool.

    >>> from components.spec import NodePoolSpec
    >>> pool = NodePoolSpec(name="g", gpu="H100", gpusPerNode=8, efa=True, zones=["us-east-1b"])
    >>> pools_zone([pool], ["us-east-1a", "us-east-1b"])
    'us-east-1b'
    """
    names = [z for z in zone_names if z]
    zones: set[str] = set()
    for pool in pools:
        if not pool.is_gpu:
            continue
        mine = [z for z in names if z in pool.zones] if pool.zones else names
        zones |= set(mine[:1] if single_zone(pool) else mine)
    return next(iter(zones)) if len(zones) == 1 else None


def vpc_zones(available: Sequence[str], count: int, wanted: Iterable[str]) -> list[str]:
    """The zones a VPC trainplane makes spans: the region's first `count`, plus each zone a pool names
    (a reservation's zone need not be among the first), in the region's order.

    >>> vpc_zones(["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"], 2, ["us-east-1d"])
    ['us-east-1a', 'us-east-1b', 'us-east-1d']
    """
    wanted = set(wanted)
    unknown = sorted(wanted - set(available))
    if unknown:
        # Only the region's zone list (read at deploy time) can tell: a config error all the same.
        raise ConfigError(
            [
                f"platform.nodePools[].zones: {', '.join(unknown)} not available in the region "
                f"(available: {', '.join(available)})"
            ]
        )
    first = set(available[:count])
    return [z for z in available if z in first or z in wanted]
