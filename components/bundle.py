"""The typed bundle a cloud layer hands to the in-cluster layer, and the names both sides agree on.

The in-cluster layer (GPU operator, volumes, observability, tenancy, queueing, jobs) never branches on the
cloud beyond `CloudProfile`; everything else it needs about the cluster arrives here. Its pools and file
systems (`NodePoolInfo`, `StorageHandle`) are the models the platform stack exports (components.outputs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi

# The pool and storage records are the platform outputs' own models: what a backend hands the in-cluster
# layer here is what the platform stack exports and a job stack parses back (components.outputs).
from components.outputs import NodePoolInfo as NodePoolInfo
from components.outputs import PodFabric as PodFabric
from components.outputs import StorageHandle as StorageHandle
from components.outputs import TaintInfo as TaintInfo
from components.spec import NodePoolSpec, TeamSpec

# Every GPU node carries this taint, on every cloud, so only pods that ask for GPUs land there.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NoSchedule"

# Labels trainplane puts on the nodes of every pool it creates (selectors and Kueue flavors use them).
POOL_LABEL = "trainplane.dev/pool"
GPU_LABEL = "trainplane.dev/gpu"
CAPACITY_LABEL = "trainplane.dev/capacity"

# Each team runs its jobs in its own namespace under one service account wired to cloud identity.
TEAM_SERVICE_ACCOUNT = "trainer"
# Where the observability stack runs, and the service account Loki uses to reach its bucket.
MONITORING_NAMESPACE = "monitoring"
LOKI_SERVICE_ACCOUNT = "loki"

# Who owns and pays for a namespace: on every namespace the platform makes (a team's: the team and its
# cost center; the platform's own: the platform's `team` and `costCenter`). Not trainplane.dev/team: Kueue
# manages the jobs of every namespace that carries that one (kueue_objects.managedJobsNamespaceSelector).
OWNER_LABEL = "trainplane.dev/owner"
COST_CENTER_LABEL = "trainplane.dev/cost-center"


def owner_labels(team: str | None, cost_center: str | None) -> dict[str, str]:
    """The ownership labels of a namespace; a key left unset in the spec is left off (the policy pack
    reports it), never written empty."""
    labels = {OWNER_LABEL: team, COST_CENTER_LABEL: cost_center}
    return {k: v for k, v in labels.items() if v}


def team_namespace(team: TeamSpec | str) -> str:
    return team if isinstance(team, str) else team.name


def team_local_queue(team: TeamSpec | str) -> str:
    """The Kueue LocalQueue in a team's namespace that its jobs name in `kueue.x-k8s.io/queue-name`."""
    return f"{team_namespace(team)}-gpus"


def gpu_taint_tolerations(
    pools: Sequence[NodePoolInfo], keys: Iterable[str] = (), effect: str = "NoSchedule"
) -> list[dict[str, str]]:
    """Tolerations a DaemonSet that must run on every GPU node needs: every taint of every GPU pool, each
    with its own effect (a NoExecute taint is not tolerated by a NoSchedule toleration: core/v1 Toleration
    matches the effect when one is given), plus `keys` (taints of ours) with `effect`."""
    wanted = {(k, effect) for k in keys} | {(t.key, t.effect) for p in pools if p.gpu for t in p.taints}
    return [{"key": k, "operator": "Exists", "effect": e} for k, e in sorted(wanted)]


@dataclass(frozen=True)
class NetworkEndpoint:
    """An address and port pods must reach (NetworkPolicy egress names it as an ipBlock)."""

    cidr: str
    port: int
    protocol: Literal["TCP", "UDP"] = "TCP"


@dataclass(frozen=True, kw_only=True)
class SystemObject:
    """A Kubernetes object a cloud needs beside the GPU operator (e.g. GKE's COS driver installer).

    The in-cluster layer registers it as `<operator component>-<resource_name>` of the typed class for
    (api_version, kind) and, with `gates_operator`, makes the operator release wait for it.
    """

    resource_name: str
    api_version: str
    kind: str
    # metadata without a namespace lands in the GPU operator's namespace
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]
    gates_operator: bool = False


@dataclass(frozen=True, kw_only=True)
class CsiChart:
    """A CSI driver the in-cluster layer installs from a Helm chart when a storage handle names it."""

    driver: str  # the CSI driver name, as StorageHandle.csi_driver spells it
    resource_name: str  # suffix of the Pulumi resource name of the release
    chart: str  # key in components.charts.CHARTS
    release_name: str
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CloudProfile:
    """What the in-cluster layer must know about the cloud underneath, without naming it."""

    # A label for people (plan output, docs): eks, gke, kubernetes, ...
    name: str
    # Object storage scheme of the platform's buckets ("s3", "gs"), None without buckets.
    object_store: str | None = None
    # Loki's object storage on this cloud, as the Loki chart's `loki.storage` values less the bucket names
    # (`type` and that type's block, e.g. its region); empty: Loki keeps its chunks on its volume.
    loki_storage: Mapping[str, Any] = field(default_factory=dict)
    # Annotation that binds a Kubernetes service account to cloud identity, per team.
    identity_annotation: str | None = None
    # Where pods get their cloud credentials from, when that is a node-local endpoint the team's
    # default-deny egress must open (GKE's metadata server); empty when identity needs no such hop.
    identity_endpoints: tuple[NetworkEndpoint, ...] = ()
    # Helm values of the GPU operator that differ on this cloud (driver, toolkit, CDI), merged over the
    # cloud-neutral ones.
    gpu_operator_values: Mapping[str, Any] = field(default_factory=dict)
    # Objects the GPU stack needs on this cloud (driver installers, quotas for system priority classes).
    system_objects: tuple[SystemObject, ...] = ()
    # Objects the pools' GPU fabrics need in the cluster (network objects, NCCL plugin installer DaemonSets),
    # registered as given: a namespaced kind names its namespace, a cluster-scoped one none. Kinds outside
    # the built-in ones are custom resources whose CRDs the cloud installs (e.g. GKE multi-networking).
    fabric_objects: tuple[SystemObject, ...] = ()
    # CSI drivers installed in the cluster when a storage handle uses them (add-ons are the cloud layer's).
    csi_charts: tuple[CsiChart, ...] = ()
    # Seconds between SIGTERM and SIGKILL for training pods when a job names none (preemption notice).
    preemption_grace_seconds: int = 120
    # Helm values of the NVIDIA DRA driver (chart dra-driver-nvidia-gpu) that differ on this cloud, merged
    # over the neutral ones when a pool has rack-scale GPUs (NodePoolInfo.rack): where the node image keeps
    # the GPU driver (`nvidiaDriverRoot`), and whatever else the cloud's images need.
    dra_driver_values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterBundle:
    """Everything the cloud layer hands over once the cluster exists."""

    name: str
    region: str | None
    provider: pulumi.ProviderResource
    kubeconfig: pulumi.Output[str]
    profile: CloudProfile
    node_pools: tuple[NodePoolInfo, ...]
    storage: tuple[StorageHandle, ...] = ()
    # purpose ("checkpoints", "logs") -> bucket name
    buckets: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # team -> value of profile.identity_annotation (IAM role ARN / Google service account email)
    team_identities: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # The same for Loki's service account (MONITORING_NAMESPACE/LOKI_SERVICE_ACCOUNT), None without buckets.
    loki_identity: pulumi.Input[str] | None = None
    # Resources in-cluster objects must wait for (e.g. node groups that run the system pods).
    ready: tuple[pulumi.Resource, ...] = ()
    # The StorageClass every dynamically provisioned volume of the platform names explicitly (Prometheus,
    # Alertmanager, Loki...). The cloud layer makes sure it exists and its provisioner is installed (EKS:
    # the EBS CSI add-on and an encrypted gp3 class; GKE: a class GKE provides). None only on existing
    # clusters without `cluster.storageClass`: the cluster's default class, which verify checks live.
    storage_class: str | None = None
    # Resources that must exist before anything asks for a volume of `storage_class` (CSI add-on, class).
    storage_ready: tuple[pulumi.Resource, ...] = ()
    # The ownership labels of the platform's own namespaces (owner_labels of the platform spec), set by the
    # in-cluster layer from the spec.
    owner_labels: Mapping[str, str] = field(default_factory=dict)


def pool_labels(pool: NodePoolSpec) -> dict[str, str]:
    """The labels trainplane sets on the nodes of a pool it creates (the user's own labels win)."""
    labels = {POOL_LABEL: pool.name, CAPACITY_LABEL: pool.capacity}
    if pool.gpu:
        labels[GPU_LABEL] = pool.gpu
    return {**labels, **pool.labels}


def gpu_taint() -> TaintInfo:
    return TaintInfo(key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect=GPU_TAINT_EFFECT)
