"""What `trainplane plan` needs to cost and time an AWS platform (no pulumi_aws import).

Machine prices are the catalog's (components/aws/data/catalog.yaml, `pricing`); this module holds the rest.
"""

from __future__ import annotations

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
