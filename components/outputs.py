"""PlatformOutputs: the typed contract between a platform stack and the job stacks that read it.

The platform stack writes it (`components.platform.platform_outputs`, exported key by key); a job stack
reads it back through a StackReference (`components.stack_outputs.read_platform`) and parses it here. Keys
keep the names deployed platforms already export; every key added later has a default, so a job stack
still reads a platform deployed before the key existed, and keys it does not know are ignored.

Example, parsing what a platform stack exported:

    >>> out = PlatformOutputs.model_validate({
    ...     "cloud": "aws", "clusterName": "ml-dev", "region": "us-east-1",
    ...     "nodePools": [{"name": "h100", "gpu": "H100", "gpusPerNode": 8, "capacity": "spot",
    ...                    "minNodes": 0, "maxNodes": 4, "machineTypes": ["p5.48xlarge"]}],
    ...     "teams": [{"name": "research", "namespace": "research", "serviceAccount": "trainer",
    ...                "localQueue": "research-gpus", "gpuQuota": 16}]})
    >>> pool = out.pool("h100")
    >>> (pool.node_vcpus, pool.node_memory_gib, out.preemption_grace_seconds)
    (192, 2048.0, 120)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pydantic import BaseModel, ConfigDict, Field, SkipValidation, model_validator
from pydantic.alias_generators import to_camel

from components.catalog import catalog
from components.spec import Capacity
from contract.rack import CHANNEL_DEVICE_CLASS, CLIQUE_LABEL, KUEUE_CHANNEL_RESOURCE, KUEUE_RDMA_NIC_RESOURCE

# What a job stack falls back to when neither the platform nor its backend says how long pods may take.
DEFAULT_GRACE_SECONDS = 120


class _Output(BaseModel):
    """camelCase keys as exported; unknown keys (from a newer platform) ignored; immutable.

    A key the camelCase generator does not spell (`GiB`) is given as validation_alias and
    serialization_alias, not `alias`: backends build the records by field name, and type checkers take
    `alias` for the name `__init__` accepts."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    def exports(self) -> dict[str, Any]:
        """The stack outputs, by their exported names; values may be pulumi Outputs on the writing side."""
        return {
            (info.serialization_alias or name): _export(getattr(self, name))
            for name, info in type(self).model_fields.items()
        }


def _export(value: Any) -> Any:
    if isinstance(value, _Output):
        return value.exports()
    if isinstance(value, list | tuple):
        return [_export(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _export(v) for k, v in value.items()}
    return value


# A value the platform stack may only know once deployed: a pulumi Output while the stack builds the record
# (not validated then, as pydantic cannot look inside it), the plain string a job stack reads back.
Deployed = SkipValidation[str | pulumi.Output[str]]


class TaintInfo(_Output):
    """A node taint of a pool (core/v1 Taint)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def as_k8s(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


class PodFabric(_Output):
    """How a training pod on a pool uses the pool's GPU-to-GPU fabric, set by the backend that built it.

    The in-cluster job builder applies it as given, without knowing the fabric: annotations on the pod
    (e.g. GKE multi-network interfaces), volumes and the trainer container's mounts (NCCL plugin
    libraries), and native sidecars (init containers with `restartPolicy: Always`, e.g. TCPXO's RxDM).
    The fabric's environment is `NodePoolInfo.pod_env` and its devices `NodePoolInfo.extended_resources`.
    """

    # "efa", "tcpx", "tcpxo", "rdma", ...: what the NCCL preflight's bandwidth floors are keyed by.
    kind: str
    annotations: dict[str, str] = Field(default_factory=dict)
    volumes: tuple[dict[str, Any], ...] = ()
    volume_mounts: tuple[dict[str, Any], ...] = ()
    sidecars: tuple[dict[str, Any], ...] = ()


class NodeReplacement(_Output):
    """How a quarantined GPU node of a pool gets replaced, as the backend that built the pool knows it. The
    GPU health controller hands a node that stays quarantined to it (controllers/node_return.py);
    the default, nothing, means a person must (an existing cluster's nodes). No answer here deletes an
    instance through a cloud API: that would need cloud credentials in the controller."""

    # Minutes the cluster autoscaler scaling this pool waits before removing an empty node (our status
    # taint and cordon do not keep it: kubernetes/autoscaler@cluster-autoscaler-1.33.1
    # core/scaledown/eligibility/eligibility.go), never below the pool's minNodes
    # (processors/nodes/pre_filtering_processor.go). None: no autoscaler scales the pool.
    autoscaler_unneeded_minutes: int | None = None
    # Node condition type -> minutes it must be False before the cloud repairs the node by itself (EKS node
    # repair: AcceleratedHardwareReady 10; GKE auto-repair: Ready about 10). Empty: no such repair.
    repair_conditions: dict[str, int] = Field(default_factory=dict)


class RackDomain(_Output):
    """The NVLink domain a pool's nodes belong to when it spans nodes (GB200/GB300 NVL72 racks).

    GPUs of different nodes reach each other over NVLink only through a ComputeDomain of the NVIDIA DRA
    driver (contract/rack.py); the backend that built the pool says how big one domain is, the in-cluster
    layer installs the driver and maps its channel class in Kueue, and the job builder gives each job one
    ComputeDomain and places its pods within one clique when they fit."""

    # GPUs and nodes of one NVLink domain (72 and 18 for an NVL72 rack of 4-GPU nodes).
    gpus: int
    nodes: int
    # The node label naming a node's clique (GPU Feature Discovery), a level of the pool's topology.
    clique_label: str = CLIQUE_LABEL
    # The DeviceClass of a workload's channel claim, and what Kueue counts it as (its deviceClassMappings).
    channel_device_class: str = CHANNEL_DEVICE_CLASS
    kueue_resource: str = KUEUE_CHANNEL_RESOURCE
    # The DRA DeviceClass a node's RDMA NICs are claimed from where a network DRA driver hands them out (the
    # backend names it); None where the NICs come another way (a device plugin's extended resource, e.g. EFA).
    # Each training pod (one per node) claims `nics_per_node` of them beside its channel, and Kueue counts
    # them as `nic_kueue_resource` (components/incluster/compute_domain.py).
    nic_device_class: str | None = None
    nics_per_node: int = 0
    nic_kueue_resource: str = KUEUE_RDMA_NIC_RESOURCE


class NodePoolInfo(_Output):
    """What a workload needs to know to land on a pool: its labels, taints and GPU shape.

    The backend that built the pool makes it (`ClusterBundle.node_pools`), the in-cluster layer reads it,
    the platform stack exports it and a job stack parses it back."""

    name: str
    gpu: str | None = None
    gpus_per_node: int = 0
    capacity: Capacity = "on-demand"
    min_nodes: int = 0
    max_nodes: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[TaintInfo, ...] = ()
    machine_types: tuple[str, ...] = ()
    # Extended resources every node of the pool has besides GPUs, which a job pod must request to use
    # them (e.g. {"vpc.amazonaws.com/efa": 32} on p5: all of the node's EFA devices). The in-cluster layer
    # requests and queues them without knowing what they are.
    extended_resources: dict[str, int] = Field(default_factory=dict)
    # Environment a training pod on this pool needs for the pool's GPU fabric (libfabric/NCCL settings for
    # EFA, ...), set by the cloud backend that built the fabric.
    pod_env: dict[str, str] = Field(default_factory=dict)
    # The smallest machine type of the pool (vCPUs, GiB of memory): a pod sized for it fits on every
    # node. None where the machines are unknown (existing clusters).
    node_vcpus: int | None = None
    node_memory_gib: float | None = Field(
        default=None, validation_alias="nodeMemoryGiB", serialization_alias="nodeMemoryGiB"
    )
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
    workload_annotations: dict[str, str] = Field(default_factory=dict)
    # How a node of the pool that stays quarantined is replaced (the GPU health controller reads it).
    replacement: NodeReplacement = Field(default_factory=NodeReplacement)
    # The multi-node NVLink domain of the pool's nodes (NVL72 racks); None: NVLink stays within a node.
    rack: RackDomain | None = None


class StorageHandle(_Output):
    """A shared file system, ready to be bound statically to a PersistentVolume (ReadWriteMany)."""

    # `Deployed` fields hold pulumi Outputs on the writing side (merged with _Output's config).
    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    # "lustre" or "nfs" today; a job stack reads any kind a newer platform exports.
    kind: str
    capacity_gib: int = Field(default=0, validation_alias="capacityGiB", serialization_alias="capacityGiB")
    # CSI driver name, or None for the in-tree `nfs` volume source (server + path).
    csi_driver: str | None = None
    volume_handle: Deployed | None = None
    volume_attributes: dict[str, Deployed] = Field(default_factory=dict)
    mount_options: tuple[str, ...] = ()
    # Address clients connect to (outputs and docs). The client is the node, not the pod (the kubelet and
    # CSI node plugin mount it), so no pod NetworkPolicy is made from it.
    endpoint: Deployed | None = None


class TeamOutput(_Output):
    name: str
    namespace: str
    service_account: str
    local_queue: str
    gpu_quota: int = 0
    # The platform storage the team mounts (claims in its namespace).
    storage: list[str] = Field(default_factory=list)
    # Its cloud identity (IAM role ARN, Google service account), None without one.
    identity: str | None = None
    # Who pays for its namespace (its trainplane.dev/cost-center label): the team's costCenter, else the
    # platform's; None where neither is set or the platform predates the key. A fleet labels the team's
    # namespace on its manager with it (components/fleet).
    cost_center: str | None = None


class PlatformOutputs(_Output):
    cloud: str
    cluster_name: str
    region: str | None = None
    # The cluster's kubeconfig, a secret; job stacks read it as an Output, not through this model.
    kubeconfig: str | None = None
    # The API server's URL where the spec gives it (an existing cluster's cluster.apiServer); a fleet's
    # manager reaches a worker there when the worker exports no kubeconfig document.
    api_server: str | None = None
    node_pools: list[NodePoolInfo] = Field(default_factory=list)
    storage: list[StorageHandle] = Field(default_factory=list)
    # purpose ("checkpoints", "logs") -> bucket name
    buckets: dict[str, str] = Field(default_factory=dict)
    object_store: str | None = None
    teams: list[TeamOutput] = Field(default_factory=list)
    # Seconds training pods get between SIGTERM and SIGKILL unless a job sets its own (the cloud's
    # preemption notice). Older platforms lack it: the cloud's backend default.
    preemption_grace_seconds: int = 0

    @model_validator(mode="after")
    def _grace_default(self) -> PlatformOutputs:
        if not self.preemption_grace_seconds:
            object.__setattr__(self, "preemption_grace_seconds", _backend_grace(self.cloud))
        return self

    @model_validator(mode="after")
    def _machine_facts(self) -> PlatformOutputs:
        """Platforms deployed before nodeVcpus/nodeMemoryGiB existed: the smallest machine of each pool,
        as the catalog knows the machines of this platform's cloud."""
        for pool in self.node_pools:
            if pool.node_vcpus is not None or not pool.machine_types:
                continue
            shapes = [s for m in pool.machine_types if (s := catalog().machine(self.cloud, m))]
            if shapes:
                object.__setattr__(pool, "node_vcpus", min(s.vcpus for s in shapes))
                object.__setattr__(pool, "node_memory_gib", float(min(s.memory_gib for s in shapes)))
        return self

    def pool(self, name: str) -> NodePoolInfo | None:
        return next((p for p in self.node_pools if p.name == name), None)

    def team(self, name: str) -> TeamOutput | None:
        return next((t for t in self.teams if t.name == name), None)


def _backend_grace(cloud: str) -> int:
    from components.backends import backend, backend_names

    return backend(cloud).preemption_grace_seconds if cloud in backend_names() else DEFAULT_GRACE_SECONDS


# The keys a job stack reads from its platform stack (the kubeconfig travels as a secret Output).
READ_KEYS = tuple(
    (info.serialization_alias or name)
    for name, info in PlatformOutputs.model_fields.items()
    if name != "kubeconfig"
)
