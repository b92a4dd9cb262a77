"""The VPC made across zones, and a VPC brought by the user."""

from __future__ import annotations

import ipaddress

import pytest

from components.aws.network import subnet_plan
from tests.helpers.aws import NODE_GROUP, one, plan

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

SUBNET = "aws:ec2/subnet:Subnet"


def test_subnet_plan_fits_the_vpc_without_overlap():
    for cidr, zones in (("10.40.0.0/16", 3), ("10.0.0.0/20", 6), ("172.16.0.0/12", 2)):
        net = ipaddress.IPv4Network(cidr)
        blocks = [ipaddress.IPv4Network(c) for pair in subnet_plan(net, zones) for c in pair]
        assert len(blocks) == 2 * zones
        assert all(b.subnet_of(net) for b in blocks)
        assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])
    private, public = subnet_plan(ipaddress.IPv4Network("10.40.0.0/16"), 3)[0]
    assert (private, public) == ("10.40.0.0/19", "10.40.224.0/22")


def test_vpc_spans_the_zones_with_tagged_public_and_private_subnets():
    result = plan("aws-dev")
    vpc = one(result, "aws:ec2/vpc:Vpc").inputs
    assert vpc["cidrBlock"] == "10.40.0.0/16" and vpc["enableDnsHostnames"] is True
    subnets = result.of_type(SUBNET)
    private = [s for s in subnets if s.inputs["tags"].get("kubernetes.io/role/internal-elb") == "1"]
    public = [s for s in subnets if s.inputs["tags"].get("kubernetes.io/role/elb") == "1"]
    assert len(private) == len(public) == 3 and len(subnets) == 6
    assert {s.inputs["availabilityZone"] for s in private} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    for s in subnets:
        assert s.inputs["tags"]["kubernetes.io/cluster/ml-dev"] == "shared"
        assert not s.inputs.get("mapPublicIpOnLaunch")
    # One NAT per zone; each private subnet routes to the internet through its own zone's NAT.
    nats = result.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == 3
    routes = [r for r in result.of_type("aws:ec2/routeTable:RouteTable") if "private" in r.name]
    assert sorted(r.inputs["routes"][0]["natGatewayId"] for r in routes) == sorted(
        f"{n.name}-id" for n in nats
    )
    # Nodes and the control plane use the private subnets only.
    cluster_subnets = one(result, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"]
    assert sorted(cluster_subnets) == sorted(f"{s.name}-id" for s in private)


def test_bring_your_own_vpc_creates_no_network_and_uses_the_given_subnets():
    result = plan("aws-byo-vpc")
    given = ["subnet-0aa11bb22cc33dd44", "subnet-0ee55ff66aa77bb88", "subnet-0cc99dd00ee11ff22"]
    for t in (
        "aws:ec2/vpc:Vpc",
        SUBNET,
        "aws:ec2/natGateway:NatGateway",
        "aws:ec2/internetGateway:InternetGateway",
    ):
        assert not result.of_type(t), t
    for ng in result.of_type(NODE_GROUP):
        assert ng.inputs["subnetIds"] == given
    assert one(result, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"] == given
    node_sg = one(result, "aws:ec2/securityGroup:SecurityGroup", "ml-shared-net-nodes")
    assert node_sg.inputs["vpcId"] == "vpc-0a1b2c3d4e5f60718"
