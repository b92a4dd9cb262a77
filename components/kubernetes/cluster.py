"""The `kubernetes` cloud: a cluster that already exists (on premises or anywhere else).

Nothing is created in a cloud. The bundle is built from the stack's kubeconfig secret or a kubeconfig
context, node pools are label selectors of nodes that are already there, and storage is NFS servers that
already export their paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.bundle import (
    CloudProfile,
    ClusterBundle,
    NodePoolInfo,
    StorageHandle,
    TaintInfo,
)
from components.spec import PlatformSpec


def existing_profile(spec: PlatformSpec) -> CloudProfile:
    """No cloud underneath: the GPU operator installs the driver unless `gpuOperator.driver: false`."""
    driver = spec.gpu_operator.driver
    return CloudProfile(
        name="kubernetes",
        gpu_operator_values={"driver": {"enabled": driver if driver is not None else True}},
        # Nodes of an existing cluster are drained by people, who can wait for a checkpoint.
        preemption_grace_seconds=300,
    )


@dataclass(frozen=True, kw_only=True)
class ExistingClusterArgs:
    spec: PlatformSpec
    # The kubeconfig document (a secret); None uses the ambient kubeconfig and `cluster.context`.
    kubeconfig: pulumi.Input[str] | None = None


class ExistingCluster(pulumi.ComponentResource):
    """Adopts an existing cluster: a Kubernetes provider plus the bundle the in-cluster layer uses."""

    bundle: ClusterBundle

    def __init__(self, name: str, args: ExistingClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:ExistingCluster", name, None, opts)
        spec = args.spec
        provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=args.kubeconfig,
            context=spec.cluster.context,
            # Server-side apply lets the GPU operator and Kueue co-own fields with their controllers.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        kubeconfig = (
            pulumi.Output.secret(args.kubeconfig)
            if args.kubeconfig is not None
            else pulumi.Output.from_input(
                f"(ambient kubeconfig, context {spec.cluster.context or 'current'})"
            )
        )
        pools = tuple(
            NodePoolInfo(
                name=p.name,
                gpu=p.gpu,
                gpus_per_node=p.gpus_per_node or 0,
                capacity=p.capacity,
                min_nodes=p.min_nodes,
                max_nodes=p.effective_max_nodes,
                labels=dict(p.selector),
                taints=tuple(TaintInfo(key=t.key, value=t.value, effect=t.effect) for t in p.taints),
                # The stack's own topology labels (the clouds' backends know theirs).
                topology_levels=tuple(p.topology_levels),
            )
            for p in spec.node_pools
        )
        storage = tuple(
            StorageHandle(
                name=s.name,
                kind="nfs",
                capacity_gib=s.capacity_gib or 1024,
                csi_driver=None,
                volume_handle=f"{s.server}:{s.path}",
                volume_attributes={"server": s.server or "", "path": s.path or ""},
                mount_options=tuple(s.mount_options or ("nfsvers=4.1", "hard", "noatime")),
                endpoint=s.server,
            )
            for s in spec.storage
        )
        self.bundle = ClusterBundle(
            name=spec.cluster.name,
            region=spec.region,
            provider=provider,
            kubeconfig=kubeconfig,
            profile=existing_profile(spec),
            node_pools=pools,
            storage=storage,
            # The class the stack names, or None: the cluster's default class, checked live by verify.
            storage_class=spec.cluster.storage_class,
        )
        self.register_outputs({"clusterName": spec.cluster.name})
