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

import pulumi

from components.backends import BuildArgs, backend
from components.bundle import TEAM_SERVICE_ACCOUNT, ClusterBundle, team_local_queue, team_namespace
from components.incluster.platform import InClusterArgs, InClusterPlatform
from components.outputs import PlatformOutputs, TeamOutput
from components.pricing import gpu_pool_prices
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
            name,
            # The cost rules price pools from the plan's own table (the in-cluster layer asks no catalog).
            InClusterArgs(spec=spec, bundle=self.cluster, pool_prices=gpu_pool_prices(spec)),
            pulumi.ResourceOptions(parent=self),
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
        api_server=spec.cluster.api_server,
        # The bundle's own records: the backend built them as the models job stacks parse back.
        node_pools=list(bundle.node_pools),
        storage=list(bundle.storage),
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
                # As tenancy labels the team's namespace (components/incluster/tenancy.py).
                cost_center=t.cost_center or spec.cost_center,
            )
            for t in spec.teams
        ],
        preemption_grace_seconds=bundle.profile.preemption_grace_seconds,
    )
