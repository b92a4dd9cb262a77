"""The VPC a cluster runs in: made here across N zones, or brought by the user (vpcId + subnetIds).

Made here: one public and one private subnet per zone, an internet gateway, and one NAT gateway per zone
so a zone outage or a NAT's bandwidth limit does not stall image pulls of the other zones. Nodes run in
the private subnets; the subnet tags are the ones the AWS load balancer controller and EKS look for.

Either way the component also creates the node security group: every node carries it (through the
launch templates), so storage can admit "the nodes" without waiting for the EKS cluster to exist.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.aws.capacity import vpc_zones
from components.spec import ConfigError

# subnet_plan cuts 7 private subnets at most (block 7 holds the public ones).
MAX_ZONES = 7


@dataclass(frozen=True, kw_only=True)
class NetworkArgs:
    cluster_name: str
    cidr: ipaddress.IPv4Network = field(default_factory=lambda: ipaddress.IPv4Network("10.0.0.0/16"))
    # Number of availability zones to spread over (ignored when bringing a VPC).
    zones: int = 3
    # Zones node pools name (a reservation's zone): the VPC spans them too (components.aws.capacity).
    pool_zones: tuple[str, ...] = ()
    # Bring your own: the VPC id and the private subnets nodes run in.
    vpc_id: str | None = None
    subnet_ids: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def subnet_plan(cidr: ipaddress.IPv4Network, zones: int) -> list[tuple[str, str]]:
    """(private, public) CIDRs per zone: large private subnets, since the VPC CNI gives pods VPC addresses.

    The VPC splits into 8 blocks: blocks 0..zones-1 are private subnets, block 7 is cut into 8 small
    public subnets (NAT gateways and load balancers only). A /16 gives /19 private and /22 public.
    """
    blocks = list(cidr.subnets(prefixlen_diff=3))
    public = list(blocks[7].subnets(prefixlen_diff=3))
    return [(str(blocks[i]), str(public[i])) for i in range(zones)]


class Network(pulumi.ComponentResource):
    """A VPC with private node subnets (made or adopted) and the node security group."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    # Zone name of each private subnet, index-aligned; None where unknown (brought subnets).
    zone_names: list[str | None]
    node_security_group_id: pulumi.Output[str]
    cidr: str

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}
        if args.vpc_id:
            self.vpc_id = pulumi.Output.from_input(args.vpc_id)
            self.private_subnet_ids = [pulumi.Output.from_input(s) for s in args.subnet_ids]
            self.zone_names = [None] * len(args.subnet_ids)
            self.cidr = ""
        else:
            self._make_vpc(name, args, cluster_tag, child)
        self.node_security_group_id = aws.ec2.SecurityGroup(
            f"{name}-nodes",
            vpc_id=self.vpc_id,
            description=f"Nodes of EKS cluster {args.cluster_name} (storage admits this group)",
            tags={**args.tags, "Name": f"{args.cluster_name}-nodes"},
            opts=child,
        ).id
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids})

    def _make_vpc(self, name: str, args: NetworkArgs, cluster_tag: dict[str, str], child) -> None:
        # Skip Local Zones and Wavelength zones: EKS node groups and NAT gateways need regular zones.
        available = aws.get_availability_zones(
            state="available",
            filters=[
                aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])
            ],
        )
        names = list(available.names)
        if len(names) < args.zones:
            raise ConfigError(
                [f"platform.network.zones: {args.zones}, but the region has {len(names)} availability zones"]
            )
        zones = vpc_zones(names, args.zones, args.pool_zones)
        if len(zones) > MAX_ZONES:
            raise ConfigError(
                [
                    f"platform.nodePools[].zones: the VPC would span {len(zones)} zones (network.zones plus "
                    f"the pools' zones); at most {MAX_ZONES}"
                ]
            )
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=str(args.cidr),
            # EKS private endpoints, EFS and FSx DNS names all need VPC DNS.
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**args.tags, "Name": args.cluster_name},
            opts=child,
        )
        in_vpc = pulumi.ResourceOptions(parent=vpc)
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={**args.tags, "Name": args.cluster_name}, opts=in_vpc
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**args.tags, "Name": f"{args.cluster_name}-public"},
            opts=in_vpc,
        )
        private_ids: list[pulumi.Output[str]] = []
        for zone, (private_cidr, public_cidr) in zip(zones, subnet_plan(args.cidr, len(zones)), strict=True):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                availability_zone=zone,
                cidr_block=public_cidr,
                map_public_ip_on_launch=False,
                tags={
                    **args.tags,
                    **cluster_tag,
                    "Name": f"{args.cluster_name}-public-{zone}",
                    "kubernetes.io/role/elb": "1",
                },
                opts=in_vpc,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_rt.id, opts=in_vpc
            )
            eip = aws.ec2.Eip(
                f"{name}-nat-{zone}",
                domain="vpc",
                tags={**args.tags, "Name": f"{args.cluster_name}-nat-{zone}"},
                opts=in_vpc,
            )
            nat = aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                subnet_id=public.id,
                allocation_id=eip.allocation_id,
                tags={**args.tags, "Name": f"{args.cluster_name}-{zone}"},
                opts=pulumi.ResourceOptions(parent=vpc, depends_on=[igw]),
            )
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                availability_zone=zone,
                cidr_block=private_cidr,
                tags={
                    **args.tags,
                    **cluster_tag,
                    "Name": f"{args.cluster_name}-private-{zone}",
                    "kubernetes.io/role/internal-elb": "1",
                },
                opts=in_vpc,
            )
            private_rt = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags={**args.tags, "Name": f"{args.cluster_name}-private-{zone}"},
                opts=in_vpc,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=private.id, route_table_id=private_rt.id, opts=in_vpc
            )
            private_ids.append(private.id)
        self.vpc_id = vpc.id
        self.private_subnet_ids = private_ids
        self.zone_names: list[str | None] = list(zones)
        self.cidr = str(args.cidr)

    def subnets_for(self, zones: list[str], single: bool = False) -> list[pulumi.Output[str]]:
        """Private subnets in `zones` (all when empty); `single` keeps one (EFA and compact placement).

        A brought VPC has no zone names here (the spec rejects pool zones with vpcId): its subnets are
        taken as listed, and a single-subnet pool gets the first one.
        """
        if zones and any(self.zone_names):
            picked = [s for s, z in zip(self.private_subnet_ids, self.zone_names, strict=True) if z in zones]
            if not picked:
                raise ValueError(f"zones {zones} are not among the network's zones {self.zone_names}")
        else:
            picked = list(self.private_subnet_ids)
        return picked[:1] if single else picked
