"""GcpCloud: the GCP backend of GpuPlatform. Builds network, GKE, node pools, storage, buckets and
identities from a PlatformSpec and hands the in-cluster layer one ClusterBundle.

Dependency shape (only true dependencies, so independent parts are created in parallel):

    network -> cluster -> node pools (each on its own, none on another)
    network -> Filestore / (private services peering -> Managed Lustre)     never on the cluster
    buckets, service accounts, bucket IAM                                   on nothing of the above
    Workload Identity bindings -> cluster (its identity pool must exist)

Example:
    >>> from components.gcp.cloud import GcpCloud, GcpCloudArgs  # doctest: +SKIP
    >>> GcpCloud("ml-dev", GcpCloudArgs(spec=spec)).bundle.profile.name  # doctest: +SKIP
    'gke'
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.bundle import (
    ClusterBundle,
    StorageHandle,
)
from components.gcp.buckets import PlatformBuckets, PlatformBucketsArgs
from components.gcp.cluster import GkeCluster, GkeClusterArgs, uses_legacy_lustre_port
from components.gcp.fabric import DEFAULT_FABRIC_CIDR, cluster_objects, gvnic_network_count, rdma_subnet_count
from components.gcp.fabric_network import FabricNetworks, FabricNetworksArgs
from components.gcp.fabric_rules import platform_fabrics, rdma_zone
from components.gcp.identity import NodeIdentity, NodeIdentityArgs, WorkloadIdentities, WorkloadIdentitiesArgs
from components.gcp.maintenance import holds_upgrades
from components.gcp.naming import GcpPlacement
from components.gcp.network import LUSTRE_LEGACY_PORT, LUSTRE_PORT, Network, NetworkArgs
from components.gcp.node_pool import NodePool, NodePoolArgs
from components.gcp.profile import GKE_STORAGE_CLASS, gke_profile
from components.gcp.rules import gcp_storage_zone
from components.gcp.storage import FilestoreStorage, FilestoreStorageArgs, LustreStorage, LustreStorageArgs
from components.spec import PlatformSpec


@dataclass(frozen=True, kw_only=True)
class GcpCloudArgs:
    spec: PlatformSpec


class GcpCloud(pulumi.ComponentResource):
    """A GKE GPU training platform's cloud side; `.bundle` is what the in-cluster layer builds on."""

    bundle: ClusterBundle

    def __init__(self, name: str, args: GcpCloudArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:GcpCloud", name, None, opts)
        spec = args.spec
        assert spec.cloud == "gcp" and spec.project and spec.region, "PlatformSpec.load checks these"
        child = pulumi.ResourceOptions(parent=self)
        # What every GCP component needs of the spec; each takes only its own part besides.
        place = GcpPlacement(
            project=spec.project,
            region=spec.region,
            cluster_name=spec.cluster.name,
            tags=spec.resource_tags(),
        )
        lustre = any(s.kind == "lustre" for s in spec.storage)
        legacy_lustre = lustre and uses_legacy_lustre_port(spec.cluster.kubernetes_version)
        storage_zone = gcp_storage_zone(spec)

        network = Network(
            f"{name}-net",
            NetworkArgs(
                placement=place,
                network=spec.network,
                private_nodes=spec.cluster.private_nodes,
                lustre_port=(LUSTRE_LEGACY_PORT if legacy_lustre else LUSTRE_PORT) if lustre else None,
            ),
            child,
        )
        # GPUDirect: the extra VPCs the pools' GPU NICs sit in, shared by every fabric pool of the platform.
        fabrics = platform_fabrics(spec)
        fabric_net = (
            FabricNetworks(
                f"{name}-fabric-net",
                FabricNetworksArgs(
                    placement=place,
                    count=gvnic_network_count(fabrics),
                    mtu=fabrics[0].mtu,
                    cidr=spec.network.fabric_cidr or DEFAULT_FABRIC_CIDR,
                    node_tag=network.node_tag,
                    rdma_subnets=rdma_subnet_count(fabrics),
                    rdma_mtu=max((f.rdma_mtu or 0 for f in fabrics), default=0) or None,
                    rdma_zone=rdma_zone(spec),
                ),
                child,
            )
            if fabrics
            else None
        )
        gke = GkeCluster(
            f"{name}-cluster",
            GkeClusterArgs(
                placement=place,
                cluster=spec.cluster,
                network=network,
                zones=tuple(spec.zones),
                filestore=any(s.kind == "nfs" for s in spec.storage),
                lustre=lustre,
                multi_networking=bool(fabrics),
                hold_upgrades=holds_upgrades({f.kind for f in fabrics}),
            ),
            child,
        )
        nodes = NodeIdentity(f"{name}-nodes", NodeIdentityArgs(placement=place), child)

        pools = [
            NodePool(
                f"{name}-{pool.name}",
                NodePoolArgs(
                    placement=place,
                    pool=pool,
                    zones=tuple(spec.zones),
                    lustre=lustre,
                    cluster_id=gke.cluster.id,
                    location=gke.location,
                    node_service_account=nodes.email,
                    node_tag=network.node_tag,
                    depends_on=tuple(nodes.bindings),
                    fabric_networks=fabric_net.attachments if fabric_net is not None else (),
                    rdma_networks=fabric_net.rdma_attachments if fabric_net is not None else (),
                ),
                child,
            )
            for pool in spec.node_pools
        ]

        handles: list[StorageHandle] = []
        for st in spec.storage:
            if st.kind == "nfs":
                fs = FilestoreStorage(
                    f"{name}-{st.name}",
                    FilestoreStorageArgs(placement=place, storage=st, network=network, zone=storage_zone),
                    child,
                )
                handles.append(fs.handle)
            else:
                lfs = LustreStorage(
                    f"{name}-{st.name}",
                    LustreStorageArgs(
                        placement=place,
                        storage=st,
                        network=network,
                        zone=storage_zone or "",
                        legacy_port=legacy_lustre,
                    ),
                    child,
                )
                handles.append(lfs.handle)

        buckets = PlatformBuckets(
            f"{name}-buckets",
            PlatformBucketsArgs(
                placement=place,
                logs=spec.observability.loki,
                log_retention_days=spec.observability.log_retention_days,
            ),
            child,
        )
        identities = WorkloadIdentities(
            f"{name}-identity",
            WorkloadIdentitiesArgs(
                placement=place,
                teams=[t.name for t in spec.teams],
                checkpoint_bucket=buckets.checkpoints.name,
                logs_bucket=buckets.logs.name if buckets.logs is not None else None,
                cluster=gke.cluster,
                # Deployed stacks have each identity directly under this component: they keep them.
                former_parent=self,
            ),
            child,
        )
        team_identities = dict(identities.team_emails)
        loki_identity = identities.loki_email

        bucket_names: dict[str, pulumi.Input[str]] = {"checkpoints": buckets.checkpoints.name}
        if buckets.logs is not None:
            bucket_names["logs"] = buckets.logs.name
        self.bundle = ClusterBundle(
            name=spec.cluster.name,
            region=spec.region,
            provider=gke.provider,
            kubeconfig=gke.kubeconfig,
            profile=gke_profile(spec.cluster.kubernetes_version, cluster_objects(fabrics, spec.cluster.name)),
            node_pools=tuple(p.info for p in pools),
            storage=tuple(handles),
            buckets=bucket_names,
            team_identities=team_identities,
            loki_identity=loki_identity,
            # System pods (operators, Prometheus, Kueue) need the CPU pools; GPU pools may sit at zero.
            ready=tuple(p.node_pool for p in pools if p.info.gpu is None),
            # GKE installs standard-rwo with the PD CSI add-on the cluster enables.
            storage_class=GKE_STORAGE_CLASS,
            storage_ready=(gke.cluster,),
        )
        self.register_outputs({"clusterName": spec.cluster.name, "kubeconfig": gke.kubeconfig})
