"""The AWS backend of GpuPlatform: network, EKS, node groups, autoscaling, storage, buckets, identity.

Order of creation follows only real dependencies: the network and the data key come first; the control
plane, FSx/EFS and the buckets then start in parallel; node groups (each independent of the others)
wait for the control plane and its CNI; the autoscaler, the EFA device plugin and the add-ons with
Deployments (coredns, CSI drivers) wait for the system nodes. Everything the in-cluster layer needs
leaves through `bundle`: among it the default StorageClass (`storage_class`, with `storage_ready` to
wait on) and, per EFA pool, the EFA devices a job pod requests and the libfabric environment it sets.

Example:
    >>> from components.aws.cloud import AwsCloud, AwsCloudArgs
    >>> cloud = AwsCloud("ml-dev", AwsCloudArgs(spec=spec))  # doctest: +SKIP
    >>> cloud.bundle.provider  # the Kubernetes provider of the new cluster  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aws.addons import ClusterAddons, ClusterAddonsArgs
from components.aws.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.aws.buckets import PlatformBuckets, PlatformBucketsArgs
from components.aws.capacity import pools_zone, single_zone
from components.aws.cluster import EksCluster, EksClusterArgs
from components.aws.efa import EFA_RESOURCE, EfaDevicePlugin, EfaDevicePluginArgs
from components.aws.identity import WorkloadIdentities, WorkloadIdentitiesArgs
from components.aws.network import Network, NetworkArgs
from components.aws.node_group import NodePool, NodePoolArgs, node_repair
from components.aws.node_role import NodeRole
from components.aws.profile import eks_profile
from components.aws.spot_notice import SpotNoticeHandler, SpotNoticeHandlerArgs, needs_spot_notice
from components.aws.storage import EfsStorage, LustreStorage, StorageArgs
from components.bundle import ClusterBundle
from components.spec import PlatformSpec

DEFAULT_ZONES = 3


@dataclass(frozen=True, kw_only=True)
class AwsCloudArgs:
    spec: PlatformSpec


class AwsCloud(pulumi.ComponentResource):
    """An EKS GPU platform in one region; `bundle` is what the in-cluster layer builds on."""

    bundle: ClusterBundle

    def __init__(self, name: str, args: AwsCloudArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:AwsCloud", name, None, opts)
        spec = args.spec
        assert spec.region is not None, "the spec requires a region on aws"
        cluster_name = spec.cluster.name
        tags = {**spec.resource_tags(), "trainplane.dev/cluster": cluster_name}
        child = pulumi.ResourceOptions(parent=self)

        network = Network(
            f"{name}-net",
            NetworkArgs(
                cluster_name=cluster_name,
                cidr=spec.network.cidr,
                zones=spec.network.zones or DEFAULT_ZONES,
                pool_zones=tuple(sorted({z for p in spec.node_pools for z in p.zones})),
                vpc_id=spec.network.vpc_id,
                subnet_ids=list(spec.network.subnet_ids),
                tags=tags,
            ),
            child,
        )
        # One customer key for the platform's data at rest: buckets, FSx, EFS, EBS volumes of claims.
        data_key = aws.kms.Key(
            f"{name}-data",
            description=f"Data at rest of GPU platform {cluster_name} (S3, FSx, EFS, EBS)",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=child,
        )

        # FSx for Lustre lives in one subnet: the GPU pools' zone where one zone holds them all, so the
        # training traffic to it stays in the zone (no cross-AZ latency, no inter-AZ transfer charges).
        gpu_zone = pools_zone(spec.node_pools, network.zone_names)
        lustre_subnets = (
            network.subnets_for([gpu_zone], single=True) if gpu_zone else network.private_subnet_ids
        )
        storage = []
        for st in spec.storage:
            storage_args = StorageArgs(
                spec=st,
                cluster_name=cluster_name,
                vpc_id=network.vpc_id,
                subnet_ids=lustre_subnets if st.kind == "lustre" else network.private_subnet_ids,
                node_security_group_id=network.node_security_group_id,
                kms_key_arn=data_key.arn,
                tags=tags,
            )
            kind = LustreStorage if st.kind == "lustre" else EfsStorage
            storage.append(kind(f"{name}-{st.name}", storage_args, child).handle)

        buckets = PlatformBuckets(
            f"{name}-buckets",
            PlatformBucketsArgs(
                cluster_name=cluster_name,
                kms_key_arn=data_key.arn,
                loki=spec.observability.loki,
                log_retention_days=spec.observability.log_retention_days,
                tags=tags,
            ),
            child,
        )

        eks = EksCluster(
            f"{name}-cluster",
            EksClusterArgs(
                cluster_name=cluster_name,
                region=spec.region,
                version=spec.cluster.kubernetes_version,
                subnet_ids=network.private_subnet_ids,
                endpoint_access=spec.cluster.endpoint_access or "both",
                public_access_cidrs=[str(n) for n in spec.cluster.authorized_networks],
                private_access_cidrs=[str(n) for n in spec.cluster.private_access_cidrs],
                admin_principals=list(spec.cluster.admin_principals),
                log_types=list(spec.cluster.log_types or ("api", "audit", "authenticator")),
                tags=tags,
            ),
            child,
        )

        node_role = NodeRole(f"{name}-node", tags, child)
        pools: list[NodePool] = []
        for pool in spec.node_pools:
            pools.append(
                NodePool(
                    f"{name}-{pool.name}",
                    NodePoolArgs(
                        pool=pool,
                        gpus_per_node=spec.gpus_per_node(pool) if pool.is_gpu else 0,
                        cluster_name=cluster_name,
                        cluster=eks.name,
                        node_role_arn=node_role.arn,
                        subnet_ids=network.subnets_for(list(pool.zones), single=single_zone(pool)),
                        vpc_id=network.vpc_id,
                        security_group_ids=[eks.security_group_id, network.node_security_group_id],
                        depends_on=[*node_role.attachments, *eks.early_addons],
                        tags=tags,
                    ),
                    child,
                )
            )
        system = [p.node_group for p in pools if not p.info.gpu] or [p.node_group for p in pools]

        addons = ClusterAddons(
            f"{name}-addons",
            ClusterAddonsArgs(
                cluster_name=eks.name,
                oidc=eks.oidc,
                provider=eks.provider,
                data_key_arn=data_key.arn,
                ready=system,
                efs=any(st.kind == "nfs" for st in spec.storage),
                # Node repair needs the node monitoring agent's conditions to act on.
                node_monitoring=any(node_repair(p) for p in spec.node_pools),
                tags=tags,
            ),
            child,
        )
        ClusterAutoscaler(
            f"{name}-autoscaler",
            ClusterAutoscalerArgs(
                cluster_name=cluster_name,
                region=spec.region,
                kubernetes_version=spec.cluster.kubernetes_version,
                oidc=eks.oidc,
                provider=eks.provider,
                node_groups=[(p.node_group_name, p.info.capacity) for p in pools],
                ready=system,
                tags=tags,
            ),
            child,
        )
        if any(p.efa for p in spec.node_pools):
            efa_pools = [p.info for p in pools if p.info.extended_resources.get(EFA_RESOURCE)]
            EfaDevicePlugin(
                f"{name}-efa",
                EfaDevicePluginArgs(provider=eks.provider, ready=system, pools=efa_pools),
                child,
            )
        if needs_spot_notice(spec.node_pools):  # the two-minute notice -> SIGTERM (spot_notice.py)
            SpotNoticeHandler(
                f"{name}-spot", SpotNoticeHandlerArgs(provider=eks.provider, ready=system), child
            )

        identities = WorkloadIdentities(
            f"{name}-identity",
            WorkloadIdentitiesArgs(
                oidc=eks.oidc,
                teams=[t.name for t in spec.teams],
                checkpoint_bucket_arn=buckets.checkpoints.arn,
                data_key_arn=data_key.arn,
                region=spec.region,
                logs_bucket_arn=buckets.logs.arn if buckets.logs is not None else None,
                tags=tags,
            ),
            child,
        )

        self.bundle = ClusterBundle(
            name=cluster_name,
            region=spec.region,
            provider=eks.provider,
            kubeconfig=eks.kubeconfig,
            profile=eks_profile(spec.region),
            node_pools=tuple(p.info for p in pools),
            storage=tuple(storage),
            buckets=buckets.names(),
            team_identities=dict(identities.team_roles),
            loki_identity=identities.loki_role,
            ready=tuple(system),
            storage_class=addons.storage_class,
            storage_ready=addons.storage_ready,
        )
        self.register_outputs({"clusterName": cluster_name, "kubeconfig": eks.kubeconfig})
