"""GkeCluster: a GKE Standard control plane set up for multi-tenant GPU training, plus its kubeconfig.

Choices, and why:
- Standard, not Autopilot: the NVIDIA GPU operator (the in-cluster layer's driver story) is not supported
  on Autopilot, and training pools need compact placement, local SSD and spot control.
- The default node pool is removed; every pool comes from `nodePools` so each one is visible and tested.
- Regional control plane (survives a zone outage, same management fee); node zones come from the stack.
- Workload Identity (`<project>.svc.id.goog`): pods get Google identity per Kubernetes service account, the
  node's own service account stays out of reach (pools run GKE_METADATA).
- Private nodes with Cloud NAT; the control plane endpoint can be narrowed with `authorizedNetworks`.
- Dataplane V2 (`ADVANCED_DATAPATH`): eBPF datapath that enforces NetworkPolicy itself, which the tenancy
  layer relies on (no Calico add-on; GKE rejects both at once).
- Filestore and Lustre CSI add-ons only when the stack has that storage (each runs a DaemonSet).
- A platform with a GPUDirect-TCPX pool is held on its minor version (components/gcp/maintenance.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from components.gcp.maintenance import HELD_RELEASE_CHANNEL, maintenance_policy
from components.gcp.naming import GcpPlacement
from components.gcp.network import Network
from components.spec import ClusterSpec

DEFAULT_RELEASE_CHANNEL = "REGULAR"
AUTH_PLUGIN = "gke-gcloud-auth-plugin"


def default_channel(hold_upgrades: bool) -> str:
    """The release channel when `releaseChannel` is unset: EXTENDED for a cluster held on its minor (only
    there does the hold outlast the minor's standard support: components/gcp/maintenance.py), else REGULAR."""
    return HELD_RELEASE_CHANNEL if hold_upgrades else DEFAULT_RELEASE_CHANNEL


def workload_pool(project: str) -> str:
    return f"{project}.svc.id.goog"


def uses_legacy_lustre_port(kubernetes_version: str) -> bool:
    """GKE before 1.33.2-gke.4780000 holds port 988 on nodes (metadata server), so Lustre must use 6988.

    A `1.33` minimum may still land on such a patch; from 1.34 the default port works.
    """
    return int(kubernetes_version.split(".")[1]) < 34


def kubeconfig_for(name: str, endpoint: str, ca_data: str) -> str:
    """A kubeconfig that authenticates with `gke-gcloud-auth-plugin` (no credentials inside)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_data},
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [
            {
                "name": name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": AUTH_PLUGIN,
                        "installHint": f"Install {AUTH_PLUGIN}: gcloud components install {AUTH_PLUGIN}",
                        "provideClusterInfo": True,
                        "interactiveMode": "IfAvailable",
                    }
                },
            }
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)


@dataclass(frozen=True, kw_only=True)
class GkeClusterArgs:
    placement: GcpPlacement
    cluster: ClusterSpec
    network: Network
    # The platform's zones (node locations); empty: GKE's choice in the region.
    zones: Sequence[str] = ()
    # Which storage CSI add-ons the platform's file systems need.
    filestore: bool = False
    lustre: bool = False
    # Multi-networking (pods with interfaces on the GPUDirect fabric networks); needs Dataplane V2, which
    # every trainplane cluster has.
    multi_networking: bool = False
    # Hold minor and node upgrades (a GPUDirect-TCPX pool: components/gcp/maintenance.py).
    hold_upgrades: bool = False


class GkeCluster(pulumi.ComponentResource):
    """The GKE Standard cluster, its kubeconfig (secret) and a Kubernetes provider bound to it."""

    cluster: gcp.container.Cluster
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    location: str

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:GkeCluster", name, None, opts)
        place, net, cfg = args.placement, args.network, args.cluster
        project = place.project
        self.location = place.region
        nfs, lustre = args.filestore, args.lustre
        private_nodes = cfg.private_nodes is not False

        addons: dict = {
            # Persistent disks back Prometheus/Grafana volumes.
            "gce_persistent_disk_csi_driver_config": {"enabled": True},
            "gcp_filestore_csi_driver_config": {"enabled": nfs},
        }
        if lustre:
            addons["lustre_csi_driver_config"] = {
                "enabled": True,
                "enable_legacy_lustre_port": uses_legacy_lustre_port(cfg.kubernetes_version),
            }

        ip_policy: dict = {}
        if net.pods_range_name:
            ip_policy["cluster_secondary_range_name"] = net.pods_range_name
            ip_policy["services_secondary_range_name"] = net.services_range_name
        else:  # brought subnet without named ranges: GKE adds them from these blocks (or picks its own)
            if net.pods_cidr:
                ip_policy["cluster_ipv4_cidr_block"] = net.pods_cidr
            if net.services_cidr:
                ip_policy["services_ipv4_cidr_block"] = net.services_cidr

        authorized = None
        if cfg.authorized_networks:
            authorized = {
                "cidr_blocks": [
                    {"cidr_block": str(c), "display_name": f"authorized-{i}"}
                    for i, c in enumerate(cfg.authorized_networks)
                ],
                # Only the listed ranges, not every Google Cloud public IP.
                "gcp_public_cidrs_access_enabled": False,
            }

        # Only set on platforms with a GPUDirect pool, so other clusters' inputs stay as they were
        # (gke-cluster/main.tf@v1.95.0: enable_multi_networking when additional networks are given). The
        # provider updates it in place (magic-modules PR 14000, "container: allow updating
        # enable_multi_networking", 2025), so turning it on does not replace a deployed cluster.
        extra: dict = {"enable_multi_networking": True} if args.multi_networking else {}
        if args.hold_upgrades:
            # Only on such platforms, so other clusters' inputs stay as they were; an in-place update.
            extra["maintenance_policy"] = maintenance_policy()
        self.cluster = gcp.container.Cluster(
            f"{name}-gke",
            name=cfg.name,
            project=project,
            location=self.location,
            node_locations=list(args.zones) or None,
            description=f"trainplane GPU training platform {cfg.name}",
            network=net.network_id,
            subnetwork=net.subnetwork_id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=ip_policy,
            # The default pool would run with defaults nobody chose; pools come from `nodePools`.
            remove_default_node_pool=True,
            initial_node_count=1,
            release_channel={"channel": cfg.release_channel or default_channel(args.hold_upgrades)},
            min_master_version=cfg.kubernetes_version,
            workload_identity_config={"workload_pool": workload_pool(project)},
            private_cluster_config={"enable_private_nodes": private_nodes, "enable_private_endpoint": False},
            master_authorized_networks_config=authorized,
            enable_shielded_nodes=True,
            datapath_provider="ADVANCED_DATAPATH",
            addons_config=addons,
            resource_labels=place.labels,
            # Platforms are torn down with `pulumi destroy`; protect production stacks with Pulumi's
            # `protect` instead of an API flag that blocks every destroy.
            deletion_protection=False,
            **extra,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.cluster_id = self.cluster.id
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate).apply(
                lambda v: kubeconfig_for(f"gke_{project}_{self.location}_{cfg.name}", v[0], v[1])
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Server-side apply lets the GPU operator and Kueue co-own fields with their controllers.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"clusterName": self.cluster.name, "endpoint": self.cluster.endpoint})
