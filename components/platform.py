"""GpuPlatform: the one composition that picks the cloud backend and adds the in-cluster layer.

Example, in a user's own Pulumi program:
    >>> import pulumi
    >>> from components.platform import GpuPlatform, GpuPlatformArgs
    >>> from components.spec import PlatformSpec
    >>> spec = PlatformSpec.load(pulumi.Config("trainplane").require_object("platform"))  # doctest: +SKIP
    >>> platform = GpuPlatform("ml-dev", GpuPlatformArgs(spec=spec))  # doctest: +SKIP
    >>> for key, value in platform.outputs.exports().items():  # doctest: +SKIP
    ...     pulumi.export(key, value)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.backends import BuildArgs, backend
from components.bundle import (
    TEAM_SERVICE_ACCOUNT,
    ClusterBundle,
    NodePoolInfo,
    PodFabric,
    StorageHandle,
    team_local_queue,
    team_namespace,
)
from components.incluster.platform import InClusterArgs, InClusterPlatform
from components.outputs import (
    FabricOutput,
    NodePoolOutput,
    PlatformOutputs,
    StorageOutput,
    TaintOutput,
    TeamOutput,
)
from components.spec import PlatformSpec


@dataclass(frozen=True, kw_only=True)
class GpuPlatformArgs:
    spec: PlatformSpec
    # Only for backends that adopt an existing cluster: its kubeconfig (keep it a secret).
    kubeconfig: pulumi.Input[str] | None = None


@dataclass(frozen=True, kw_only=True)
class GpuPlatformResources:
    # What the cloud backend handed over (provider, pools, storage, identities...).
    cluster: ClusterBundle
    # Everything inside the cluster (its own `.resources` reach each part).
    incluster: InClusterPlatform


class GpuPlatform(pulumi.ComponentResource):
    """A GPU training platform on one cloud: the cluster and what runs inside it."""

    resources: GpuPlatformResources
    cluster: ClusterBundle
    # What the stack exports (`outputs.exports()`), typed; job stacks parse the same model back.
    outputs: PlatformOutputs

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:index:GpuPlatform", name, None, opts)
        spec = args.spec
        # The stack's cloud backend (components.backends) builds the cloud layer and hands over its bundle.
        self.cluster = backend(spec.cloud).build(
            name, BuildArgs(spec=spec, kubeconfig=args.kubeconfig), pulumi.ResourceOptions(parent=self)
        )
        self.incluster = InClusterPlatform(
            name, InClusterArgs(spec=spec, bundle=self.cluster), pulumi.ResourceOptions(parent=self)
        )
        self.resources = GpuPlatformResources(cluster=self.cluster, incluster=self.incluster)
        self.outputs = platform_outputs(spec, self.cluster)
        self.register_outputs({"clusterName": self.cluster.name})


def platform_outputs(spec: PlatformSpec, bundle: ClusterBundle) -> PlatformOutputs:
    """The stack outputs job stacks read through StackReference (components.outputs): the same keys on
    every cloud. Values may still be pulumi Outputs here; `exports()` gives them by exported name."""
    return PlatformOutputs.model_construct(
        cloud=spec.cloud,
        cluster_name=bundle.name,
        region=bundle.region,
        kubeconfig=pulumi.Output.secret(bundle.kubeconfig),
        node_pools=[_pool_output(p) for p in bundle.node_pools],
        storage=[_storage_output(s) for s in bundle.storage],
        buckets=dict(bundle.buckets),
        object_store=bundle.profile.object_store,
        teams=[
            TeamOutput.model_construct(
                name=t.name,
                namespace=team_namespace(t),
                service_account=TEAM_SERVICE_ACCOUNT,
                local_queue=team_local_queue(t),
                gpu_quota=t.gpu_quota,
                storage=list(t.storage) if t.storage is not None else [s.name for s in spec.storage],
                identity=bundle.team_identities.get(t.name),
            )
            for t in spec.teams
        ],
        preemption_grace_seconds=bundle.profile.preemption_grace_seconds,
    )


def _pool_output(p: NodePoolInfo) -> NodePoolOutput:
    return NodePoolOutput.model_construct(
        name=p.name,
        gpu=p.gpu,
        gpus_per_node=p.gpus_per_node,
        capacity=p.capacity,
        min_nodes=p.min_nodes,
        max_nodes=p.max_nodes,
        labels=dict(p.labels),
        taints=[TaintOutput.model_construct(key=t.key, value=t.value, effect=t.effect) for t in p.taints],
        machine_types=list(p.machine_types),
        extended_resources=dict(p.extended_resources),
        pod_env=dict(p.pod_env),
        node_vcpus=p.node_vcpus,
        node_memory_gib=p.node_memory_gib,
        reservation=p.reservation,
        fabric=FabricOutput.model_construct(**_fabric_fields(p.fabric)) if p.fabric else None,
        topology_levels=list(p.topology_levels),
        provisioning_class=p.provisioning_class,
        workload_annotations=dict(p.workload_annotations),
    )


def _fabric_fields(f: PodFabric) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "annotations": dict(f.annotations),
        "volumes": [dict(v) for v in f.volumes],
        "volume_mounts": [dict(m) for m in f.volume_mounts],
        "sidecars": [dict(c) for c in f.sidecars],
    }


def _storage_output(s: StorageHandle) -> StorageOutput:
    return StorageOutput.model_construct(
        name=s.name,
        kind=s.kind,
        capacity_gib=s.capacity_gib,
        csi_driver=s.csi_driver,
        volume_handle=s.volume_handle,
        volume_attributes=dict(s.volume_attributes),
        mount_options=list(s.mount_options),
        endpoint=s.endpoint,
    )
