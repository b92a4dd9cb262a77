"""The IAM role every EKS node group's instances run as (kept minimal: pods use IRSA)."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    # The VPC CNI runs on the node and assigns pod addresses with the node's credentials.
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
)


class NodeRole(pulumi.ComponentResource):
    """The IAM role every node group's instances run as (kept minimal: pods use IRSA)."""

    arn: pulumi.Output[str]
    attachments: list[aws.iam.RolePolicyAttachment]

    def __init__(self, name: str, tags: dict[str, str], opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:NodeRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "ec2.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
            description="EKS worker nodes",
            tags=tags,
            opts=child,
        )
        self.attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-{arn.rsplit('/', 1)[-1]}", role=role.name, policy_arn=arn, opts=child
            )
            for arn in NODE_POLICIES
        ]
        self.arn = role.arn
        self.register_outputs({"arn": self.arn})
