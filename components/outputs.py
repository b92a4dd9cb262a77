"""PlatformOutputs: the typed contract between a platform stack and the job stacks that read it.

The platform stack writes it (`components.platform.platform_outputs`, exported key by key); a job stack
reads it back through a StackReference (`components.job_stack.read_platform`) and parses it here. Keys
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

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from components.catalog import catalog
from components.spec import Capacity

# What a job stack falls back to when neither the platform nor its backend says how long pods may take.
DEFAULT_GRACE_SECONDS = 120


class _Output(BaseModel):
    """camelCase keys as exported; unknown keys (from a newer platform) ignored; immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    def exports(self) -> dict[str, Any]:
        """The stack outputs, by their exported names; values may be pulumi Outputs on the writing side."""
        return {
            (info.alias or name): _export(getattr(self, name))
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


class TaintOutput(_Output):
    key: str
    value: str = ""
    effect: str = "NoSchedule"


class FabricOutput(_Output):
    kind: str
    annotations: dict[str, str] = Field(default_factory=dict)
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    sidecars: list[dict[str, Any]] = Field(default_factory=list)


class NodePoolOutput(_Output):
    name: str
    gpu: str | None = None
    gpus_per_node: int = 0
    capacity: Capacity = "on-demand"
    min_nodes: int = 0
    max_nodes: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[TaintOutput] = Field(default_factory=list)
    machine_types: list[str] = Field(default_factory=list)
    extended_resources: dict[str, int] = Field(default_factory=dict)
    pod_env: dict[str, str] = Field(default_factory=dict)
    # The pool's smallest machine (a pod sized for it fits every node); None where machines are unknown.
    node_vcpus: int | None = None
    node_memory_gib: float | None = Field(default=None, alias="nodeMemoryGiB")
    reservation: str | None = None
    fabric: FabricOutput | None = None
    topology_levels: list[str] = Field(default_factory=list)
    provisioning_class: str | None = None
    workload_annotations: dict[str, str] = Field(default_factory=dict)


class StorageOutput(_Output):
    name: str
    kind: str
    capacity_gib: int = Field(default=0, alias="capacityGiB")
    csi_driver: str | None = None
    volume_handle: str | None = None
    volume_attributes: dict[str, str] = Field(default_factory=dict)
    mount_options: list[str] = Field(default_factory=list)
    endpoint: str | None = None


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


class PlatformOutputs(_Output):
    cloud: str
    cluster_name: str
    region: str | None = None
    # The cluster's kubeconfig, a secret; job stacks read it as an Output, not through this model.
    kubeconfig: str | None = None
    node_pools: list[NodePoolOutput] = Field(default_factory=list)
    storage: list[StorageOutput] = Field(default_factory=list)
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

    def pool(self, name: str) -> NodePoolOutput | None:
        return next((p for p in self.node_pools if p.name == name), None)

    def team(self, name: str) -> TeamOutput | None:
        return next((t for t in self.teams if t.name == name), None)


def _backend_grace(cloud: str) -> int:
    from components.backends import backend, backend_names

    return backend(cloud).preemption_grace_seconds if cloud in backend_names() else DEFAULT_GRACE_SECONDS


# The keys a job stack reads from its platform stack (the kubeconfig travels as a secret Output).
READ_KEYS = tuple(
    (info.alias or name) for name, info in PlatformOutputs.model_fields.items() if name != "kubeconfig"
)
