"""GpuPlatform: the one composition that picks the cloud backend and adds the in-cluster layer.

Example, in a user's own Pulumi program:
    >>> import pulumi
    >>> from components.platform import GpuPlatform, GpuPlatformArgs
    >>> from components.spec import PlatformSpec
    >>> spec = PlatformSpec.load(pulumi.Config("trainplane").require_object("platform"))  # doctest: +SKIP
    >>> platform = GpuPlatform("ml-dev", GpuPlatformArgs(spec=spec))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.backends import BuildArgs, backend
from components.bundle import TEAM_SERVICE_ACCOUNT, ClusterBundle, team_local_queue, team_namespace
from components.spec import PlatformSpec


@dataclass(frozen=True)
class GpuPlatformArgs:
    spec: PlatformSpec
    # Only for backends that adopt an existing cluster: its kubeconfig (keep it a secret).
    kubeconfig: pulumi.Input[str] | None = None


class GpuPlatform(pulumi.ComponentResource):
    """A GPU training platform on one cloud: the cluster and what runs inside it."""

    cluster: ClusterBundle

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:index:GpuPlatform", name, None, opts)
        spec = args.spec
        # The stack's cloud backend (components.backends) builds the cloud layer and hands over its bundle.
        self.cluster = backend(spec.cloud).build(
            name, BuildArgs(spec=spec, kubeconfig=args.kubeconfig), pulumi.ResourceOptions(parent=self)
        )
        from components.kubernetes.incluster import InClusterArgs, InClusterPlatform

        self.incluster = InClusterPlatform(
            name, InClusterArgs(spec, self.cluster), pulumi.ResourceOptions(parent=self)
        )
        self.outputs = platform_outputs(spec, self.cluster)
        self.register_outputs({"clusterName": self.cluster.name})


def platform_outputs(spec: PlatformSpec, bundle: ClusterBundle) -> dict[str, object]:
    """The stack outputs that job stacks read through StackReference; the same keys on every cloud."""
    return {
        "cloud": spec.cloud,
        "clusterName": bundle.name,
        "region": bundle.region,
        "kubeconfig": pulumi.Output.secret(bundle.kubeconfig),
        "nodePools": [p.as_output() for p in bundle.node_pools],
        "storage": [s.as_output() for s in bundle.storage],
        "buckets": dict(bundle.buckets),
        "objectStore": bundle.profile.object_store,
        "teams": [
            {
                "name": t.name,
                "namespace": team_namespace(t),
                "serviceAccount": TEAM_SERVICE_ACCOUNT,
                "localQueue": team_local_queue(t),
                "gpuQuota": t.gpu_quota,
                "storage": list(t.storage) if t.storage is not None else [s.name for s in spec.storage],
                "identity": bundle.team_identities.get(t.name),
            }
            for t in spec.teams
        ],
    }
