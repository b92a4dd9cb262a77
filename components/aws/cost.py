"""What `trainplane plan` needs to cost and time an AWS platform (no pulumi_aws import).

Machine prices are the catalog's (components/aws/data/catalog.yaml, `pricing`); this module holds the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from components.spec import PlatformSpec

# Rough creation times in seconds per resource type, from provider docs and deploy logs (FSx and the
# association from ai-on-eks comments). Used only to find the critical path and estimate its length.
CREATE_SECONDS: dict[str, float] = {
    "aws:eks/cluster:Cluster": 600,
    "aws:eks/nodeGroup:NodeGroup": 240,
    "aws:eks/addon:Addon": 60,
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": 2,
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": 5,
    "aws:fsx/lustreFileSystem:LustreFileSystem": 600,
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": 420,
    "aws:efs/fileSystem:FileSystem": 30,
    "aws:efs/mountTarget:MountTarget": 90,
    "aws:ec2/natGateway:NatGateway": 100,
    "aws:ec2/eip:Eip": 5,
    "aws:ec2/vpc:Vpc": 5,
    "aws:kms/key:Key": 10,
    "aws:iam/role:Role": 5,
    "aws:s3/bucket:Bucket": 5,
    "aws:s3/bucketV2:BucketV2": 5,
}

# The EKS control plane in USD per hour, for a Kubernetes version in standard support (AWS containers
# blog, "Amazon EKS extended support for Kubernetes versions pricing": $0.10 per cluster per hour; $0.60
# in extended support).
CONTROL_PLANE_HOURLY = 0.10


def cost_assumptions(spec: PlatformSpec) -> list[str]:
    """Rack pools (P6e-GB200/GB300) are bought as Capacity Blocks of whole UltraServers, at a price EC2 does
    not list (the catalog's capacityBlockHourly is null): say what the block holds and that it is unpriced."""
    from components.aws.ultraserver import rack_domain, ultraserver_count
    from components.catalog import catalog

    lines = []
    for pool in spec.node_pools:
        if not pool.gpu or pool.capacity != "capacity-block":
            continue
        shape = catalog().machine("aws", pool.instance_type) if pool.instance_type else None
        shapes = [shape] if shape else catalog().shapes("aws", pool.gpu, pool.gpus_per_node)
        rack = rack_domain(shapes, pool.effective_max_nodes)
        if rack is None:
            continue
        count = ultraserver_count(pool.effective_max_nodes, rack)
        priced = (
            o := spec.pricing.overrides.get(shapes[0].name)
        ) is not None and o.reserved_hourly is not None
        lines.append(
            f"{pool.name}: {count} UltraServer(s) of {rack.nodes} {shapes[0].name} nodes "
            f"({count * rack.gpus} {pool.gpu} GPUs, one NVLink domain of {rack.gpus} each), bought whole as a "
            "Capacity Block"
            + (
                ""
                if priced
                else f"; EC2 lists no price for it (catalog capacityBlockHourly: null): set "
                f"pricing.overrides.{shapes[0].name}.reservedHourly to the block's price per instance-hour"
            )
        )
    return lines
