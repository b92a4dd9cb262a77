"""Network: the VPC a GKE platform runs in, or references to one the user brings.

Created network: a custom-mode VPC, one regional subnet with secondary ranges for pods and services
(VPC-native GKE), a Cloud Router + Cloud NAT so private nodes can pull images, firewall rules scoped to the
platform's own ranges and node tag, and (only when Managed Lustre is asked for) a private services access
range peered through Service Networking, which Managed Lustre requires.

Brought network (`network.network` + `network.subnetwork`): nothing is created; the owner of the network
keeps NAT, firewall, private services access and its MTU (8896 is recommended with Managed Lustre).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.gcp.naming import GcpPlacement, network_name, network_path, subnetwork_path
from components.gcp.ranges import (
    GCP_DEFAULT_PODS_CIDR,
    GCP_DEFAULT_PRIVATE_SERVICES_CIDR,
    GCP_DEFAULT_SERVICES_CIDR,
)
from components.spec import NetworkSpec

PODS_RANGE = "pods"
SERVICES_RANGE = "services"
# Managed Lustre's LNet port; with `gke_support_enabled` (GKE before 1.33.2-gke.4780000) it moves to 6988
# because the GKE metadata server holds 988 on every node.
LUSTRE_PORT = 988
LUSTRE_LEGACY_PORT = 6988
# The largest MTU a VPC allows. Managed Lustre's VPC set-up creates its network with `--mtu=8896`, and its
# performance guide measures up to ~10% more throughput than the 1460-byte default (Managed Lustre docs,
# "Configure a VPC network" and "Performance considerations: VPC network MTU").
LUSTRE_MTU = 8896


@dataclass(frozen=True, kw_only=True)
class NetworkArgs:
    placement: GcpPlacement
    network: NetworkSpec
    # Nodes without external addresses (the default) need Cloud NAT to pull images.
    private_nodes: bool | None = None
    # Open the Lustre LNet port from the private services range (only when Managed Lustre is used).
    lustre_port: int | None = None


class Network(pulumi.ComponentResource):
    """The VPC, subnet, NAT and firewall of one platform (or references to a network brought along)."""

    network_id: pulumi.Output[str]  # projects/<p>/global/networks/<n>
    network_name: pulumi.Output[str]
    subnetwork_id: pulumi.Output[str]
    pods_range_name: str | None
    services_range_name: str | None
    pods_cidr: str | None
    services_cidr: str | None
    node_tag: str
    owned: bool
    # The project that owns the network: a Shared VPC host project, else the platform's own.
    host_project: str
    # Service Networking peering that Managed Lustre needs; None on a brought network or without Lustre.
    private_services: gcp.servicenetworking.Connection | None = None
    private_services_cidr: str | None = None
    # The primary range of a subnet trainplane creates (None for a brought one: not known here).
    cidr: str | None = None

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:Network", name, None, opts)
        place, net = args.placement, args.network
        project, region = place.project, place.region
        child = pulumi.ResourceOptions(parent=self)
        # Firewall rules target this tag, which every node pool of the platform carries.
        self.node_tag = f"{place.cluster_name}-node"
        self.owned = not net.network
        self.host_project = project
        if not self.owned:
            assert net.network and net.subnetwork
            path = network_path(net.network, project)
            self.host_project = path.split("/")[1]
            self.network_id = pulumi.Output.from_input(path)
            self.network_name = pulumi.Output.from_input(network_name(net.network))
            self.subnetwork_id = pulumi.Output.from_input(subnetwork_path(net.subnetwork, project, region))
            self.pods_range_name = net.pods_range_name
            self.services_range_name = net.services_range_name
            # Without range names GKE creates the secondary ranges itself, from these blocks or its defaults.
            self.pods_cidr = str(net.pods_cidr) if net.pods_cidr and not net.pods_range_name else None
            self.services_cidr = (
                str(net.services_cidr) if net.services_cidr and not net.services_range_name else None
            )
            self.register_outputs({"networkId": self.network_id, "subnetworkId": self.subnetwork_id})
            return

        pods = str(net.pods_cidr or GCP_DEFAULT_PODS_CIDR)
        services = str(net.services_cidr or GCP_DEFAULT_SERVICES_CIDR)
        vpc = gcp.compute.Network(
            f"{name}-vpc",
            name=f"{place.cluster_name}-vpc",
            project=project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            description=f"trainplane platform {place.cluster_name}",
            # Jumbo frames only where Managed Lustre is used; other platforms keep GCP's default. The
            # provider patches MTU in place (magic-modules PR 13995, 2025), no network replacement.
            mtu=LUSTRE_MTU if args.lustre_port is not None else None,
            opts=child,
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=f"{place.cluster_name}-{region}",
            project=project,
            region=region,
            network=vpc.id,
            ip_cidr_range=str(net.cidr),
            # Nodes have no external IPs; Google APIs (GCS checkpoints, Artifact Registry) stay reachable.
            private_ip_google_access=True,
            secondary_ip_ranges=[
                {"range_name": PODS_RANGE, "ip_cidr_range": pods},
                {"range_name": SERVICES_RANGE, "ip_cidr_range": services},
            ],
            opts=child,
        )
        self.network_id = vpc.id
        self.network_name = vpc.name
        self.cidr = str(net.cidr)
        self.subnetwork_id = subnet.id
        self.pods_range_name, self.services_range_name = PODS_RANGE, SERVICES_RANGE
        self.pods_cidr, self.services_cidr = pods, services

        if args.private_nodes is not False:
            router = gcp.compute.Router(
                f"{name}-router", project=project, region=region, network=vpc.id, opts=child
            )
            gcp.compute.RouterNat(
                f"{name}-nat",
                project=project,
                region=region,
                router=router.name,
                nat_ip_allocate_option="AUTO_ONLY",
                # Only the platform's subnet (nodes and pods) gets egress, not every subnet of the VPC.
                source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
                subnetworks=[{"name": subnet.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
                log_config={"enable": True, "filter": "ERRORS_ONLY"},
                opts=child,
            )

        # Training traffic (NCCL/gloo, torchrun rendezvous, Prometheus scrapes) uses arbitrary ports between
        # nodes and pods of this platform; nothing outside the node subnet and pod range may use them.
        gcp.compute.Firewall(
            f"{name}-intra",
            project=project,
            network=vpc.id,
            direction="INGRESS",
            priority=1000,
            description="nodes and pods of this platform talk to its nodes on any port",
            source_ranges=[str(net.cidr), pods],
            target_tags=[self.node_tag],
            allows=[{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}],
            opts=child,
        )

        if args.lustre_port is not None:
            psa_cidr = net.private_services_cidr or GCP_DEFAULT_PRIVATE_SERVICES_CIDR
            self.private_services_cidr = str(psa_cidr)
            psa_range = gcp.compute.GlobalAddress(
                f"{name}-psa",
                project=project,
                network=vpc.id,
                purpose="VPC_PEERING",
                address_type="INTERNAL",
                address=str(psa_cidr.network_address),
                prefix_length=psa_cidr.prefixlen,
                description="private services access range (Managed Lustre)",
                labels=place.labels,
                opts=child,
            )
            self.private_services = gcp.servicenetworking.Connection(
                f"{name}-psa-peering",
                network=vpc.id,
                service="servicenetworking.googleapis.com",
                reserved_peering_ranges=[psa_range.name],
                opts=child,
            )
            # Lustre servers in the peered range reach the nodes' LNet port; nothing else comes in from there.
            gcp.compute.Firewall(
                f"{name}-lustre",
                project=project,
                network=vpc.id,
                direction="INGRESS",
                priority=1000,
                description="Managed Lustre (private services range) to the nodes' LNet port",
                source_ranges=[str(psa_cidr)],
                target_tags=[self.node_tag],
                allows=[{"protocol": "tcp", "ports": [str(args.lustre_port)]}],
                opts=child,
            )

        self.register_outputs({"networkId": self.network_id, "subnetworkId": self.subnetwork_id})


# The names this module had before networks were named alike on every cloud.
GcpNetwork = Network
GcpNetworkArgs = NetworkArgs
