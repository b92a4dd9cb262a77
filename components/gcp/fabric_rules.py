"""What a stack must give for its GPUDirect pools: the checks behind `rules.check` (no pulumi_gcp).

A GPU machine type whose fabric cannot be set up is a config error, not a silent fallback to one NIC:
- a bring-your-own network: trainplane creates the fabric VPCs next to the platform's own network
  only when it creates that network too; a brought network's owner would have to create and name them
  (not supported yet), so such a stack is refused naming `network.network`;
- a cluster version older than the fabric's minimum (gpu_direct.tf@v1.95.0 version map), or newer than
  the last whose node image the machine boots (components/gcp/maintenance.py), on a release channel other
  than EXTENDED (the only one where that hold outlasts the minor's standard support);
- a fabric block that overlaps the platform's other ranges or holds too few /20 subnets.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from components.gcp.fabric import (
    DEFAULT_FABRIC_CIDR,
    FABRIC_SUBNET_PREFIX,
    GkeFabric,
    fabric_capacity,
    fabric_of,
    gvnic_network_count,
)
from components.gcp.maintenance import HELD_RELEASE_CHANNEL, NEWEST_MINOR
from components.gcp.ranges import GCP_DEFAULT_PODS_CIDR, GCP_DEFAULT_SERVICES_CIDR
from components.spec.platform import PlatformSpec


def platform_fabrics(spec: PlatformSpec) -> tuple[GkeFabric, ...]:
    """The GPUDirect fabrics of the stack's GPU pools, each once, in pool order."""
    from components.backends import backend  # the registry: the rules belong to the gcp backend

    found: list[GkeFabric] = []
    for pool in spec.gpu_pools():
        shape = backend(spec.cloud).machine_of(pool)
        fabric = fabric_of(shape.name) if shape is not None and shape.accelerator_type else None
        if fabric is not None and fabric not in found:
            found.append(fabric)
    return tuple(found)


def _fabric_pools(spec: PlatformSpec) -> list[tuple[int, GkeFabric]]:
    from components.backends import backend  # the registry: the rules belong to the gcp backend

    out = []
    for i, pool in enumerate(spec.node_pools):
        shape = backend(spec.cloud).machine_of(pool) if pool.is_gpu else None
        fabric = fabric_of(shape.name) if shape is not None and shape.accelerator_type else None
        if fabric is not None:
            out.append((i, fabric))
    return out


def rdma_zone(spec: PlatformSpec) -> str | None:
    """The zone of the platform's RDMA pools: RoCE network profiles are per zone (`<zone>-vpc-roce`)."""
    for i, fabric in _fabric_pools(spec):
        zones = spec.node_pools[i].zones or spec.zones
        if fabric.rdma_subnets and len(zones) == 1:
            return zones[0]
    return None


def _check_rdma(spec: PlatformSpec, root: str) -> Iterable[str]:
    pools = _fabric_pools(spec)
    rdma = [(i, f) for i, f in pools if f.rdma_subnets]
    zones = {z for i, _ in rdma for z in (spec.node_pools[i].zones or spec.zones)}
    for i, _ in rdma:
        if len(spec.node_pools[i].zones or spec.zones) != 1 or len(zones) > 1:
            yield (
                f"{root}.nodePools[{i}].zones: GPUDirect RDMA needs its pools in one zone (the RoCE network "
                "profile is per zone); name exactly one, the same for every RDMA pool"
            )
    if rdma and len(rdma) < len(pools):
        i = next(i for i, f in pools if not f.rdma_subnets)
        yield (
            f"{root}.nodePools[{i}].machineType: GPUDirect TCPX/TCPXO (MTU 8244) and RDMA (MTU 8896) pools cannot "
            "share one platform's fabric networks; put them on separate platforms"
        )


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def check_fabric(spec: PlatformSpec, root: str) -> Iterable[str]:
    fabrics = platform_fabrics(spec)
    if not fabrics:
        return
    names = ", ".join(f"{f.kind} ({'/'.join(f.machine_types)})" for f in fabrics)
    if spec.network.network or spec.network.subnetwork:
        yield (
            f"{root}.network.network: GPUDirect {names} needs its own GPU NIC networks, which trainplane "
            "creates only with the platform's network; drop network/subnetwork or use another machine type"
        )
    yield from _check_rdma(spec, root)
    for f in fabrics:
        if f.minimum_minor and _minor(spec.cluster.kubernetes_version) < _minor(f.minimum_minor):
            yield (
                f"{root}.cluster.kubernetesVersion: GPUDirect-{f.kind.upper()} needs GKE {f.minimum_minor} or "
                f"newer, not {spec.cluster.kubernetes_version}"
            )
        newest = NEWEST_MINOR.get(f.kind)
        if newest and _minor(spec.cluster.kubernetes_version) > _minor(newest):
            yield (
                f"{root}.cluster.kubernetesVersion: GPUDirect-{f.kind.upper()} machines ({'/'.join(f.machine_types)}) "
                f"boot COS 121 or older; GKE {spec.cluster.kubernetes_version} nodes run a newer COS and cannot be "
                f"created (cluster-toolkit PR #5673); use {newest} or older"
            )
        channel = spec.cluster.release_channel
        if newest and channel not in (None, HELD_RELEASE_CHANNEL):
            yield (
                f"{root}.cluster.releaseChannel: GPUDirect-{f.kind.upper()} machines hold the cluster on GKE "
                f"{newest} or older; on {channel} the hold ends at the minor's end of standard support"
                f"{_standard_end(spec.cluster.kubernetes_version)} and GKE upgrades the cluster to a minor they cannot "
                f"boot; use {HELD_RELEASE_CHANNEL} (or leave it unset): the hold then lasts through extended support"
            )
    yield from _check_fabric_cidr(spec, root, gvnic_network_count(fabrics))


def _standard_end(minor: str) -> str:
    """ " (GKE 1.34: 2026-10-01)" from the support calendar, or "" for a minor it lacks (its own error)."""
    from components import k8s_support

    row = k8s_support.calendar()["gke"]["minors"].get(minor)
    return f" (GKE {minor}: {row['standardEnd']})" if row else ""


def _check_fabric_cidr(spec: PlatformSpec, root: str, count: int) -> Iterable[str]:
    net = spec.network
    cidr = net.fabric_cidr or DEFAULT_FABRIC_CIDR
    if fabric_capacity(cidr) < count:
        yield (
            f"{root}.network.fabricCidr: {cidr} holds {fabric_capacity(cidr)} /{FABRIC_SUBNET_PREFIX} subnets; "
            f"the GPUDirect pools need {count}"
        )
    others: list[tuple[str, ipaddress.IPv4Network | None]] = [
        ("cidr", net.cidr),
        ("podsCidr", net.pods_cidr or GCP_DEFAULT_PODS_CIDR),
        ("servicesCidr", net.services_cidr or GCP_DEFAULT_SERVICES_CIDR),
        ("privateServicesCidr", net.private_services_cidr),
    ]
    for key, other in others:
        if other is not None and cidr.overlaps(other):
            yield f"{root}.network.fabricCidr: {cidr} overlaps {key} {other}; the ranges must be disjoint"
