"""IAM roles for Kubernetes service accounts (IRSA): one role per service account, least privilege.

Each role trusts exactly one service account of this cluster (`sub` and `aud` conditions on the
cluster's OIDC provider), so a pod elsewhere in the cluster cannot assume it. Teams get read/write on
the checkpoint bucket and nothing else; Loki gets its own bucket.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.bundle import LOKI_SERVICE_ACCOUNT, MONITORING_NAMESPACE, TEAM_SERVICE_ACCOUNT, team_namespace

# What a trainer needs to write, list, resume and clean up checkpoints (multipart uploads included).
OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
]
BUCKET_ACTIONS = ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"]
# SSE-KMS: writing needs a data key, reading needs decrypt; scoped to the platform's data key.
KMS_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey"]


def trust_policy(provider_arn: str, issuer_url: str, namespace: str, service_account: str) -> str:
    """The assume-role policy that lets exactly `namespace/service_account` of this cluster in."""
    host = issuer_url.removeprefix("https://")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{host}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                            f"{host}:aud": "sts.amazonaws.com",
                        }
                    },
                }
            ],
        }
    )


def bucket_policy(bucket_arn: str, key_arn: str) -> str:
    """Read/write on one bucket and its objects, plus the KMS key its objects are encrypted with."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "Bucket", "Effect": "Allow", "Action": BUCKET_ACTIONS, "Resource": [bucket_arn]},
                {
                    "Sid": "Objects",
                    "Effect": "Allow",
                    "Action": OBJECT_ACTIONS,
                    "Resource": [f"{bucket_arn}/*"],
                },
                {"Sid": "DataKey", "Effect": "Allow", "Action": KMS_ACTIONS, "Resource": [key_arn]},
            ],
        }
    )


@dataclass(frozen=True)
class OidcIssuer:
    """The cluster's IAM OIDC provider, what every IRSA trust policy points at."""

    provider_arn: pulumi.Input[str]
    issuer_url: pulumi.Input[str]


@dataclass(frozen=True)
class ServiceAccountRoleArgs:
    oidc: OidcIssuer
    namespace: str
    service_account: str
    # Inline policy document built from resolved values (e.g. bucket ARNs), or None.
    policy: pulumi.Input[str] | None = None
    managed_policy_arns: Sequence[str] = ()
    description: str = ""
    tags: dict[str, str] | None = None


class ServiceAccountRole(pulumi.ComponentResource):
    """An IAM role one Kubernetes service account assumes through IRSA."""

    arn: pulumi.Output[str]

    def __init__(self, name: str, args: ServiceAccountRoleArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:ServiceAccountRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        trust = pulumi.Output.all(args.oidc.provider_arn, args.oidc.issuer_url).apply(
            lambda v: trust_policy(v[0], v[1], args.namespace, args.service_account)
        )
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=trust,
            description=args.description or f"IRSA for {args.namespace}/{args.service_account}",
            tags=args.tags,
            opts=child,
        )
        if args.policy is not None:
            aws.iam.RolePolicy(f"{name}-policy", role=role.name, policy=args.policy, opts=child)
        for i, arn in enumerate(args.managed_policy_arns):
            aws.iam.RolePolicyAttachment(f"{name}-managed-{i}", role=role.name, policy_arn=arn, opts=child)
        self.arn = role.arn
        self.register_outputs({"arn": self.arn})


def scoped_policy(build: Callable[..., str], *inputs: pulumi.Input[str]) -> pulumi.Output[str]:
    """A policy document from resolved inputs (ARNs are known only after their resources exist)."""
    return pulumi.Output.all(*inputs).apply(lambda v: build(*v))


@dataclass(frozen=True)
class WorkloadIdentitiesArgs:
    oidc: OidcIssuer
    teams: Sequence[str]
    checkpoint_bucket_arn: pulumi.Input[str]
    data_key_arn: pulumi.Input[str]
    # None when Loki is off (no logs bucket).
    logs_bucket_arn: pulumi.Input[str] | None = None
    tags: dict[str, str] | None = None


class WorkloadIdentities(pulumi.ComponentResource):
    """One role per team (`<team>/trainer`) on the checkpoint bucket, and Loki's role on the logs bucket."""

    team_roles: dict[str, pulumi.Output[str]]
    loki_role: pulumi.Output[str] | None

    def __init__(self, name: str, args: WorkloadIdentitiesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:WorkloadIdentities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        checkpoints = scoped_policy(bucket_policy, args.checkpoint_bucket_arn, args.data_key_arn)
        self.team_roles = {}
        for team in args.teams:
            role = ServiceAccountRole(
                f"{name}-team-{team}",
                ServiceAccountRoleArgs(
                    oidc=args.oidc,
                    namespace=team_namespace(team),
                    service_account=TEAM_SERVICE_ACCOUNT,
                    policy=checkpoints,
                    description=f"Training jobs of team {team}: checkpoint bucket only",
                    tags=args.tags,
                ),
                child,
            )
            self.team_roles[team] = role.arn
        self.loki_role = None
        if args.logs_bucket_arn is not None:
            self.loki_role = ServiceAccountRole(
                f"{name}-loki",
                ServiceAccountRoleArgs(
                    oidc=args.oidc,
                    namespace=MONITORING_NAMESPACE,
                    service_account=LOKI_SERVICE_ACCOUNT,
                    policy=scoped_policy(bucket_policy, args.logs_bucket_arn, args.data_key_arn),
                    description="Loki chunks and index: logs bucket only",
                    tags=args.tags,
                ),
                child,
            ).arn
        self.register_outputs({"teamRoles": self.team_roles})
