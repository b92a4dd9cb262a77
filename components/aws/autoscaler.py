"""Cluster autoscaler: Helm release, its IRSA role scoped to this cluster's groups, priority expander.

The autoscaler discovers the node groups' auto scaling groups by the tags `NodePool` puts on them and
scales a GPU pool up from zero when a GPU pod is pending. IAM: the Describe* calls cannot be scoped
(AWS evaluates them on `*`), but the two calls that change capacity are limited to the auto scaling
groups of this cluster's node groups, by ARN and by the cluster's ownership tag.

The priority expander tries reserved pools (an ODCR or a Capacity Block, paid for whether used or not)
first, then spot pools, then on-demand pools: of the groups that fit a pending pod, the one with the
highest priority wins, so an H100 job lands on the reservation while it has room, on the spot H100 pool
next and on the on-demand one only when neither is there. Outside a Capacity Block's dates its group
cannot launch; the autoscaler backs off from a group whose scale-up fails and the expander picks the
next one (cluster-autoscaler FAQ, "What happens when a scale-up fails?" / node group backoff).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from components.aws.autoscaler_images import image_tag
from components.aws.identity import OidcIssuer, ServiceAccountRole, ServiceAccountRoleArgs
from components.aws.node_group import CA_PREFIX, SCALE_DOWN_UNNEEDED_MINUTES
from components.charts import chart

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
# The ConfigMap name the priority expander reads (cluster-autoscaler expander/priority readme).
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"
RESERVED_PRIORITY = 90
SPOT_PRIORITY = 50
ON_DEMAND_PRIORITY = 10
PRIORITY = {"reservation": RESERVED_PRIORITY, "capacity-block": RESERVED_PRIORITY, "spot": SPOT_PRIORITY}
DESCRIBE_ACTIONS = [
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
]
MUTATING_ACTIONS = ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]


def asg_arn_patterns(partition: str, region: str, account: str, node_group_names: Sequence[str]) -> list[str]:
    """ARNs of the ASGs EKS creates for `node_group_names` (named `eks-<node group>-<uuid>`)."""
    return [
        f"arn:{partition}:autoscaling:{region}:{account}:autoScalingGroup:*:autoScalingGroupName/eks-{ng}-*"
        for ng in node_group_names
    ]


def autoscaler_policy(
    partition: str, region: str, account: str, cluster_name: str, node_group_names: Sequence[str]
) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "Describe", "Effect": "Allow", "Action": DESCRIBE_ACTIONS, "Resource": "*"},
                {
                    "Sid": "ScaleOwnGroups",
                    "Effect": "Allow",
                    "Action": MUTATING_ACTIONS,
                    "Resource": asg_arn_patterns(partition, region, account, node_group_names),
                    "Condition": {"StringEquals": {f"aws:ResourceTag/{CA_PREFIX}/{cluster_name}": "owned"}},
                },
                {
                    # Scale-from-zero reads labels and taints of managed node groups from EKS too.
                    "Sid": "DescribeOwnNodegroups",
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": [f"arn:{partition}:eks:{region}:{account}:nodegroup/{cluster_name}/*/*"],
                },
            ],
        }
    )


def asg_name_regex(node_group_name: str) -> str:
    """A regex that matches exactly the ASG EKS makes for a node group (`eks-<name>-<uuid>`)."""
    # Node group names are DNS labels (a-z, 0-9, '-'): nothing in them needs escaping.
    assert re.fullmatch(r"[a-z0-9-]+", node_group_name), node_group_name
    return f"^eks-{node_group_name}-[0-9a-f]{{8}}(-[0-9a-f]{{4}}){{3}}-[0-9a-f]{{12}}$"


def priorities(pools: Sequence[tuple[str, str]]) -> dict[int, list[str]]:
    """Priority expander table from (node group name, capacity): reserved first, spot next, on-demand last."""
    table: dict[int, list[str]] = {}
    for ng, capacity in pools:
        level = PRIORITY.get(capacity, ON_DEMAND_PRIORITY)
        table.setdefault(level, []).append(asg_name_regex(ng))
    return dict(sorted(table.items()))


@dataclass(frozen=True, kw_only=True)
class ClusterAutoscalerArgs:
    cluster_name: str
    region: str
    kubernetes_version: str
    oidc: OidcIssuer
    provider: k8s.Provider
    # (node group name, capacity) of every pool the autoscaler may scale.
    node_groups: Sequence[tuple[str, str]]
    # Resources in-cluster objects must wait for (the system node groups).
    ready: Sequence[pulumi.Resource] = ()
    tags: dict[str, str] = field(default_factory=dict)


class ClusterAutoscaler(pulumi.ComponentResource):
    """cluster-autoscaler on the system pool, with the priority expander and an IRSA role."""

    role_arn: pulumi.Output[str]
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:ClusterAutoscaler", name, None, opts)
        identity = aws.get_caller_identity()
        partition = aws.get_partition().partition or "aws"
        names = [ng for ng, _ in args.node_groups]
        role = ServiceAccountRole(
            f"{name}-irsa",
            ServiceAccountRoleArgs(
                oidc=args.oidc,
                namespace=NAMESPACE,
                service_account=SERVICE_ACCOUNT,
                policy=autoscaler_policy(
                    partition, args.region, identity.account_id, args.cluster_name, names
                ),
                description=f"cluster-autoscaler of {args.cluster_name}: its own node groups only",
                tags=args.tags,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.role_arn = role.arn
        in_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.ready))
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-priorities",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=PRIORITY_CONFIGMAP, namespace=NAMESPACE),
            data={"priorities": yaml.safe_dump(priorities(args.node_groups), sort_keys=True)},
            opts=in_cluster,
        )
        c = chart("cluster-autoscaler")
        # Each key as chart 9.59.0 reads it (kubernetes/autoscaler@cluster-autoscaler-chart-9.59.0:
        # cluster-autoscaler/charts/cluster-autoscaler/templates, read 2026-11-28): deployment.yaml passes
        # --cloud-provider, --node-group-auto-discovery=asg:tag=<autoDiscovery.tags> (default tags
        # k8s.io/cluster-autoscaler/enabled and .../<autoDiscovery.clusterName>), env AWS_REGION from
        # awsRegion, priorityClassName, image <image.repository>:<image.tag>, one --key=value per extraArgs
        # entry; serviceaccount.yaml names the account rbac.serviceAccount.name with its annotations (IRSA);
        # role.yaml lets it watch the cluster-autoscaler-priority-expander ConfigMap when extraArgs.expander
        # has `priority`; _helpers.tpl: fullnameOverride names the objects. Same reading as at 9.47.0.
        values = {
            "cloudProvider": "aws",
            "awsRegion": args.region,
            "autoDiscovery": {"clusterName": args.cluster_name},
            "fullnameOverride": SERVICE_ACCOUNT,
            "rbac": {
                "serviceAccount": {
                    "create": True,
                    "name": SERVICE_ACCOUNT,
                    "annotations": {"eks.amazonaws.com/role-arn": role.arn},
                }
            },
            "extraArgs": {
                # Priority first (spot before on-demand), least waste among equals.
                "expander": "priority,least-waste",
                "balance-similar-node-groups": True,
                # System pods (DaemonSets aside) must not keep an idle GPU node alive.
                "skip-nodes-with-system-pods": False,
                # GPU nodes take a while to boot and pull images; do not give up on them too early.
                "max-node-provision-time": "25m0s",
                # An empty node (a quarantined GPU node too) goes after this; the GPU health controller
                # holds a quarantined one until its diagnostic and replaceAfterMinutes decide.
                "scale-down-unneeded-time": f"{SCALE_DOWN_UNNEEDED_MINUTES}m",
            },
            "priorityClassName": "system-cluster-critical",
        }
        values["image"] = {"tag": image_tag(args.kubernetes_version)}
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name="cluster-autoscaler",
            namespace=NAMESPACE,
            **c.release_args(),
            values=values,
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[*args.ready, config_map]
            ),
        )
        self.register_outputs({"roleArn": self.role_arn})
