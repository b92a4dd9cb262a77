"""The platform stack's spec models (`trainplane:platform`), shared by the config schema and the components.

Models only hold the shape of the config; the rules that need the catalog or several keys live in
`components.spec.rules` (cloud-neutral) and in each cloud backend (its own keys).

Example:
    >>> spec = PlatformSpec.load({"cloud": "kubernetes", "cluster": {"name": "lab", "context": "lab"},
    ...                           "nodePools": [{"name": "a100", "selector": {"gpu": "a100"},
    ...                                          "gpu": "A100-80GB", "gpusPerNode": 8}]})
    >>> spec.max_gpus()
    8
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AwareDatetime, Field, field_validator

from components.catalog import catalog
from components.k8s_support import default_minor
from components.spec.base import (
    COST_CENTER,
    DNS_LABEL,
    K8S_MINOR,
    MINUTES_OR_HOURS,
    Spec,
    load_checked,
)
from components.spec.gpu_health import (  # noqa: F401 (re-exported: the platform's models in one place)
    APPLICATION_XIDS,
    GpuDiagnosticSpec,
    GpuHealthSpec,
    QuarantineSpec,
    StragglerSpec,
)
from components.spec.images import AgentImagesSpec
from components.spec.sections import compose, extended, installed_sections, mixins, pattern_words

if TYPE_CHECKING:
    from components.catalog import MachineShape

# How a pool gets its machines (docs/configuration.md "Capacity"): bought by the hour, spot, an existing
# reservation (AWS ODCR, GCP reservation), an AWS Capacity Block for ML, or GKE's Dynamic Workload Scheduler
# (flex-start, queued provisioning).
Capacity = Literal["on-demand", "spot", "reservation", "capacity-block", "flex-start", "queued"]

# The tag/label keys the platform's ownership keys (`team`, `costCenter`) write on every cloud resource
# that takes tags or labels; the policy pack (policy/) requires them.
TEAM_TAG = "team"
COST_CENTER_TAG = "cost-center"


# Each installed cloud's section of the spec (components/<cloud>/spec_keys.py, components/spec/sections.py):
# the models below are the neutral bases; ClusterSpec, NetworkSpec, NodePoolSpec, StorageSpec and
# PlatformSpec are each base composed with every cloud's section of it.
SECTIONS = installed_sections()
pattern_words(SECTIONS)


def sections_of(section: str) -> tuple[type[Spec], ...]:
    return mixins(SECTIONS, section)


class _CloudKeys:
    """For the type checker only: a composed model also has its clouds' keys (components/<cloud>/
    spec_keys.py), which this module cannot name (no cloud is named outside its package,
    tests/unit/repo/test_architecture.py); they read as Any, as pydantic types a model's extra fields. At
    runtime the keys are real fields of the composed model."""

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...


class NeutralCluster(Spec):
    name: str = Field(pattern=DNS_LABEL, max_length=40)
    # Default: the newest minor in standard support today on every cloud's calendar (components/k8s_support.py).
    kubernetes_version: str = Field(default_factory=default_minor, pattern=K8S_MINOR)

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _quoted_version(cls, v: Any) -> Any:
        """YAML reads an unquoted 1.30 as the number 1.3: say so, rather than "got 1.3"."""
        if isinstance(v, float | int) and not isinstance(v, bool):
            major, _, minor = f"{v}".partition(".")
            meant = f"{major}.{minor.ljust(2, '0')}" if minor else f"{major}"
            raise ValueError(
                f"{v} is a number, not a version: YAML reads 1.30 as 1.3; write it in quotes: "
                f'kubernetesVersion: "{meant}"'
            )
        return v


class NeutralNetwork(Spec):
    cidr: ipaddress.IPv4Network = ipaddress.IPv4Network("10.0.0.0/16")
    # Whether the nodes reach the internet (a NAT or public addresses). None: as the platform builds it
    # (its own network has a NAT; see infra/verify/checks/egress.py for a brought one). false: only
    # private endpoints, so every agent's image must come by digest from a private registry
    # (`images`) and nothing may install at start; `trainplane verify` fails it otherwise.
    internet_egress: bool | None = None


if TYPE_CHECKING:

    class ClusterSpec(NeutralCluster, _CloudKeys): ...

    class NetworkSpec(NeutralNetwork, _CloudKeys): ...

else:
    ClusterSpec = compose("ClusterSpec", NeutralCluster, sections_of("Cluster"))
    NetworkSpec = compose("NetworkSpec", NeutralNetwork, sections_of("Network"))


class Taint(Spec):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class NeutralNodePool(Spec):
    name: str = Field(pattern=DNS_LABEL, max_length=30)
    gpu: str | None = None
    gpus_per_node: int | None = Field(default=None, ge=1, le=16)
    capacity: Capacity = "on-demand"
    # capacity reservation / capacity-block: the reservation the pool draws from, which must already exist
    # (AWS: an On-Demand Capacity Reservation or Capacity Block id, cr-...; GCP: a reservation name,
    # name/reservationBlocks/<block>, or projects/<project>/reservations/<name> for a shared one).
    reservation: str | None = Field(default=None, min_length=1, max_length=300)
    # capacity-block: the block's start and end (ISO 8601 with a time zone, as EC2 shows them): Kueue
    # admits jobs to the block's flavor only between them (components/incluster/block_window.py).
    block_start: AwareDatetime | None = None
    block_end: AwareDatetime | None = None
    # reservation / capacity-block: the team its idle share is charged to in the cost rules and
    # `trainplane cost` (components/incluster/cost_rules.py); none: shown as unassigned.
    owner: str | None = None
    min_nodes: int = Field(default=0, ge=0, le=1000)
    max_nodes: int | None = Field(default=None, ge=1, le=1000)
    disk_size_gib: int | None = Field(default=None, alias="diskSizeGiB", ge=20, le=16384)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    zones: list[str] = Field(default_factory=list)
    placement: Literal["spread", "compact"] = "spread"

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


class NeutralStorage(Spec):
    name: str = Field(pattern=DNS_LABEL, max_length=30)
    kind: Literal["lustre", "nfs"]
    capacity_gib: int | None = Field(default=None, alias="capacityGiB", ge=1)
    throughput_per_tib: int | None = Field(default=None, alias="throughputPerTiB")


if TYPE_CHECKING:

    class NodePoolSpec(NeutralNodePool, _CloudKeys): ...

    class StorageSpec(NeutralStorage, _CloudKeys): ...

else:
    NodePoolSpec = compose("NodePoolSpec", NeutralNodePool, sections_of("NodePool"))
    StorageSpec = compose("StorageSpec", NeutralStorage, sections_of("Storage"))


class ObservabilitySpec(Spec):
    grafana: bool = True
    loki: bool = False
    retention_days: int = Field(default=15, ge=1, le=3650)
    prometheus_storage_gib: int = Field(default=100, alias="prometheusStorageGiB", ge=8)
    log_retention_days: int = Field(default=14, ge=1, le=3650)
    alerts: bool = True


class IdleSpec(Spec):
    """Idle reclaim of a team's jobs (contract/idle.py): a job whose GPUs average below
    `gpuUtilBelow` percent for `for` gets a Warning Event and the TrainplaneJobGpuIdle alert; with
    `action: requeue` the GPU health controller also deactivates its Kueue Workload (the trainer checkpoints
    on the SIGTERM that follows) and puts it back in its queue once its pods are gone."""

    gpu_util_below: float = Field(default=5, gt=0, lt=100)
    # A Prometheus duration in minutes or hours, e.g. 30m or 2h (the alert's `for` and the rule's window).
    for_: str = Field(default="30m", alias="for", pattern=MINUTES_OR_HOURS)
    action: Literal["alert", "requeue"] = "alert"
    # Jobs carrying any of these labels (key: value) are exempt, besides trainplane.dev/idle-exempt: "true".
    exempt_labels: dict[str, str] = Field(default_factory=dict)

    @property
    def minutes(self) -> int:
        return int(self.for_[:-1]) * (60 if self.for_.endswith("h") else 1)


class TeamSpec(Spec):
    name: str = Field(pattern=DNS_LABEL, max_length=40)
    gpu_quota: int = Field(ge=0)
    cpu_quota: int | None = Field(default=None, ge=1)
    memory_quota_gib: int | None = Field(default=None, alias="memoryQuotaGiB", ge=1)
    storage: list[str] | None = None  # names of platform storage the team mounts; None: all of it
    admins: list[str] = Field(default_factory=list)
    # What a straggler in this team's jobs does to its node (gpuHealth.stragglers sets when a rank is one):
    # `alert` (the default) raises TrainplaneStragglerNode; `quarantine` also has the GPU health controller
    # quarantine the node, so the restarted job lands elsewhere. Opt-in: a slow rank is often the data.
    stragglers: Literal["alert", "quarantine"] = "alert"
    # Idle reclaim of the team's jobs; None: no idle policy (the platform-wide GpuIdleButAllocated alert only).
    idle: IdleSpec | None = None
    # What this team's namespace is charged to (label trainplane.dev/cost-center); default: the platform's.
    cost_center: str | None = Field(default=None, pattern=COST_CENTER)


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


# Kueue's own default waitForPodsReady timeout (kueue v0.19.2 apis/config/v1beta2/defaults.go
# DefaultWaitForPodsReadyTimeout), the least trainplane accepts: a GPU node from zero (VM, driver, fabric
# installer, node-start diagnostic, a multi-GB image) takes minutes to tens of minutes.
PODS_READY_FLOOR_MINUTES = 30


class PodsReadySpec(Spec):
    """Kueue's all-or-nothing admission (waitForPodsReady): how long an admitted job's pods may take."""

    # From admission until every pod is ready; then Kueue evicts and requeues the job.
    timeout_minutes: int = Field(default=PODS_READY_FLOOR_MINUTES, ge=PODS_READY_FLOOR_MINUTES, le=1440)
    # After a running job lost a pod (its node reclaimed or repaired) until all are ready again; the
    # replacement node comes from zero, so at least `timeoutMinutes` (default: the same, Kueue's default,
    # defaults.go: RecoveryTimeout = Timeout).
    recovery_timeout_minutes: int | None = Field(default=None, ge=PODS_READY_FLOOR_MINUTES, le=1440)
    # Kueue admits nothing else while an admitted job's pods are not all ready (waitForPodsReady
    # .blockAdmission). Default: on (two half-started multi-node jobs cannot deadlock on GPUs), but off on a
    # fleet manager, where it would hold every team's jobs behind one job that no worker admits.
    block_admission: bool | None = None

    @property
    def recovery_minutes(self) -> int:
        return self.recovery_timeout_minutes or self.timeout_minutes


class QueueingSpec(Spec):
    enabled: bool = True
    cohort: str = Field(default="gpu-cohort", pattern=DNS_LABEL)
    borrowing: bool = True
    pods_ready: PodsReadySpec = PodsReadySpec()
    # This platform is a fleet's MultiKueue manager (components/spec/fleet.py): its Kueue runs the
    # MultiKueue admission check and dispatches each job to a worker; it has no teams of its own (the
    # fleet stack makes the team queues on it).
    fleet_manager: bool = False
    # The MultiKueue dispatcher of a manager (Kueue Configuration multiKueue.dispatcherName): Incremental
    # nominates workers in the fleet's dispatch order a few at a time; AllAtOnce copies a job to every
    # worker. A fleet on this manager must name the same (its dispatch.dispatcher; verify checks).
    fleet_dispatcher: Literal["Incremental", "AllAtOnce"] = "Incremental"


class PriceOverride(Spec):
    """Prices per node-hour of one machine type; what is left out comes from the catalog."""

    on_demand_hourly: float | None = Field(default=None, gt=0)
    spot_hourly: float | None = Field(default=None, gt=0)
    # What a reservation or Capacity Block of this machine costs per node-hour, paid whether used or not
    # (a Capacity Block's price is fixed at purchase); default: the on-demand price (ODCRs and GCP
    # reservations bill at on-demand rates).
    reserved_hourly: float | None = Field(default=None, gt=0)


class PricingSpec(Spec):
    spot_fraction: float | None = Field(default=None, gt=0, le=1)
    overrides: dict[str, PriceOverride] = Field(default_factory=dict)


class NeutralPlatform(Spec):
    # The backend that builds the cluster: a name registered in components.backends (entry points).
    cloud: str
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
    images: AgentImagesSpec = AgentImagesSpec()
    tags: dict[str, str] = Field(default_factory=dict)
    # Who owns and pays for the platform's shared resources: tags `team` and `cost-center` on every cloud
    # resource that takes tags (GCP: labels), labels on its Kubernetes namespaces (`resource_tags`).
    team: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
    cost_center: str | None = Field(default=None, pattern=COST_CENTER)

    @field_validator("cloud")
    @classmethod
    def _registered_cloud(cls, v: str) -> str:
        from components.backends import ENTRY_POINT_GROUP, backend_names

        names = backend_names()
        if not names:
            raise ValueError(
                f"{v!r} is not allowed: no cloud backend is installed (entry points {ENTRY_POINT_GROUP}); "
                "install trainplane again (pip install -e .) to write its entry points"
            )
        if v not in names:
            allowed = (
                ", ".join(repr(n) for n in names[:-1]) + f" or {names[-1]!r}"
                if len(names) > 1
                else repr(names[0])
            )
            raise ValueError(f"{v!r} is not allowed; allowed: {allowed}")
        return v

    @classmethod
    def load(cls, raw: Any, root: str = "platform") -> PlatformSpec:
        """Validate a raw stack object; raise ConfigError with one line per problem."""
        from components.spec.rules import check_platform

        return load_checked(loaded_model(), raw, root, check_platform)

    def resource_tags(self) -> dict[str, str]:
        """The stack's `tags` with the ownership keys as tags (`team`, `costCenter` win over `tags`)."""
        owner = {TEAM_TAG: self.team, COST_CENTER_TAG: self.cost_center}
        return {**self.tags, **{k: v for k, v in owner.items() if v is not None}}

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
        return list(getattr(self, "zones", None) or [])


if TYPE_CHECKING:

    class PlatformSpec(NeutralPlatform, _CloudKeys): ...

else:
    PlatformSpec = compose("PlatformSpec", NeutralPlatform, sections_of("Platform"))


def loaded_model() -> type[PlatformSpec]:
    """The model a stack loads with: PlatformSpec, and on top of it the sections of the backends a program
    registered (their `spec_keys`) that are not installed ones (components/spec/sections.py `extended`)."""
    from components.backends import backends

    extra = tuple(
        dict.fromkeys(s for b in backends() if (s := getattr(b, "spec_keys", None)) and s not in SECTIONS)
    )
    if not extra:
        return PlatformSpec
    models = (
        ("Cluster", ClusterSpec),
        ("Network", NetworkSpec),
        ("NodePool", NodePoolSpec),
        ("Storage", StorageSpec),
    )
    return extended(PlatformSpec, models, extra)  # type: ignore[return-value]


def machine_of(cloud: str, pool: NodePoolSpec) -> MachineShape | None:
    """The catalog shape a pool's nodes are made of, as the cloud's backend knows it (None: unknown)."""
    from components.backends import backend

    return backend(cloud).machine_of(pool)
