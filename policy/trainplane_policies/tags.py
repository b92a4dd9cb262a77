"""trainplane-required-tags: every cloud resource that takes tags (AWS) or labels (GCP), and every
Kubernetes namespace, says which team owns it and which cost center pays for it.

The platform writes them from its spec's `team` and `costCenter` (components/spec/platform.py
resource_tags; namespaces: components/bundle.py owner_labels); a stack without them fails here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from .common import config_schema, dig, settings

NAME = "trainplane-required-tags"

# AWS resource types whose provider schema has a `tags` input (pulumi_aws 7.51: each one's *Args class
# takes `tags`; tests/unit/policy/trainplane_policies/test_policy_pack.py checks this list against the SDK for every type the
# reference stacks create). Types outside it are checked too where their inputs carry `tags`.
AWS_TAGGED = frozenset(
    {
        "aws:cloudwatch/logGroup:LogGroup",
        "aws:ec2/eip:Eip",
        "aws:ec2/internetGateway:InternetGateway",
        "aws:ec2/launchTemplate:LaunchTemplate",
        "aws:ec2/natGateway:NatGateway",
        "aws:ec2/placementGroup:PlacementGroup",
        "aws:ec2/routeTable:RouteTable",
        "aws:ec2/securityGroup:SecurityGroup",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/vpc:Vpc",
        "aws:ebs/volume:Volume",
        "aws:efs/fileSystem:FileSystem",
        "aws:eks/accessEntry:AccessEntry",
        "aws:eks/addon:Addon",
        "aws:eks/cluster:Cluster",
        "aws:eks/nodeGroup:NodeGroup",
        "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
        "aws:fsx/lustreFileSystem:LustreFileSystem",
        "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
        "aws:iam/role:Role",
        "aws:kms/key:Key",
        "aws:s3/bucket:Bucket",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    }
)
# GCP resource types and where their labels are (pulumi_gcp 10.2 input names: `labels`, GKE's
# `resourceLabels`, a node pool's `nodeConfig.resourceLabels` on its VMs).
GCP_LABELS = {
    "gcp:compute/globalAddress:GlobalAddress": "labels",
    "gcp:container/cluster:Cluster": "resourceLabels",
    "gcp:container/nodePool:NodePool": "nodeConfig.resourceLabels",
    "gcp:filestore/instance:Instance": "labels",
    "gcp:lustre/instance:Instance": "labels",
    "gcp:storage/bucket:Bucket": "labels",
}
NAMESPACE = "kubernetes:core/v1:Namespace"

PROPERTIES: dict[str, dict[str, Any]] = {
    "tagKeys": {
        "type": "array",
        "items": {"type": "string"},
        "default": ["team", "cost-center"],
        "description": "Tag (AWS) and label (GCP) keys every taggable cloud resource must carry, non-empty",
    },
    "namespaceLabelKeys": {
        "type": "array",
        "items": {"type": "string"},
        "default": ["trainplane.dev/owner", "trainplane.dev/cost-center"],
        "description": "Labels every Kubernetes namespace must carry, non-empty",
    },
}


def _where(args: ResourceValidationArgs) -> tuple[str, str] | None:
    """(the input path holding the resource's tags or labels, which config key applies), None: untagged."""
    t = args.resource_type
    if t in GCP_LABELS:
        return GCP_LABELS[t], "tagKeys"
    if t in AWS_TAGGED or (t.startswith("aws:") and "tags" in args.props):
        return "tags", "tagKeys"
    if t == NAMESPACE:
        return "metadata.labels", "namespaceLabelKeys"
    return None


def provider_defaults(args: ResourceValidationArgs) -> dict[str, Any]:
    """Tags (labels) the resource's provider adds to every resource it makes: AWS `defaultTags.tags`, GCP
    `defaultLabels` (pulumi_aws ProviderDefaultTagsArgs, pulumi_gcp Provider default_labels). Provider
    inputs may arrive JSON-encoded (an explicit provider's nested config), or as an object."""
    if args.provider is None:
        return {}
    key = "defaultTags" if args.resource_type.startswith("aws:") else "defaultLabels"
    value = args.provider.props.get(key)
    if isinstance(value, str):
        value = json.loads(value or "{}")
    found = dig(value, "tags") if key == "defaultTags" else value
    return dict(found) if isinstance(found, Mapping) else {}


def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    where = _where(args)
    if where is None:
        return
    path, key = where
    own = dig(args.props, path) or {}
    tags: Any = {**(provider_defaults(args) if key == "tagKeys" else {}), **own}
    missing = sorted(k for k in settings(args, PROPERTIES)[key] if not tags.get(k))
    if missing:
        report_violation(
            f"{args.resource_type} {args.name}: {path} lack {', '.join(missing)} (set the platform's "
            "`team` and `costCenter`, or a team's `costCenter`)",
            None,
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Every taggable cloud resource and every namespace names its owning team and cost center.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(PROPERTIES),
    validate=validate,
)
