"""The typed bundle a cloud layer hands to the in-cluster layer, and the names both sides agree on.

The in-cluster layer (GPU operator, volumes, observability, tenancy, queueing, jobs) never branches on the
cloud beyond `CloudProfile`; everything else it needs about the cluster arrives here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi

from components.spec import Capacity, NodePoolSpec, TeamSpec

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


def team_namespace(team: TeamSpec | str) -> str:
    return team if isinstance(team, str) else team.name


def team_local_queue(team: TeamSpec | str) -> str:
    """The Kueue LocalQueue in a team's namespace that its jobs name in `kueue.x-k8s.io/queue-name`."""
    return f"{team_namespace(team)}-gpus"


@dataclass(frozen=True)
class TaintInfo:
    key: str
    value: str
    effect: str

    def as_k8s(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


def gpu_taint_tolerations(
    pools: Sequence[NodePoolInfo], keys: Iterable[str] = (), effect: str = "NoSchedule"
) -> list[dict[str, str]]:
    """Tolerations a DaemonSet that must run on every GPU node needs: every taint of every GPU pool, each
    with its own effect (a NoExecute taint is not tolerated by a NoSchedule toleration: core/v1 Toleration
    matches the effect when one is given), plus `keys` (taints of ours) with `effect`."""
    wanted = {(k, effect) for k in keys} | {(t.key, t.effect) for p in pools if p.gpu for t in p.taints}
    return [{"key": k, "operator": "Exists", "effect": e} for k, e in sorted(wanted)]


@dataclass(frozen=True, kw_only=True)
class PodFabric:
    """How a training pod on a pool uses the pool's GPU-to-GPU fabric, set by the backend that built it.

    The in-cluster job builder applies it as given, without knowing the fabric: annotations on the pod
    (e.g. GKE multi-network interfaces), volumes and the trainer container's mounts (NCCL plugin
    libraries), and native sidecars (init containers with `restartPolicy: Always`, e.g. TCPXO's RxDM).
    The fabric's environment is `NodePoolInfo.pod_env` and its devices `NodePoolInfo.extended_resources`.
    """

    # "efa", "tcpx", "tcpxo", "rdma", ...: what the NCCL preflight's bandwidth floors are keyed by.
    kind: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    volumes: tuple[Mapping[str, Any], ...] = ()
    volume_mounts: tuple[Mapping[str, Any], ...] = ()
    sidecars: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class NodePoolInfo:
    """What a workload needs to know to land on a pool: its labels, taints and GPU shape."""

    name: str
    gpu: str | None
    gpus_per_node: int
    capacity: Capacity
    min_nodes: int
    max_nodes: int
    labels: Mapping[str, str]
    taints: tuple[TaintInfo, ...]
    machine_types: tuple[str, ...] = ()
    # Extended resources every node of the pool has besides GPUs, which a job pod must request to use
    # them (e.g. {"vpc.amazonaws.com/efa": 32} on p5: all of the node's EFA devices). The in-cluster layer
    # requests and queues them without knowing what they are.
    extended_resources: Mapping[str, int] = field(default_factory=dict)
    # Environment a training pod on this pool needs for the pool's GPU fabric (libfabric/NCCL settings for
    # EFA, ...), set by the cloud backend that built the fabric.
    pod_env: Mapping[str, str] = field(default_factory=dict)
    # The smallest machine type of the pool (vCPUs, GiB of memory): a pod sized for it fits on every
    # node. None where the machines are unknown (existing clusters).
    node_vcpus: int | None = None
    node_memory_gib: float | None = None
    # The reservation the pool draws from (capacity reservation / capacity-block: AWS ODCR or Capacity
    # Block id; GCP reservation name), as the stack names it.
    reservation: str | None = None
    # The pool's GPU fabric wiring for training pods; None when pods need nothing beyond GPUs (and TCP).
    fabric: PodFabric | None = None
    # Node labels of the pool's network topology, broadest first, ending with kubernetes.io/hostname
    # (GKE cloud.google.com/gce-topology-block|subblock|host, EKS topology.k8s.aws/network-node-layer-1..3);
    # the in-cluster layer makes a Kueue Topology of them. Empty: no topology-aware placement.
    topology_levels: tuple[str, ...] = ()
    # The Kueue ProvisioningRequest class the pool's nodes are requested through before a job is admitted
    # (GKE queued provisioning: "queued-provisioning.gke.io"); None: nodes come from the autoscaler.
    provisioning_class: str | None = None
    # Annotations every workload on this pool must carry (e.g. the max run duration of DWS capacity).
    workload_annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StorageHandle:
    """A shared file system, ready to be bound statically to a PersistentVolume (ReadWriteMany)."""

    name: str
    kind: Literal["lustre", "nfs"]
    capacity_gib: int
    # CSI driver name, or None for the in-tree `nfs` volume source (server + path).
    csi_driver: str | None
    volume_handle: pulumi.Input[str]
    volume_attributes: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    mount_options: tuple[str, ...] = ()
    # Address and ports clients connect to (outputs and docs). The client is the node, not the pod (the
    # kubelet and CSI node plugin mount it), so no pod NetworkPolicy is made from these.
    endpoint: pulumi.Input[str] | None = None
    ports: tuple[int, ...] = ()
    # Where a DNS-name endpoint's addresses lie (the file system's VPC). Unused since team NetworkPolicies
    # stopped opening file servers (they were the only reader); kept until the AWS layer stops setting it.
    endpoint_cidr: pulumi.Input[str] | None = None


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


def pool_labels(pool: NodePoolSpec) -> dict[str, str]:
    """The labels trainplane sets on the nodes of a pool it creates (the user's own labels win)."""
    labels = {POOL_LABEL: pool.name, CAPACITY_LABEL: pool.capacity}
    if pool.gpu:
        labels[GPU_LABEL] = pool.gpu
    return {**labels, **pool.labels}


def gpu_taint() -> TaintInfo:
    return TaintInfo(GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT)
