"""What AWS would answer: computed outputs per resource type and invoke results (account 123456789012).

Answers are per region: the stack's `aws:region` (us-east-1 when unset, the provider's own default is
none) picks the zones (moto's per-region data, components/aws/mock_zones.py), the partition, and the
region in ARNs, endpoints and DNS names.
"""

from __future__ import annotations

import json
import uuid
import zlib
from typing import Any

from pulumi.runtime.config import get_config

from components.aws.mock_zones import ZONES
from components.backends import MockAnswers

ACCOUNT = "123456789012"
DEFAULT_REGION = "us-east-1"


def region() -> str:
    """The region the plan runs in: the stack's `aws:region`."""
    return str(get_config("aws:region") or DEFAULT_REGION)


def partition(name: str | None = None) -> tuple[str, str]:
    """(partition, DNS suffix) of a region (botocore endpoints.json: aws, aws-cn, aws-us-gov)."""
    name = name or region()
    if name.startswith("cn-"):
        return "aws-cn", "amazonaws.com.cn"
    if name.startswith("us-gov-"):
        return "aws-us-gov", "amazonaws.com"
    return "aws", "amazonaws.com"


def zones(name: str | None = None) -> tuple[list[str], list[str]]:
    """(zone names, zone ids) of a region, in its order; none for a region moto does not know."""
    found = ZONES.get(name or region(), ())
    return [z for z, _ in found], [i for _, i in found]


def _arn(service: str, resource: str) -> str:
    return f"arn:{partition()[0]}:{service}:{region()}:{ACCOUNT}:{resource}"


def _dns(host: str) -> str:
    return f"{host}.{region()}.{partition()[1]}"


def _availability_zones(token: str, args: dict[str, Any]) -> dict[str, Any]:
    names, ids = zones()
    return {"names": names, "zoneIds": ids, "id": region(), "state": "available"}


def _eks_cluster(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "arn": _arn("eks", f"cluster/{inputs.get('name', name)}"),
        "endpoint": f"https://{name.upper()[:8]}0A1B2C3D4E5F.gr7.{region()}.eks.{partition()[1]}",
        "certificateAuthority": {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM="},
        "identities": [{"oidcs": [{"issuer": f"https://{_dns('oidc.eks')}/id/0A1B2C3D4E5F6A7B"}]}],
        "version": inputs.get("version") or "1.33",
        "vpcConfig": {**(inputs.get("vpcConfig") or {}), "clusterSecurityGroupId": "sg-0c1a2b3c4d5e6f700"},
        "status": "ACTIVE",
    }


def _bucket_name(name: str, inputs: dict[str, Any]) -> str:
    # With bucket_prefix the provider appends a 26-character unique suffix.
    if inputs.get("bucket"):
        return inputs["bucket"]
    if inputs.get("bucketPrefix"):
        return f"{inputs['bucketPrefix']}20260101000000000000000001"
    return f"{name}-a1b2c3"


def _node_group(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    # Managed node groups own an auto scaling group named eks-<node group name>-<uuid>; the
    # autoscaler tags and the priority expander's patterns must target that name.
    group = inputs.get("nodeGroupName") or name
    asg = f"eks-{group}-{uuid.uuid5(uuid.NAMESPACE_DNS, group)}"
    return {
        "arn": _arn("eks", f"nodegroup/{inputs.get('clusterName', 'cluster')}/{group}/1a2b"),
        "resources": [{"autoscalingGroups": [{"name": asg}], "remoteAccessSecurityGroupId": ""}],
        "status": "ACTIVE",
        # Optional+Computed: EKS reports none where the launch template names the type.
        "instanceTypes": inputs.get("instanceTypes") or [],
    }


COMPUTED = {
    "aws:eks/cluster:Cluster": _eks_cluster,
    "aws:eks/nodeGroup:NodeGroup": _node_group,
    "aws:iam/policy:Policy": lambda n, i: {"arn": f"arn:aws:iam::{ACCOUNT}:policy/{i.get('name') or n}"},
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": lambda n, i: {
        "arn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{str(i.get('url', '')).removeprefix('https://')}",
    },
    "aws:kms/key:Key": lambda n, i: {"arn": _arn("kms", f"key/{n}-0000"), "keyId": f"{n}-0000"},
    # An S3 bucket's id is its name.
    "aws:s3/bucket:Bucket": lambda n, i: {
        "id": _bucket_name(n, i),
        "bucket": _bucket_name(n, i),
        "arn": f"arn:aws:s3:::{_bucket_name(n, i)}",
        # Optional+Computed (pulumi-aws 7.51 s3.Bucket `acl` output): empty where no canned ACL was set.
        "acl": i.get("acl") or "",
    },
    "aws:s3/bucketV2:BucketV2": lambda n, i: {
        "bucket": i.get("bucket") or f"{n}-a1b2c3",
        "arn": f"arn:aws:s3:::{i.get('bucket') or f'{n}-a1b2c3'}",
    },
    "aws:fsx/lustreFileSystem:LustreFileSystem": lambda n, i: {
        "arn": _arn("fsx", f"file-system/fs-0{n[:6]}"),
        "dnsName": _dns(f"fs-0{zlib.crc32(n.encode()) % 10**16:016d}.fsx"),
        "mountName": "abcdefgh",
    },
    "aws:efs/fileSystem:FileSystem": lambda n, i: {
        "arn": _arn("elasticfilesystem", f"file-system/fs-{n[:6]}"),
        "dnsName": _dns(f"fs-{n[:6]}.efs"),
    },
    "aws:ec2/launchTemplate:LaunchTemplate": lambda n, i: {
        "latestVersion": 1,
        "arn": _arn("ec2", f"launch-template/{n}"),
    },
    "aws:ec2/vpc:Vpc": lambda n, i: {
        "arn": _arn("ec2", f"vpc/{n}"),
        "defaultSecurityGroupId": "sg-0default0000",
    },
    "aws:ec2/securityGroup:SecurityGroup": lambda n, i: {
        "arn": _arn("ec2", f"security-group/{n}"),
        "name": i.get("name") or f"{n}-sg",
    },
    "aws:ec2/placementGroup:PlacementGroup": lambda n, i: {
        "name": i.get("name") or f"{n}-pg",
        "arn": _arn("ec2", f"placement-group/{n}"),
        "placementGroupId": f"pg-0{zlib.crc32(n.encode()) % 10**12:012d}",
    },
    "aws:ec2/eip:Eip": lambda n, i: {"allocationId": f"eipalloc-{n[-8:]}", "publicIp": "203.0.113.20"},
    "aws:eks/accessEntry:AccessEntry": lambda n, i: {
        "accessEntryArn": _arn("eks", f"access-entry/{i.get('clusterName', 'cluster')}/{n}"),
    },
    "aws:iam/role:Role": lambda n, i: {
        "arn": f"arn:aws:iam::{ACCOUNT}:role/{i.get('name') or n}",
        "name": i.get("name") or n,
        "uniqueId": "AROA1",
    },
    "aws:cloudwatch/logGroup:LogGroup": lambda n, i: {"arn": _arn("logs", f"log-group:{i.get('name') or n}")},
    "aws:efs/mountTarget:MountTarget": lambda n, i: {"dnsName": _dns(f"{i.get('fileSystemId')}.efs")},
}


def _policy_document(token: str, args: dict[str, Any]) -> dict[str, Any]:
    statements = []
    for s in args.get("statements", []):
        stmt: dict[str, Any] = {"Effect": s.get("effect", "Allow")}
        for key, out in (("actions", "Action"), ("resources", "Resource"), ("sid", "Sid")):
            if s.get(key):
                stmt[out] = s[key]
        statements.append(stmt)
    return {"json": json.dumps({"Version": "2012-10-17", "Statement": statements})}


INVOKES = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": _availability_zones,
    "aws:index/getCallerIdentity:getCallerIdentity": lambda t, a: {
        "accountId": ACCOUNT,
        # What STS answers for a CI job that assumed a role: a session ARN, not the role's.
        "arn": f"arn:{partition()[0]}:sts::{ACCOUNT}:assumed-role/platform-deployer/ci",
        "userId": "AROAEXAMPLE:ci",
        "id": ACCOUNT,
    },
    "aws:index/getPartition:getPartition": lambda t, a: {
        "partition": partition()[0],
        "dnsSuffix": partition()[1],
        "id": partition()[0],
    },
    "aws:index/getRegion:getRegion": lambda t, a: {"name": region(), "region": region(), "id": region()},
    "aws:iam/getPolicyDocument:getPolicyDocument": _policy_document,
    # The IAM role behind an STS session, with its path (access entries need the role ARN).
    "aws:iam/getSessionContext:getSessionContext": lambda t, a: {
        "arn": a.get("arn"),
        "issuerArn": f"arn:aws:iam::{ACCOUNT}:role/platform/platform-deployer",
        "issuerId": "AROAEXAMPLE",
        "issuerName": "platform-deployer",
        "sessionName": "ci",
        "id": a.get("arn"),
    },
}

ANSWERS = MockAnswers(computed=COMPUTED, invokes=INVOKES)
