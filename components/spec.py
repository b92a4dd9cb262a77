"""Cloud-neutral spec models of a GPU platform, shared by the stack-config schema and the components.

A stack file holds one object, `trainplane:platform`, that `PlatformSpec.load()` validates in two passes:
first the shape (types, allowed values, unknown keys) with pydantic, then the rules that need the GPU
catalog or several keys at once (GPU counts per cloud, quotas, Lustre sizes, keys of another cloud).
Every problem becomes one `ConfigError` line that names the key path, e.g.

    platform.nodePools[1].gpu: 'H1000' is not a known GPU; known: A10G, L4, ...

Example:
    >>> spec = PlatformSpec.load({"cloud": "kubernetes", "cluster": {"name": "lab", "context": "lab"},
    ...                           "nodePools": [{"name": "a100", "selector": {"gpu": "a100"},
    ...                                          "gpu": "A100-80GB", "gpusPerNode": 8}]})
    >>> spec.max_gpus()
    8
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from components.catalog import catalog

Cloud = Literal["aws", "gcp", "kubernetes"]
Capacity = Literal["on-demand", "spot"]

# FSx for Lustre PERSISTENT_2 accepts 1200 GiB or a multiple of 2400 GiB (FSx API reference).
FSX_LUSTRE_SMALLEST_GIB = 1200
FSX_LUSTRE_STEP_GIB = 2400
FSX_THROUGHPUTS = (125, 250, 500, 1000)
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
# Secondary and peering ranges of a GCP network trainplane creates, when the stack names none.
GCP_DEFAULT_PODS_CIDR = ipaddress.IPv4Network("10.64.0.0/14")
GCP_DEFAULT_SERVICES_CIDR = ipaddress.IPv4Network("10.68.0.0/20")
GCP_DEFAULT_PRIVATE_SERVICES_CIDR = ipaddress.IPv4Network("10.72.0.0/20")
# Filestore tiers that live in one zone (the others are regional).
FILESTORE_ZONAL_TIERS = ("BASIC_HDD", "BASIC_SSD", "ZONAL")

_DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
# Kubernetes object names such as StorageClasses: a DNS subdomain (RFC 1123).
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
PATTERN_WORDS = {
    _DNS_LABEL: "a lowercase DNS label (a-z, 0-9 and '-', starting with a letter)",
    _DNS_SUBDOMAIN: "a Kubernetes object name (lowercase a-z, 0-9, '-' and '.')",
    r"^1\.\d{2}$": 'a Kubernetes minor version in quotes, e.g. "1.33"',
}


SpecT = TypeVar("SpecT", bound="Spec")


class ConfigError(Exception):
    """A stack file that cannot be deployed; `problems` holds one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Spec(BaseModel):
    """Base of every spec model: camelCase keys in YAML, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, validate_default=True
    )


def _load_checked(
    model: type[SpecT], raw: Any, root: str, check: Callable[[SpecT, str], Iterable[str]]
) -> SpecT:
    """Both passes of validation: pydantic's shape, then `check`'s rules; every problem on one line."""
    if not isinstance(raw, dict):
        raise ConfigError([f"{root}: must be a mapping, got {type(raw).__name__}"])
    try:
        obj = model.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, model, root)) from None
    problems = list(check(obj, root))
    if problems:
        raise ConfigError(problems)
    return obj


class ClusterSpec(Spec):
    name: str = Field(pattern=_DNS_LABEL, max_length=40)
    kubernetes_version: str = Field(default="1.33", pattern=r"^1\.\d{2}$")
    # aws
    endpoint_access: Literal["public", "private", "both"] | None = None
    # Networks that reach the private API endpoint (TCP 443 on the cluster security group).
    private_access_cidrs: list[ipaddress.IPv4Network] = Field(default_factory=list)
    admin_principals: list[str] = Field(default_factory=list)
    log_types: list[Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]] | None = None
    # gcp
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] | None = None
    authorized_networks: list[ipaddress.IPv4Network] = Field(default_factory=list)
    private_nodes: bool | None = None
    # kubernetes (an existing cluster): the kubeconfig itself is the secret `trainplane:kubeconfig`
    context: str | None = None
    # kubernetes: the StorageClass the platform's volumes (Prometheus, Loki) name; None: the cluster's
    # default class (`trainplane verify --kubeconfig` checks that one exists).
    storage_class: str | None = Field(default=None, pattern=_DNS_SUBDOMAIN, max_length=253)


class NetworkSpec(Spec):
    cidr: ipaddress.IPv4Network = ipaddress.IPv4Network("10.0.0.0/16")
    # aws
    zones: int | None = Field(default=None, ge=2, le=6)
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    subnet_ids: list[str] = Field(default_factory=list)
    # gcp
    pods_cidr: ipaddress.IPv4Network | None = None
    services_cidr: ipaddress.IPv4Network | None = None
    # Range for private services access (Managed Lustre peers into the VPC from here).
    private_services_cidr: ipaddress.IPv4Network | None = None
    network: str | None = None
    subnetwork: str | None = None
    # Names of the subnet's existing secondary ranges, for a bring-your-own subnetwork.
    pods_range_name: str | None = Field(default=None, pattern=_DNS_LABEL, max_length=63)
    services_range_name: str | None = Field(default=None, pattern=_DNS_LABEL, max_length=63)


class Taint(Spec):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class NodePoolSpec(Spec):
    name: str = Field(pattern=_DNS_LABEL, max_length=30)
    gpu: str | None = None
    gpus_per_node: int | None = Field(default=None, ge=1, le=16)
    capacity: Capacity = "on-demand"
    min_nodes: int = Field(default=0, ge=0, le=1000)
    max_nodes: int | None = Field(default=None, ge=1, le=1000)
    disk_size_gib: int | None = Field(default=None, alias="diskSizeGiB", ge=20, le=16384)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    zones: list[str] = Field(default_factory=list)
    placement: Literal["spread", "compact"] = "spread"
    # aws
    instance_type: str | None = None
    efa: bool | None = None
    # gcp
    machine_type: str | None = None
    local_ssd_count: int | None = Field(default=None, ge=0, le=32)
    # kubernetes: the labels that select nodes that already exist
    selector: dict[str, str] = Field(default_factory=dict)

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str | None) -> str | None:
        if v is not None and catalog().gpu(v) is None:
            raise ValueError(f"{v!r} is not a known GPU; known: {', '.join(catalog().gpu_names())}")
        return v

    @property
    def is_gpu(self) -> bool:
        return self.gpu is not None

    @property
    def effective_max_nodes(self) -> int:
        return self.max_nodes if self.max_nodes is not None else max(self.min_nodes, 1)


class StorageSpec(Spec):
    name: str = Field(pattern=_DNS_LABEL, max_length=30)
    kind: Literal["lustre", "nfs"]
    capacity_gib: int | None = Field(default=None, alias="capacityGiB", ge=1)
    throughput_per_tib: int | None = Field(default=None, alias="throughputPerTiB")
    # aws lustre: an S3 prefix linked through a data repository association
    import_path: str | None = Field(default=None, pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$")
    export_path: str | None = Field(default=None, pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$")
    # gcp nfs (Filestore)
    tier: Literal["BASIC_HDD", "BASIC_SSD", "ZONAL", "REGIONAL", "ENTERPRISE"] | None = None
    # kubernetes nfs: an NFS server that already exists
    server: str | None = None
    path: str | None = Field(default=None, pattern=r"^/")
    mount_options: list[str] = Field(default_factory=list)


class ObservabilitySpec(Spec):
    grafana: bool = True
    loki: bool = False
    retention_days: int = Field(default=15, ge=1, le=3650)
    prometheus_storage_gib: int = Field(default=100, alias="prometheusStorageGiB", ge=8)
    log_retention_days: int = Field(default=14, ge=1, le=3650)
    alerts: bool = True


class TeamSpec(Spec):
    name: str = Field(pattern=_DNS_LABEL, max_length=40)
    gpu_quota: int = Field(ge=0)
    cpu_quota: int | None = Field(default=None, ge=1)
    memory_quota_gib: int | None = Field(default=None, alias="memoryQuotaGiB", ge=1)
    storage: list[str] | None = None  # names of platform storage the team mounts; None: all of it
    admins: list[str] = Field(default_factory=list)


class MigSpec(Spec):
    strategy: Literal["none", "single", "mixed"] = "none"
    profile: str | None = None  # e.g. all-1g.10gb, applied through the MIG manager's config label


class TimeSlicingSpec(Spec):
    replicas: int = Field(ge=2, le=48)


class GpuOperatorSpec(Spec):
    version: str | None = None
    driver: bool | None = None  # existing clusters: let the operator install the driver (default true)
    mig: MigSpec = MigSpec()
    time_slicing: TimeSlicingSpec | None = None


# ---- GPU node health (components/kubernetes/gpu_health.py) ------------------------------------
# XIDs the NVIDIA device plugin (v0.20.0, internal/rm/health.go) treats as application errors that leave
# the GPU healthy; the health controller and the XID alert ignore them the same way.
APPLICATION_XIDS = (13, 31, 43, 45, 68, 109)


class GpuDiagnosticSpec(Spec):
    enabled: bool = True
    # dcgmi diag suite: 1 quick (seconds), 2 medium (about 2 minutes), 3 long (about 15 minutes).
    level: int = Field(default=1, ge=1, le=3)


class GpuHealthSpec(Spec):
    enabled: bool = True
    diagnostic: GpuDiagnosticSpec = GpuDiagnosticSpec()
    # A new GPU node may take this long to advertise its GPUs before the missing ones count as a fault.
    startup_grace_minutes: int = Field(default=20, ge=5, le=240)
    ignored_xids: list[int] = Field(default_factory=lambda: list(APPLICATION_XIDS))


class QueueingSpec(Spec):
    enabled: bool = True
    cohort: str = Field(default="gpu-cohort", pattern=_DNS_LABEL)
    borrowing: bool = True


class PriceOverride(Spec):
    on_demand_hourly: float = Field(gt=0)
    spot_hourly: float | None = Field(default=None, gt=0)


class PricingSpec(Spec):
    spot_fraction: float | None = Field(default=None, gt=0, le=1)
    overrides: dict[str, PriceOverride] = Field(default_factory=dict)


class PlatformSpec(Spec):
    cloud: Cloud
    region: str | None = None
    cluster: ClusterSpec
    network: NetworkSpec = NetworkSpec()
    node_pools: list[NodePoolSpec] = Field(min_length=1)
    storage: list[StorageSpec] = Field(default_factory=list)
    observability: ObservabilitySpec = ObservabilitySpec()
    teams: list[TeamSpec] = Field(default_factory=list)
    gpu_operator: GpuOperatorSpec = GpuOperatorSpec()
    gpu_health: GpuHealthSpec = GpuHealthSpec()
    queueing: QueueingSpec = QueueingSpec()
    pricing: PricingSpec = PricingSpec()
    tags: dict[str, str] = Field(default_factory=dict)
    # gcp
    project: str | None = Field(default=None, pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
    zones: list[str] = Field(default_factory=list)

    @classmethod
    def load(cls, raw: Any, root: str = "platform") -> PlatformSpec:
        """Validate a raw stack object; raise ConfigError with one line per problem."""
        return _load_checked(cls, raw, root, check_platform)

    def gpu_pools(self) -> list[NodePoolSpec]:
        return [p for p in self.node_pools if p.is_gpu]

    def gpus_per_node(self, pool: NodePoolSpec) -> int:
        """GPUs on each node of `pool`, from the spec or else from its machine type."""
        if pool.gpus_per_node is not None:
            return pool.gpus_per_node
        shape = machine_of(self.cloud, pool)
        return shape.gpus if shape is not None else 0

    def max_gpus(self) -> int:
        return sum(self.gpus_per_node(p) * p.effective_max_nodes for p in self.gpu_pools())

    def min_gpus(self) -> int:
        return sum(self.gpus_per_node(p) * p.min_nodes for p in self.gpu_pools())

    def zone_names(self) -> list[str]:
        return list(self.zones)


def machine_of(cloud: str, pool: NodePoolSpec):
    """The catalog shape a pool's nodes are made of (None for unknown types or existing clusters)."""
    if cloud == "aws":
        if pool.instance_type:
            return catalog().machine("aws", pool.instance_type)
        if pool.gpu and pool.gpus_per_node:
            shapes = catalog().shapes("aws", pool.gpu, pool.gpus_per_node)
            return shapes[0] if shapes else None
    if cloud == "gcp":
        if pool.machine_type:
            return catalog().machine("gcp", pool.machine_type)
        if pool.gpu and pool.gpus_per_node:
            shapes = catalog().shapes("gcp", pool.gpu, pool.gpus_per_node)
            return shapes[0] if shapes else None
    return None


# Keys that only one cloud understands, by model and alias. Anything else is common to all clouds.
CLOUD_ONLY_KEYS: dict[type[Spec], dict[str, tuple[str, ...]]] = {
    PlatformSpec: {"project": ("gcp",), "zones": ("gcp",)},
    ClusterSpec: {
        "endpointAccess": ("aws",),
        "privateAccessCidrs": ("aws",),
        "adminPrincipals": ("aws",),
        "logTypes": ("aws",),
        "releaseChannel": ("gcp",),
        "authorizedNetworks": ("gcp", "aws"),
        "privateNodes": ("gcp",),
        "context": ("kubernetes",),
        "storageClass": ("kubernetes",),
    },
    NetworkSpec: {
        "zones": ("aws",),
        "vpcId": ("aws",),
        "subnetIds": ("aws",),
        "podsCidr": ("gcp",),
        "servicesCidr": ("gcp",),
        "network": ("gcp",),
        "subnetwork": ("gcp",),
        "privateServicesCidr": ("gcp",),
        "podsRangeName": ("gcp",),
        "servicesRangeName": ("gcp",),
        "cidr": ("aws", "gcp"),
    },
    NodePoolSpec: {
        "instanceType": ("aws",),
        "efa": ("aws",),
        "machineType": ("gcp",),
        "localSsdCount": ("gcp",),
        "selector": ("kubernetes",),
        "zones": ("aws", "gcp"),
        "placement": ("aws", "gcp"),
        "diskSizeGiB": ("aws", "gcp"),
        "capacity": ("aws", "gcp"),
    },
    StorageSpec: {
        "importPath": ("aws",),
        "exportPath": ("aws",),
        "tier": ("gcp",),
        "server": ("kubernetes",),
        "path": ("kubernetes",),
    },
    GpuOperatorSpec: {"driver": ("kubernetes",)},
}
# What to use instead, when a key of another cloud has a twin on this one.
_TWINS = {("instanceType", "gcp"): "machineType", ("machineType", "aws"): "instanceType"}


def _alias(model: type[Spec], field: str) -> str:
    info = model.model_fields[field]
    return info.alias or field


def _cloud_key_problems(obj: Spec, path: str, cloud: str) -> Iterable[str]:
    rules = CLOUD_ONLY_KEYS.get(type(obj), {})
    for field in sorted(obj.model_fields_set):
        alias = _alias(type(obj), field)
        clouds = rules.get(alias)
        if clouds and cloud not in clouds:
            hint = _TWINS.get((alias, cloud))
            instead = f"; use {hint}" if hint else ""
            yield (
                f"{path}.{alias}: only for cloud {' or '.join(clouds)}, this stack is cloud {cloud}{instead}"
            )


def _duplicates(names: list[str]) -> set[str]:
    return {n for n in names if names.count(n) > 1}


def check_platform(spec: PlatformSpec, root: str = "platform") -> Iterable[str]:
    """The rules pydantic cannot express per field: catalog lookups and cross-key constraints."""
    cloud = spec.cloud
    yield from _cloud_key_problems(spec, root, cloud)
    yield from _cloud_key_problems(spec.cluster, f"{root}.cluster", cloud)
    yield from _cloud_key_problems(spec.network, f"{root}.network", cloud)
    yield from _cloud_key_problems(spec.gpu_operator, f"{root}.gpuOperator", cloud)

    if cloud in ("aws", "gcp") and not spec.region:
        yield f"{root}.region: required for cloud {cloud}"
    if cloud == "gcp":
        if not spec.project:
            yield f"{root}.project: required for cloud gcp (the project id to deploy into)"
        for i, z in enumerate(spec.zones):
            if spec.region and not z.startswith(spec.region + "-"):
                yield f"{root}.zones[{i}]: {z!r} is not a zone of region {spec.region}"
    if cloud == "aws":
        net = spec.network
        if net.vpc_id and not net.subnet_ids:
            yield f"{root}.network.subnetIds: required with vpcId (the private subnets nodes run in)"
        if net.subnet_ids and not net.vpc_id:
            yield f"{root}.network.vpcId: required with subnetIds"
        for i, s in enumerate(net.subnet_ids):
            if not re.match(r"^subnet-[0-9a-f]{8,17}$", s):
                yield f"{root}.network.subnetIds[{i}]: {s!r} is not a subnet id (subnet-...)"
        yield from _check_aws_endpoint(spec, root)
    if cloud == "gcp":
        yield from _check_gcp(spec, root)

    for label, names in (
        ("nodePools", [p.name for p in spec.node_pools]),
        ("storage", [s.name for s in spec.storage]),
        ("teams", [t.name for t in spec.teams]),
    ):
        for dup in sorted(_duplicates(names)):
            yield f"{root}.{label}: name {dup!r} is used more than once"

    pool_problems = [
        line
        for i, pool in enumerate(spec.node_pools)
        for line in _check_pool(spec, pool, f"{root}.nodePools[{i}]")
    ]
    yield from pool_problems
    for i, st in enumerate(spec.storage):
        yield from _check_storage(spec, st, f"{root}.storage[{i}]")

    # Quotas are measured against the pools; with a broken pool the ceiling would only add noise.
    yield from _check_teams(spec, root, check_quota=not pool_problems)
    yield from _check_gpu_operator(spec, root)


def _check_pool(spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
    cloud = spec.cloud
    yield from _cloud_key_problems(pool, path, cloud)
    if pool.max_nodes is not None and pool.min_nodes > pool.max_nodes:
        yield f"{path}.minNodes: {pool.min_nodes} is greater than maxNodes {pool.max_nodes}"
    byo_vpc = cloud == "aws" and spec.network.vpc_id is not None
    if byo_vpc and pool.zones:
        yield (
            f"{path}.zones: with network.vpcId pools run in network.subnetIds; "
            "EFA and compact pools take the first of them"
        )
    if cloud == "aws" and spec.region:
        for j, z in enumerate(pool.zones):
            if not re.fullmatch(re.escape(spec.region) + r"[a-z]", z):
                yield f"{path}.zones[{j}]: {z!r} is not an availability zone of region {spec.region}"
    if pool.placement == "compact" and not byo_vpc:
        zones = pool.zones or (spec.zones if cloud == "gcp" else [])
        if len(zones) != 1:
            yield (
                f"{path}.placement: compact placement needs exactly one zone; "
                f"set {path.split('.', 1)[1]}.zones to a single zone"
            )
    if cloud == "kubernetes":
        if not pool.selector:
            yield f"{path}.selector: required on cloud kubernetes (labels of the existing nodes)"
        if pool.gpu and not pool.gpus_per_node:
            yield f"{path}.gpusPerNode: required on cloud kubernetes for a GPU pool"
        if not pool.gpu and pool.gpus_per_node:
            yield f"{path}.gpu: required when gpusPerNode is set"
        if pool.gpu and pool.gpus_per_node:
            allowed = (1, 2, 4, 8, 16)
            if pool.gpus_per_node not in allowed:
                yield f"{path}.gpusPerNode: {pool.gpus_per_node} GPUs per node is not a server shape; allowed: 1, 2, 4, 8, 16"
        return
    type_key = "instanceType" if cloud == "aws" else "machineType"
    type_name = pool.instance_type if cloud == "aws" else pool.machine_type
    if not pool.gpu:
        if pool.gpus_per_node:
            yield f"{path}.gpu: required when gpusPerNode is set"
        if not type_name:
            yield f"{path}.{type_key}: required for a CPU pool (or set gpu for a GPU pool)"
        elif (shape := catalog().machine(cloud, type_name)) is not None and shape.gpus:
            yield f"{path}.gpu: {type_name} carries {shape.gpus}x {shape.gpu}; set gpu: {shape.gpu}"
        if pool.efa:
            yield f"{path}.efa: EFA is for GPU pools"
        return
    kind = catalog().gpu(pool.gpu)
    assert kind is not None  # the field validator already rejected unknown kinds
    counts = kind.counts(cloud)
    if not counts:
        others = [c for c in ("aws", "gcp") if kind.counts(c)]
        yield f"{path}.gpu: {pool.gpu} is not offered on {cloud}; it is on {', '.join(others) or 'no cloud'}"
        return
    if type_name:
        shape = catalog().machine(cloud, type_name)
        if shape is None or shape.gpu != pool.gpu:
            known = ", ".join(m.name for m in kind.shapes(cloud))
            yield f"{path}.{type_key}: {type_name!r} does not carry {pool.gpu}; {pool.gpu} comes in: {known}"
            return
        if pool.gpus_per_node and pool.gpus_per_node != shape.gpus:
            yield f"{path}.gpusPerNode: {type_name} has {shape.gpus} GPUs, not {pool.gpus_per_node}"
    elif not pool.gpus_per_node:
        yield f"{path}.gpusPerNode: required with gpu (or name the {type_key}); {pool.gpu} on {cloud} comes in {counts}"
    elif pool.gpus_per_node not in counts:
        yield (
            f"{path}.gpusPerNode: {pool.gpu} does not come in {pool.gpus_per_node} per node on {cloud}; "
            f"allowed: {', '.join(map(str, counts))}"
        )
    shape = machine_of(cloud, pool)
    if cloud == "aws" and pool.efa and shape is not None and shape.efa_interfaces == 0:
        yield f"{path}.efa: {shape.name} has no EFA interfaces; EFA needs e.g. p4d, p5, p5e, p5en"
    if cloud == "gcp" and pool.local_ssd_count and shape is not None:
        if shape.local_ssd_count and pool.local_ssd_count != shape.local_ssd_count:
            yield (
                f"{path}.localSsdCount: {shape.name} comes with {shape.local_ssd_count} local SSDs, "
                f"not {pool.local_ssd_count}"
            )


def _check_storage(spec: PlatformSpec, st: StorageSpec, path: str) -> Iterable[str]:
    cloud = spec.cloud
    yield from _cloud_key_problems(st, path, cloud)
    if st.kind == "lustre":
        if cloud == "kubernetes":
            yield f"{path}.kind: lustre is provisioned on aws or gcp; on an existing cluster use kind nfs"
        if st.tier is not None:
            yield f"{path}.tier: only for kind nfs (Filestore)"
        cap, tput = st.capacity_gib, st.throughput_per_tib
        if cloud == "aws":
            if cap is not None and cap != FSX_LUSTRE_SMALLEST_GIB and cap % FSX_LUSTRE_STEP_GIB:
                yield (
                    f"{path}.capacityGiB: FSx for Lustre PERSISTENT_2 takes {FSX_LUSTRE_SMALLEST_GIB} "
                    f"or a multiple of {FSX_LUSTRE_STEP_GIB} GiB, not {cap}"
                )
            if tput is not None and tput not in FSX_THROUGHPUTS:
                yield f"{path}.throughputPerTiB: FSx allows {', '.join(map(str, FSX_THROUGHPUTS))} MB/s per TiB, not {tput}"
        if cloud == "gcp":
            if tput is not None and tput not in GCP_LUSTRE_TIERS:
                yield (
                    f"{path}.throughputPerTiB: Managed Lustre allows "
                    f"{', '.join(map(str, GCP_LUSTRE_THROUGHPUTS))} MB/s per TiB, not {tput}"
                )
            elif cap is not None and (problem := gcp_lustre_capacity_problem(cap, tput)):
                yield f"{path}.capacityGiB: {problem}"
    else:
        if st.throughput_per_tib is not None:
            yield f"{path}.throughputPerTiB: only for kind lustre"
        if st.import_path or st.export_path:
            yield f"{path}.importPath: S3 data repositories are for kind lustre (FSx)"
        if cloud == "gcp" and st.capacity_gib is not None:
            if problem := filestore_capacity_problem(st.tier or FILESTORE_DEFAULT_TIER, st.capacity_gib):
                yield f"{path}.capacityGiB: {problem}"
        if cloud == "aws" and st.capacity_gib is not None:
            yield f"{path}.capacityGiB: EFS grows with its data and takes no capacity"
        if cloud == "kubernetes":
            if not st.server:
                yield f"{path}.server: required for nfs on an existing cluster (the NFS server's address)"
            if not st.path:
                yield f"{path}.path: required for nfs on an existing cluster (the exported path)"


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


def _check_aws_endpoint(spec: PlatformSpec, root: str) -> Iterable[str]:
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


def _check_gcp(spec: PlatformSpec, root: str) -> Iterable[str]:
    net = spec.network
    byo = bool(net.network or net.subnetwork)
    if bool(net.network) != bool(net.subnetwork):
        yield f"{root}.network: network and subnetwork go together when bringing your own network"
    if not byo:
        for key in ("podsRangeName", "servicesRangeName"):
            if _alias_set(net, key):
                yield f"{root}.network.{key}: only with a bring-your-own network/subnetwork"
    elif net.private_services_cidr is not None:
        yield (
            f"{root}.network.privateServicesCidr: only for a network trainplane creates; a bring-your-own "
            "network brings its own private services access"
        )
    if bool(net.pods_range_name) != bool(net.services_range_name):
        yield f"{root}.network: podsRangeName and servicesRangeName go together"
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
    if spec.region:
        for i, pool in enumerate(spec.node_pools):
            for j, z in enumerate(pool.zones):
                if not z.startswith(spec.region + "-"):
                    yield f"{root}.nodePools[{i}].zones[{j}]: {z!r} is not a zone of region {spec.region}"
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


def _alias_set(obj: Spec, alias: str) -> bool:
    return any(_alias(type(obj), f) == alias for f in obj.model_fields_set)


def _check_teams(spec: PlatformSpec, root: str, check_quota: bool = True) -> Iterable[str]:
    storage_names = {s.name for s in spec.storage}
    ceiling = spec.max_gpus()
    for i, team in enumerate(spec.teams):
        path = f"{root}.teams[{i}]"
        if check_quota and team.gpu_quota > ceiling:
            yield (
                f"{path}.gpuQuota: {team.gpu_quota} GPUs is more than the platform's maximum of {ceiling} "
                "(sum of gpusPerNode x maxNodes over GPU pools)"
            )
        for j, name in enumerate(team.storage or []):
            if name not in storage_names:
                known = ", ".join(sorted(storage_names)) or "none defined"
                yield f"{path}.storage[{j}]: {name!r} is not a storage of this platform; known: {known}"


def _check_gpu_operator(spec: PlatformSpec, root: str) -> Iterable[str]:
    op = spec.gpu_operator
    if op.time_slicing is not None and op.mig.strategy != "none":
        yield (
            f"{root}.gpuOperator.timeSlicing: time-slicing cannot be combined with MIG "
            f"(mig.strategy is {op.mig.strategy}); choose one way of sharing GPUs"
        )
    if op.mig.profile and op.mig.strategy == "none":
        yield f"{root}.gpuOperator.mig.profile: needs mig.strategy single or mixed"


# ---- turning pydantic's errors into one readable line each -------------------------------------


def _loc_path(root: str, loc: tuple[Any, ...]) -> str:
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_./-]+", str(part)):
            out += f".{part}"
        else:  # keys with spaces or control characters are shown quoted, so the line stays one line
            out += f"[{str(part)!r}]"
    return out


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The spec model that owns the last key of `loc`, to suggest the key that was meant."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {(f.alias or n): f for n, f in current.model_fields.items()}
        info = fields.get(part)
        if info is None:
            return None
        current = _inner_model(info.annotation)
        if current is None:
            return None
    return current


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def format_validation_error(err: ValidationError, model: type[BaseModel], root: str) -> list[str]:
    lines: list[str] = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        path = _loc_path(root, loc)
        kind = e["type"]
        given = e.get("input")
        if kind == "extra_forbidden":
            owner = _model_at(model, loc)
            known = sorted((f.alias or n) for n, f in owner.model_fields.items()) if owner else []
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else (f"; known: {', '.join(known)}" if known else "")
            )
            lines.append(f"{path}: unknown key{hint}")
        elif kind == "missing":
            lines.append(f"{path}: required")
        elif kind == "literal_error":
            allowed = e.get("ctx", {}).get("expected", "")
            lines.append(f"{path}: {given!r} is not allowed; allowed: {allowed}")
        elif kind == "value_error":
            lines.append(f"{path}: {str(e['msg']).removeprefix('Value error, ')}")
        elif kind == "string_pattern_mismatch":
            pattern = e["ctx"]["pattern"]
            wanted = PATTERN_WORDS.get(pattern, f"the form {pattern}")
            lines.append(f"{path}: {given!r} is not valid here; expected {wanted}")
        else:
            shown = f" (got {given!r})" if given is not None and not isinstance(given, dict | list) else ""
            lines.append(f"{path}: {e['msg']}{shown}")
    return lines


# ---- training-job stacks ------------------------------------------------------------------------


class NodeRange(Spec):
    min: int = Field(ge=1, le=1000)
    max: int = Field(ge=1, le=1000)


class JobVolume(Spec):
    storage: str = Field(pattern=_DNS_LABEL)
    mount_path: str = Field(pattern=r"^/[^\s]*$")
    read_only: bool = False
    sub_path: str | None = None


class JobCheckpoint(Spec):
    # s3://auto / gs://auto: the platform's checkpoint bucket, prefix = job name; or s3://, gs:// URIs;
    # or a path under one of the job's writable volumes (Lustre/NFS).
    uri: str
    interval_steps: int = Field(default=500, ge=1)
    keep: int = Field(default=3, ge=2)
    async_save: bool = True


class JobResources(Spec):
    cpu: float | None = Field(default=None, gt=0)
    memory_gib: float | None = Field(default=None, alias="memoryGiB", gt=0)
    shm_gib: float | None = Field(default=None, alias="shmGiB", gt=0)


class JobSpec(Spec):
    platform_stack: str = Field(pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$")
    # The Job name; pods are <name>-<index>, so keep it short enough for hostnames.
    name: str = Field(pattern=_DNS_LABEL, max_length=40)
    team: str = Field(pattern=_DNS_LABEL)
    image: str = Field(pattern=r"^[^\s]+$")
    node_pool: str = Field(pattern=_DNS_LABEL)
    nodes: NodeRange
    gpus_per_node: int = Field(ge=1, le=16)
    trainer: dict[str, Any] = Field(default_factory=dict)
    volumes: list[JobVolume] = Field(default_factory=list)
    checkpoint: JobCheckpoint | None = None
    spot: bool = False
    max_restarts: int = Field(default=10, ge=0, le=1000)
    resources: JobResources = JobResources()
    env: dict[str, str] = Field(default_factory=dict)
    grace_period_seconds: int | None = Field(default=None, ge=10, le=3600)
    dataloader_workers: int = Field(default=4, ge=0, le=64)

    @classmethod
    def load(cls, raw: Any, root: str = "job") -> JobSpec:
        """Validate a raw job object on its own; `check_job` then checks it against the platform."""
        return _load_checked(cls, raw, root, _check_job_alone)


def _check_job_alone(job: JobSpec, root: str) -> Iterable[str]:
    if job.nodes.min > job.nodes.max:
        yield f"{root}.nodes.min: {job.nodes.min} is greater than nodes.max {job.nodes.max}"
    mounts = [v.mount_path for v in job.volumes]
    for dup in sorted(_duplicates(mounts)):
        yield f"{root}.volumes: mountPath {dup!r} is used more than once"
    for i, v in enumerate(job.volumes):
        if v.mount_path in ("/", "/dev", "/dev/shm", "/proc", "/sys", "/etc", "/config"):
            yield f"{root}.volumes[{i}].mountPath: {v.mount_path} is reserved in the trainer container"
    for key in job.env:
        if key.startswith("TRAINPLANE_") or key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            yield f"{root}.env.{key}: set by trainplane itself; configure it through the job's keys"
    if job.checkpoint is not None:
        uri = job.checkpoint.uri
        if "://" in uri and not re.match(r"^(s3|gs)://[a-z0-9][a-z0-9._-]{1,62}(/.*)?$", uri):
            yield f"{root}.checkpoint.uri: {uri!r} is not an s3:// or gs:// URI (or s3://auto, gs://auto, or a path)"
        elif "://" not in uri and not uri.startswith("/"):
            yield f"{root}.checkpoint.uri: {uri!r} must be s3://auto, gs://auto, an s3:// or gs:// URI, or an absolute path"
        elif uri.startswith("/") and not any(
            uri == v.mount_path or uri.startswith(v.mount_path.rstrip("/") + "/")
            for v in job.volumes
            if not v.read_only
        ):
            writable = ", ".join(v.mount_path for v in job.volumes if not v.read_only) or "none"
            yield (
                f"{root}.checkpoint.uri: {uri} is not under a writable volume of this job "
                f"(writable mountPaths: {writable}); checkpoints must outlive the pod"
            )


def check_job(job: JobSpec, platform: Mapping[str, Any], root: str = "job") -> list[str]:
    """Check a job against its platform stack's outputs (team, pool, GPUs, storage, object store)."""
    problems: list[str] = []
    pools = {p["name"]: p for p in platform.get("nodePools") or []}
    teams = {t["name"]: t for t in platform.get("teams") or []}
    ref = job.platform_stack
    team = teams.get(job.team)
    if team is None:
        problems.append(
            f"{root}.team: {job.team!r} is not a team of platform {ref}; known: {', '.join(sorted(teams)) or 'none'}"
        )
    pool = pools.get(job.node_pool)
    if pool is None:
        problems.append(
            f"{root}.nodePool: {job.node_pool!r} is not a node pool of platform {ref}; "
            f"known: {', '.join(sorted(pools)) or 'none'}"
        )
    else:
        if not pool.get("gpu"):
            problems.append(
                f"{root}.nodePool: {job.node_pool} is a CPU pool; a training job needs a GPU pool"
            )
        elif job.gpus_per_node > int(pool.get("gpusPerNode") or 0):
            problems.append(
                f"{root}.gpusPerNode: {job.gpus_per_node} is more than the {int(pool['gpusPerNode'])} GPUs "
                f"per node of pool {job.node_pool}"
            )
        if job.nodes.max > int(pool.get("maxNodes") or 0):
            problems.append(
                f"{root}.nodes.max: {job.nodes.max} nodes is more than pool {job.node_pool} "
                f"can scale to ({int(pool['maxNodes'])})"
            )
        capacity = pool.get("capacity")
        if capacity == "spot" and not job.spot:
            others = [
                p for p, v in pools.items() if v.get("gpu") == pool.get("gpu") and v.get("capacity") != "spot"
            ]
            hint = f"pick on-demand pool {others[0]}" if others else "set spot: true to accept preemption"
            problems.append(f"{root}.spot: pool {job.node_pool} is spot capacity; {hint}")
        if capacity != "spot" and job.spot:
            problems.append(
                f"{root}.spot: pool {job.node_pool} is on-demand capacity; set spot: false or pick a spot pool"
            )
        if team is not None and pool.get("gpu"):
            # Kueue may lend idle quota, but a job that cannot start inside its team's own quota would
            # wait for other teams to be idle; refuse it up front.
            quota = int(team.get("gpuQuota") or 0)
            if job.gpus_per_node * job.nodes.min > quota:
                problems.append(
                    f"{root}.nodes.min: {job.nodes.min} nodes x {job.gpus_per_node} GPUs is more than team "
                    f"{job.team}'s GPU quota of {quota}"
                )
    if team is not None:
        allowed = set(team.get("storage") or [])
        for i, v in enumerate(job.volumes):
            if v.storage not in allowed:
                problems.append(
                    f"{root}.volumes[{i}].storage: team {job.team} has no storage {v.storage!r} on platform {ref}; "
                    f"it has: {', '.join(sorted(allowed)) or 'none'}"
                )
    if job.checkpoint is not None and "://" in job.checkpoint.uri:
        scheme = job.checkpoint.uri.split("://", 1)[0]
        store = platform.get("objectStore")
        if job.checkpoint.uri.endswith("://auto"):
            if store is None:
                problems.append(
                    f"{root}.checkpoint.uri: platform {ref} has no object storage; use a path on a writable volume"
                )
            elif scheme != store:
                problems.append(
                    f"{root}.checkpoint.uri: platform {ref} keeps checkpoints in {store}://; use {store}://auto"
                )
    return problems
