"""What GCP accepts in a platform stack: its own keys, network ranges, zones, Filestore and Managed
Lustre sizing, the GKE version Lustre needs.

Pure rules over the spec models and the catalog (no pulumi_gcp); the GCP components import the sizing
constants from here.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from components.gcp.ranges import (
    GCP_DEFAULT_PODS_CIDR,
    GCP_DEFAULT_PRIVATE_SERVICES_CIDR,
    GCP_DEFAULT_SERVICES_CIDR,
)
from components.gcp.regions import gcp_zone_problems
from components.regions import region_problems
from components.spec.base import Spec, alias_set
from components.spec.capacity import DWS, CapacityKinds, check_capacity, zone_count_problem
from components.spec.platform import (
    ClusterSpec,
    NetworkSpec,
    NodePoolSpec,
    PlatformSpec,
    StorageSpec,
)
from components.spec.rules import check_catalog_pool, compact_zone_problem, region_required

# GCP Managed Lustre performance tiers (Managed Lustre docs, "Performance tiers"), per MB/s per TiB:
# (smallest GiB, step up to the threshold, threshold GiB, step above it, largest GiB).
GCP_LUSTRE_TIERS = {
    1000: (9000, 9000, 1_530_000, 72000, 10_008_000),
    500: (18000, 18000, 3_060_000, 144000, 20_016_000),
    250: (36000, 36000, 6_120_000, 288000, 40_032_000),
    125: (72000, 72000, 12_240_000, 72000, 12_240_000),
}
GCP_LUSTRE_THROUGHPUTS = tuple(sorted(GCP_LUSTRE_TIERS))
GCP_LUSTRE_DEFAULT_THROUGHPUT = 1000  # the GKE Lustre CSI driver's default tier, and the smallest instance
GCP_LUSTRE_MIN_GIB = GCP_LUSTRE_TIERS[GCP_LUSTRE_DEFAULT_THROUGHPUT][0]
# Filestore tier limits in GiB: (smallest, largest, step) where a step applies across the whole range,
# following the Filestore service tiers documentation and the provider's `capacity_gb` reference.
# ZONAL and REGIONAL take 1 GiB steps up to 10239 GiB and 2560 GiB steps from 10240 GiB (REGIONAL
# starts at 100 GiB only in some regions, so 1024 is the safe floor).
FILESTORE_LIMITS_GIB = {
    "BASIC_HDD": (1024, 65433),
    "BASIC_SSD": (2560, 65433),
    "ZONAL": (100, 102400),
    "REGIONAL": (1024, 102400),
    "ENTERPRISE": (1024, 10240),
}
FILESTORE_STEP_GIB = {"ENTERPRISE": 256}
FILESTORE_LARGE_FROM_GIB, FILESTORE_LARGE_STEP_GIB = 10240, 2560
FILESTORE_DEFAULT_TIER = "BASIC_SSD"
# Filestore tiers that live in one zone (the others are regional).
FILESTORE_ZONAL_TIERS = ("BASIC_HDD", "BASIC_SSD", "ZONAL")

# The keys of the cloud-neutral models that GCP understands among those only some clouds do.
KEYS: dict[type[Spec], frozenset[str]] = {
    PlatformSpec: frozenset({"project", "zones"}),
    ClusterSpec: frozenset({"releaseChannel", "authorizedNetworks", "privateNodes"}),
    NetworkSpec: frozenset(
        {
            "podsCidr",
            "servicesCidr",
            "network",
            "subnetwork",
            "privateServicesCidr",
            "podsRangeName",
            "servicesRangeName",
            "cidr",
            "fabricCidr",
        }
    ),
    NodePoolSpec: frozenset(
        {
            "machineType",
            "localSsdCount",
            "zones",
            "placement",
            "diskSizeGiB",
            "capacity",
            "reservation",
            "maxRunHours",
        }
    ),
    StorageSpec: frozenset({"tier"}),
}
TWINS = {"instanceType": "machineType"}
# The capacity kinds of a GKE pool, and how GCP explains them to other clouds' stacks (and its own
# answer to theirs): flex-start and queued provisioning are GKE's Dynamic Workload Scheduler (GKE docs,
# "About GPU obtainability with flex-start"), whose nodes are provisioned from zero.
CAPACITY = CapacityKinds(
    offered=("on-demand", "spot", "reservation", "flex-start", "queued"),
    about={"flex-start": "GKE Dynamic Workload Scheduler", "queued": "GKE Dynamic Workload Scheduler"},
    instead={"capacity-block": "reservation (a future reservation) or flex-start"},
    from_zero={
        "flex-start": "GKE provisions flex-start nodes on demand from zero",
        "queued": "queued provisioning grants nodes per workload, from zero",
    },
)
# A Compute Engine reservation: an RFC 1035 name (Compute Engine API, reservations: name), optionally one
# block of it (`name/reservationBlocks/<block>`, GKE "Consume reserved zonal resources": reservation
# blocks of A3 Ultra / A4 reservations), optionally in another project (a shared reservation,
# `projects/<project>/reservations/<name>`, the form cluster-toolkit's gke-node-pool sends to GKE).
_RFC1035 = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
RESERVATION = re.compile(
    rf"^(projects/[a-z][-a-z0-9]{{4,28}}[a-z0-9]/reservations/)?{_RFC1035}(/reservationBlocks/{_RFC1035})?$"
)
# Flex-start (also under queued provisioning) runs GPUs from GKE 1.32.2-gke.1652000 (GKE docs, "About
# GPU obtainability with flex-start", Requirements); the spec pins minors only.
DWS_MIN_MINOR = 32
# Compact placement with flex-start: A3 Ultra, A4 and H4D only; queued provisioning: never on GPUs
# (cluster-toolkit modules/compute/gke-node-pool/main.tf preconditions).
FLEX_START_COMPACT_PREFIXES = ("a3-ultragpu-", "a4-", "h4d-")


def check(spec: PlatformSpec, root: str) -> Iterable[str]:
    yield from region_required(spec, root, "gcp")
    yield from region_problems("gcp", spec.region, f"{root}.region")
    if not spec.project:
        yield f"{root}.project: required for cloud gcp (the project id to deploy into)"
    yield from gcp_zone_problems(spec.region, spec.zones, f"{root}.zones")
    yield from _check_network(spec, root)
    yield from _check_ranges(spec, root)
    for i, pool in enumerate(spec.node_pools):
        yield from gcp_zone_problems(spec.region, pool.zones, f"{root}.nodePools[{i}].zones")
    yield from _check_storage_placement(spec, root)
    from components.gcp.fabric_rules import check_fabric  # GPUDirect pools (fabric_rules.py)

    yield from check_fabric(spec, root)


def _check_network(spec: PlatformSpec, root: str) -> Iterable[str]:
    net = spec.network
    byo = bool(net.network or net.subnetwork)
    if bool(net.network) != bool(net.subnetwork):
        yield f"{root}.network: network and subnetwork go together when bringing your own network"
    if not byo:
        for key in ("podsRangeName", "servicesRangeName"):
            if alias_set(net, key):
                yield f"{root}.network.{key}: only with a bring-your-own network/subnetwork"
    elif net.private_services_cidr is not None:
        yield (
            f"{root}.network.privateServicesCidr: only for a network trainplane creates; a bring-your-own "
            "network brings its own private services access"
        )
    if bool(net.pods_range_name) != bool(net.services_range_name):
        yield f"{root}.network: podsRangeName and servicesRangeName go together"


def _check_ranges(spec: PlatformSpec, root: str) -> Iterable[str]:
    net = spec.network
    byo = bool(net.network or net.subnetwork)
    # A bring-your-own subnetwork has its own primary range; `cidr` only describes one trainplane creates.
    ranges: list[tuple[str, ipaddress.IPv4Network]] = [] if byo else [("cidr", net.cidr)]
    if byo:
        ranges += [(k, v) for k, v in (("podsCidr", net.pods_cidr), ("servicesCidr", net.services_cidr)) if v]
    else:  # the ranges trainplane will create, defaults included
        ranges += [
            ("podsCidr", net.pods_cidr or GCP_DEFAULT_PODS_CIDR),
            ("servicesCidr", net.services_cidr or GCP_DEFAULT_SERVICES_CIDR),
            ("privateServicesCidr", net.private_services_cidr or GCP_DEFAULT_PRIVATE_SERVICES_CIDR),
        ]
    for i, (ka, a) in enumerate(ranges):
        for kb, b in ranges[i + 1 :]:
            if a.overlaps(b):
                yield f"{root}.network.{kb}: {b} overlaps {ka} {a}; the ranges must be disjoint"


def _check_storage_placement(spec: PlatformSpec, root: str) -> Iterable[str]:
    zonal = [
        (i, st)
        for i, st in enumerate(spec.storage)
        if st.kind == "lustre" or (st.tier or FILESTORE_DEFAULT_TIER) in FILESTORE_ZONAL_TIERS
    ]
    if zonal and gcp_storage_zone(spec) is None:
        i, st = zonal[0]
        yield (
            f"{root}.zones: required for {root}.storage[{i}] ({st.name}): Filestore {FILESTORE_ZONAL_TIERS} "
            "tiers and Managed Lustre live in one zone; list the zones of the platform"
        )
    minor = int(spec.cluster.kubernetes_version.split(".")[1])
    for i, st in enumerate(spec.storage):
        if st.kind == "lustre" and minor < 33:
            yield (
                f"{root}.storage[{i}].kind: the GKE Managed Lustre CSI driver needs GKE 1.33 or newer; "
                f"cluster.kubernetesVersion is {spec.cluster.kubernetes_version}"
            )


def check_pool(spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
    if pool.placement == "compact":
        yield from compact_zone_problem(path, pool.zones or spec.zones)
    if spec.zones:
        # Zones outside the region are reported by `check`.
        in_region = [z for z in pool.zones if not spec.region or z.startswith(spec.region + "-")]
        for j, z in enumerate(pool.zones):
            if z in in_region and z not in spec.zones:
                yield f"{path}.zones[{j}]: {z!r} is not one of the platform's zones ({', '.join(spec.zones)})"
    problems, shape_known = check_catalog_pool(pool, path, "gcp", "machineType", pool.machine_type)
    yield from problems
    yield from _check_capacity(spec, pool, path)
    if not shape_known:
        return
    from components.backends import backend  # the registry: this module is the backend's own rules
    from components.gcp.rack import check_rack, is_rack  # A4X / A4X Max (rack.py)

    shape = backend(spec.cloud).machine_of(pool)
    if shape is not None and is_rack(shape):
        yield from check_rack(spec, pool, shape, path)
    if pool.local_ssd_count:
        if shape is not None and shape.local_ssd_count and pool.local_ssd_count != shape.local_ssd_count:
            yield (
                f"{path}.localSsdCount: {shape.name} comes with {shape.local_ssd_count} local SSDs, "
                f"not {pool.local_ssd_count}"
            )


def _check_capacity(spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
    yield from check_capacity(pool, path, "gcp", CAPACITY)
    if pool.max_run_hours is not None and pool.capacity not in DWS:
        yield f"{path}.maxRunHours: only for capacity flex-start or queued (how long their nodes may run)"
    if pool.capacity == "reservation":
        if pool.reservation and not RESERVATION.match(pool.reservation):
            yield (
                f"{path}.reservation: {pool.reservation!r} is not a reservation: a name (a-z, 0-9, '-'), "
                "<name>/reservationBlocks/<block>, or projects/<project>/reservations/<name>"
            )
        # A reservation lives in one zone; GKE consumes it only from a node pool in that zone.
        yield from zone_count_problem(
            path, pool.capacity, pool.zones or spec.zones, "the pool" if pool.zones else "the platform"
        )
    if pool.capacity in DWS:
        yield from _check_dws(spec, pool, path)


def _check_dws(spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
    minor = int(spec.cluster.kubernetes_version.split(".")[1])
    if minor < DWS_MIN_MINOR:
        yield (
            f"{path}.capacity: {pool.capacity} needs GKE 1.{DWS_MIN_MINOR}.2-gke.1652000 or newer for GPUs; "
            f"cluster.kubernetesVersion is {spec.cluster.kubernetes_version}"
        )
    if pool.placement != "compact":
        return
    if pool.capacity == "queued":
        yield f"{path}.placement: queued provisioning does not take compact placement on GPUs; use spread"
        return
    from components.backends import backend  # the registry: this module is the backend's own rules

    shape = backend(spec.cloud).machine_of(pool)
    if shape is not None and not shape.name.startswith(FLEX_START_COMPACT_PREFIXES):
        yield (
            f"{path}.placement: compact placement with flex-start is for A3 Ultra, A4 and H4D machines, "
            f"not {shape.name}; use spread"
        )


def check_storage(spec: PlatformSpec, st: StorageSpec, path: str) -> Iterable[str]:
    cap, tput = st.capacity_gib, st.throughput_per_tib
    if st.kind == "nfs":
        if cap is not None and (
            problem := filestore_capacity_problem(st.tier or FILESTORE_DEFAULT_TIER, cap)
        ):
            yield f"{path}.capacityGiB: {problem}"
        return
    if tput is not None and tput not in GCP_LUSTRE_TIERS:
        yield (
            f"{path}.throughputPerTiB: Managed Lustre allows "
            f"{', '.join(map(str, GCP_LUSTRE_THROUGHPUTS))} MB/s per TiB, not {tput}"
        )
    elif cap is not None and (problem := gcp_lustre_capacity_problem(cap, tput)):
        yield f"{path}.capacityGiB: {problem}"


def gcp_lustre_capacity_problem(cap: int, throughput: int | None) -> str | None:
    """Why `cap` GiB is not a Managed Lustre size at `throughput` MB/s per TiB (None when it is)."""
    tput = throughput or GCP_LUSTRE_DEFAULT_THROUGHPUT
    lo, step, threshold, big_step, hi = GCP_LUSTRE_TIERS[tput]
    tier = f"GCP Managed Lustre at {tput} MB/s per TiB"
    if cap < lo or cap > hi:
        return f"{tier} takes {lo} to {hi} GiB, not {cap}"
    if cap <= threshold and cap % step:
        return f"{tier} grows in steps of {step} GiB up to {threshold} GiB; {cap} is not a multiple of it"
    if cap > threshold and cap % big_step:
        return f"{tier} grows in steps of {big_step} GiB above {threshold} GiB; {cap} is not a multiple of it"
    return None


def filestore_capacity_problem(tier: str, cap: int) -> str | None:
    """Why `cap` GiB is not a valid Filestore `tier` instance size (None when it is)."""
    lo, hi = FILESTORE_LIMITS_GIB[tier]
    if not lo <= cap <= hi:
        return f"Filestore {tier} takes {lo} to {hi} GiB, not {cap}"
    step = FILESTORE_STEP_GIB.get(tier)
    if step and cap % step:
        return f"Filestore {tier} grows in steps of {step} GiB; {cap} is not a multiple of {step}"
    if tier in ("ZONAL", "REGIONAL") and cap >= FILESTORE_LARGE_FROM_GIB and cap % FILESTORE_LARGE_STEP_GIB:
        return (
            f"Filestore {tier} takes multiples of {FILESTORE_LARGE_STEP_GIB} GiB from "
            f"{FILESTORE_LARGE_FROM_GIB} GiB; {cap} is not one"
        )
    return None


def gcp_storage_zone(spec: PlatformSpec) -> str | None:
    """The zone GCP's zonal file systems go in: next to the GPUs (the first GPU pool that names its
    zones), else the platform's first zone. None when the stack names no zone at all."""
    for pool in spec.gpu_pools():
        if pool.zones:
            return pool.zones[0]
    return spec.zones[0] if spec.zones else None
