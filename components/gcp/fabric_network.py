"""FabricNetworks: the extra VPCs the GPU NICs of GPUDirect machines sit in (one subnet each).

Only created when a pool's machine type has a fabric (components/gcp/fabric.py). Like Google's blueprint
(gke-a3-megagpu.yaml@v1.95.0, module `gpunets` = modules/network/multivpc): custom-mode VPCs with the
fabric's MTU, one regional subnet per VPC carved from one block, and a firewall rule per VPC that lets the
fabric's own subnet reach the platform's nodes on any TCP/UDP port and ICMP (multivpc's
`enable_internal_traffic`, default true). No NAT, no route out: GPU traffic stays between nodes.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.gcp.fabric import fabric_network_names, fabric_subnets, rdma_network_names, rdma_subnet_ranges
from components.gcp.naming import GcpPlacement


@dataclass(frozen=True, kw_only=True)
class FabricNetworksArgs:
    placement: GcpPlacement
    count: int
    mtu: int
    cidr: ipaddress.IPv4Network
    # Firewall rules target the tag every node pool of the platform carries.
    node_tag: str
    # RDMA (a3-ultragpu, a4): subnets of one VPC with the zone's RoCE network profile, and its MTU.
    rdma_subnets: int = 0
    rdma_mtu: int | None = None
    rdma_zone: str | None = None


class FabricNetworks(pulumi.ComponentResource):
    """`count` VPCs with one subnet each; `.attachments` are (network, subnetwork) names for node pools."""

    networks: tuple[gcp.compute.Network, ...]
    subnets: tuple[gcp.compute.Subnetwork, ...]
    attachments: tuple[tuple[pulumi.Output[str], pulumi.Output[str]], ...]
    rdma_attachments: tuple[tuple[pulumi.Output[str], pulumi.Output[str]], ...] = ()

    def __init__(self, name: str, args: FabricNetworksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:FabricNetworks", name, None, opts)
        place = args.placement
        child = pulumi.ResourceOptions(parent=self)
        networks, subnets = [], []
        names = fabric_network_names(place.cluster_name, args.count)
        for i, ((vpc_name, subnet_name), cidr) in enumerate(
            zip(names, fabric_subnets(args.cidr, args.count), strict=True)
        ):
            vpc = _vpc(
                f"{name}-{i}",
                vpc_name,
                place,
                args.mtu,
                f"trainplane GPUDirect network {i} of {place.cluster_name}",
                child,
            )
            subnet = _subnet(f"{name}-{i}-subnet", subnet_name, place, vpc, cidr, child)
            gcp.compute.Firewall(
                f"{name}-{i}-internal",
                project=place.project,
                network=vpc.id,
                direction="INGRESS",
                priority=1000,
                description="GPU NICs of this platform's nodes talk to each other on any port",
                source_ranges=[str(cidr)],
                target_tags=[args.node_tag],
                allows=[{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}],
                opts=child,
            )
            networks.append(vpc)
            subnets.append(subnet)
        self.networks, self.subnets = tuple(networks), tuple(subnets)
        self.attachments = tuple((n.name, s.name) for n, s in zip(networks, subnets, strict=True))
        if args.rdma_subnets:
            self.rdma_attachments = self._rdma(name, args, child)
        self.register_outputs({"networks": [n.name for n in networks]})

    def _rdma(
        self, name: str, args: FabricNetworksArgs, child: pulumi.ResourceOptions
    ) -> tuple[tuple[pulumi.Output[str], pulumi.Output[str]], ...]:
        """One VPC with the zone's RoCE profile and a subnet per RDMA NIC (gke-a3-ultragpu.yaml@v1.95.0
        `gke-a3-ultra-rdma-net`). No firewall rule: RoCE networks take none."""
        place = args.placement
        vpc_name, subnet_names = rdma_network_names(place.cluster_name, args.rdma_subnets)
        vpc = _vpc(
            f"{name}-rdma",
            vpc_name,
            place,
            args.rdma_mtu,
            f"trainplane GPUDirect RDMA network of {place.cluster_name}",
            child,
            profile=f"projects/{place.project}/global/networkProfiles/{args.rdma_zone}-vpc-roce",
        )
        ranges = rdma_subnet_ranges(args.cidr, args.rdma_subnets)
        subnets = [
            _subnet(f"{name}-rdma-{i}", subnet_name, place, vpc, cidr, child)
            for i, (subnet_name, cidr) in enumerate(zip(subnet_names, ranges, strict=True))
        ]
        return tuple((vpc.name, subnet.name) for subnet in subnets)


def _vpc(
    resource: str,
    vpc_name: str,
    place: GcpPlacement,
    mtu: int | None,
    description: str,
    child: pulumi.ResourceOptions,
    profile: str | None = None,
) -> gcp.compute.Network:
    """A custom-mode regional VPC of the fabric (no auto subnets, the fabric's MTU)."""
    return gcp.compute.Network(
        resource,
        name=vpc_name,
        project=place.project,
        auto_create_subnetworks=False,
        routing_mode="REGIONAL",
        mtu=mtu,
        network_profile=profile,
        description=description,
        opts=child,
    )


def _subnet(
    resource: str,
    subnet_name: str,
    place: GcpPlacement,
    vpc: gcp.compute.Network,
    cidr: ipaddress.IPv4Network,
    child: pulumi.ResourceOptions,
) -> gcp.compute.Subnetwork:
    return gcp.compute.Subnetwork(
        resource,
        name=subnet_name,
        project=place.project,
        region=place.region,
        network=vpc.id,
        ip_cidr_range=str(cidr),
        opts=child,
    )
