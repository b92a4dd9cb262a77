"""What AWS accepts in a platform stack: its own keys, FSx/EFS sizing, VPC and endpoint rules, EFA.

Pure rules over the spec models and the catalog (no pulumi_aws), used by the AWS backend's checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from components.aws.autoscaler_images import IMAGE_TAGS, image_problem
from components.aws.capacity_blocks import CAPACITY_BLOCK_TYPES
from components.aws.regions import aws_zone_problems
from components.aws.ultraserver import check_rack_pool, rack_shape
from components.catalog import catalog
from components.regions import region_problems
from components.spec.base import Spec
from components.spec.capacity import RESERVED, CapacityKinds, check_capacity, zone_count_problem
from components.spec.platform import (
    ClusterSpec,
    NetworkSpec,
    NodePoolSpec,
    PlatformSpec,
    StorageSpec,
)
from components.spec.rules import check_catalog_pool, compact_zone_problem, region_required

# FSx for Lustre PERSISTENT_2 accepts 1200 GiB or a multiple of 2400 GiB (FSx API reference,
# CreateFileSystem StorageCapacity), at 125, 250, 500 or 1000 MB/s per TiB.
FSX_LUSTRE_SMALLEST_GIB = 1200
FSX_LUSTRE_STEP_GIB = 2400
FSX_THROUGHPUTS = (125, 250, 500, 1000)
# An EC2 Capacity Reservation id (On-Demand Capacity Reservations and Capacity Blocks alike): "cr-" and
# 17 hex digits (EC2 API reference, CapacityReservation.CapacityReservationId; EKS user guide, "Create a
# managed node group with Capacity Blocks for ML": cr-02168da1478b509e0).
RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")

# The keys of the cloud-neutral models that AWS understands among those only some clouds do.
KEYS: dict[type[Spec], frozenset[str]] = {
    ClusterSpec: frozenset(
        {"endpointAccess", "privateAccessCidrs", "adminPrincipals", "logTypes", "authorizedNetworks"}
    ),
    NetworkSpec: frozenset({"zones", "vpcId", "subnetIds", "cidr"}),
    NodePoolSpec: frozenset(
        {"instanceType", "efa", "zones", "placement", "diskSizeGiB", "capacity", "reservation"}
    ),
    StorageSpec: frozenset({"importPath", "exportPath"}),
}
TWINS = {"machineType": "instanceType"}
# The capacity kinds of an AWS pool, and how AWS explains them to other clouds' stacks (and its own
# answer to theirs): Capacity Blocks for ML are reservations with dates (EC2 user guide, "Capacity
# Blocks for ML"), whose instances exist only inside them.
CAPACITY = CapacityKinds(
    offered=("on-demand", "spot", "reservation", "capacity-block"),
    about={"capacity-block": "AWS Capacity Blocks for ML"},
    instead={"flex-start": "capacity-block or reservation", "queued": "capacity-block or reservation"},
    from_zero={"capacity-block": "the block's instances exist only between its start and end"},
    only_for={"capacity-block": CAPACITY_BLOCK_TYPES},
)


def check(spec: PlatformSpec, root: str) -> Iterable[str]:
    yield from region_required(spec, root, "aws")
    if spec.cluster.kubernetes_version not in IMAGE_TAGS:
        yield f"{root}.cluster.{image_problem(spec.cluster.kubernetes_version)}"
    yield from region_problems("aws", spec.region, f"{root}.region")
    net = spec.network
    if net.vpc_id and not net.subnet_ids:
        yield f"{root}.network.subnetIds: required with vpcId (the private subnets nodes run in)"
    if net.subnet_ids and not net.vpc_id:
        yield f"{root}.network.vpcId: required with subnetIds"
    for i, s in enumerate(net.subnet_ids):
        if not re.match(r"^subnet-[0-9a-f]{8,17}$", s):
            yield f"{root}.network.subnetIds[{i}]: {s!r} is not a subnet id (subnet-...)"
    yield from _check_endpoint(spec, root)


def _check_endpoint(spec: PlatformSpec, root: str) -> Iterable[str]:
    """A private endpoint admits only the cluster security group, unless privateAccessCidrs opens it."""
    access = spec.cluster.endpoint_access or "both"
    cidrs = spec.cluster.private_access_cidrs
    if cidrs and access == "public":
        yield (
            f"{root}.cluster.privateAccessCidrs: only with endpointAccess private or both (they open the "
            "private endpoint); use authorizedNetworks for the public one"
        )
    if access == "private" and not cidrs:
        yield (
            f"{root}.cluster.privateAccessCidrs: required with endpointAccess private: pulumi up and kubectl "
            "reach the API only from the CIDRs listed here (VPN, CI runners, a peered VPC)"
        )
    for dup in sorted({str(c) for c in cidrs if cidrs.count(c) > 1}):
        yield f"{root}.cluster.privateAccessCidrs: {dup} is listed more than once"


def check_pool(spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
    byo_vpc = spec.network.vpc_id is not None
    if byo_vpc and pool.zones:
        yield (
            f"{path}.zones: with network.vpcId pools run in network.subnetIds; "
            "EFA and compact pools take the first of them"
        )
    yield from aws_zone_problems(spec.region, pool.zones, f"{path}.zones")
    if pool.placement == "compact" and not byo_vpc:
        yield from compact_zone_problem(path, pool.zones)
    problems, shape_known = check_catalog_pool(pool, path, "aws", "instanceType", pool.instance_type)
    yield from problems
    yield from _check_capacity(spec, pool, path, shape_known)
    if not pool.gpu and pool.efa:
        yield f"{path}.efa: EFA is for GPU pools"
    rack = rack_shape(_pool_shapes(pool)) if shape_known else None
    if rack is not None:
        yield from check_rack_pool(pool, rack, spec.cluster.kubernetes_version, path, path.split(".", 1)[0])
    if shape_known and pool.efa:
        from components.backends import backend  # the registry: this module is the backend's own rules

        shape = backend(spec.cloud).machine_of(pool)
        if shape is not None and shape.efa_interfaces == 0:
            yield f"{path}.efa: {shape.name} has no EFA interfaces; EFA needs e.g. p4d, p5, p5e, p5en"


def _pool_shapes(pool: NodePoolSpec) -> list:
    if pool.instance_type:
        shape = catalog().machine("aws", pool.instance_type)
        return [shape] if shape is not None else []
    return catalog().shapes("aws", pool.gpu, pool.gpus_per_node) if pool.gpu else []


def _check_capacity(spec: PlatformSpec, pool: NodePoolSpec, path: str, shape_known: bool) -> Iterable[str]:
    """Reservations and Capacity Blocks are zonal and of one instance type (EC2 user guide, "Work with
    Capacity Blocks": "delivered as targeted Capacity Reservations in a single Availability Zone";
    "Launch instances into an existing Capacity Reservation": matching instance type, platform, zone)."""
    yield from check_capacity(pool, path, "aws", CAPACITY)
    shape = catalog().machine("aws", pool.instance_type) if shape_known and pool.instance_type else None
    if shape is None and shape_known and pool.gpu and pool.gpus_per_node:
        shape = next(iter(catalog().shapes("aws", pool.gpu, pool.gpus_per_node)), None)
    if shape is not None and shape.capacity_block_only and pool.capacity != "capacity-block":
        # EC2 user guide, "Capacity Blocks for ML": P6e-GB200 (and -GB300) UltraServers are sold as blocks.
        yield (
            f"{path}.capacity: {shape.name} is sold only as Capacity Blocks (UltraServers); "
            f"use capacity: capacity-block, not {pool.capacity}"
        )
    sold_for = CAPACITY.only_for.get(pool.capacity)
    if shape is not None and sold_for is not None and shape.name not in sold_for:
        sold = ", ".join(sorted(t for t in sold_for if t.startswith("p")))
        yield (
            f"{path}.capacity: EC2 sells no Capacity Blocks of {shape.name} (GPU types it sells them for: "
            f"{sold}; components/aws/capacity_blocks.py)"
        )
    if pool.capacity not in RESERVED:
        return
    if pool.placement == "compact":
        # The reservation decides where its instances go (a Capacity Block is placed in an UltraCluster;
        # an ODCR matches only launches into its own placement group, if it has one).
        yield f"{path}.placement: a {pool.capacity} pool is placed by its reservation; drop placement: compact"
    if pool.reservation and not RESERVATION_ID.match(pool.reservation):
        yield (
            f"{path}.reservation: {pool.reservation!r} is not a capacity reservation id "
            "(cr- and 17 hex digits, e.g. cr-0123456789abcdef0)"
        )
    # With a brought VPC the pool takes the first of network.subnetIds (zones are refused above).
    if spec.network.vpc_id is None:
        yield from zone_count_problem(path, pool.capacity, pool.zones, "the pool")
    if shape_known and pool.gpu and not pool.instance_type and pool.gpus_per_node:
        shapes = [s.name for s in catalog().shapes("aws", pool.gpu, pool.gpus_per_node)]
        if len(shapes) > 1:
            yield (
                f"{path}.instanceType: required for capacity {pool.capacity}: {pool.gpu} x{pool.gpus_per_node} "
                f"comes as {', '.join(shapes)}; name the instance type of the reservation"
            )


def check_storage(spec: PlatformSpec, st: StorageSpec, path: str) -> Iterable[str]:
    cap = st.capacity_gib
    if st.kind == "nfs":
        if cap is not None:
            yield f"{path}.capacityGiB: EFS grows with its data and takes no capacity"
        return
    if cap is not None and cap != FSX_LUSTRE_SMALLEST_GIB and cap % FSX_LUSTRE_STEP_GIB:
        yield (
            f"{path}.capacityGiB: FSx for Lustre PERSISTENT_2 takes {FSX_LUSTRE_SMALLEST_GIB} "
            f"or a multiple of {FSX_LUSTRE_STEP_GIB} GiB, not {cap}"
        )
    tput = st.throughput_per_tib
    if tput is not None and tput not in FSX_THROUGHPUTS:
        yield f"{path}.throughputPerTiB: FSx allows {', '.join(map(str, FSX_THROUGHPUTS))} MB/s per TiB, not {tput}"
