"""IAM roles for Kubernetes service accounts (IRSA): one role per service account, least privilege.

Each role trusts exactly one service account of this cluster (`sub` and `aud` conditions on the
cluster's OIDC provider), so a pod elsewhere in the cluster cannot assume it; the one exception is a
driver whose controller and node plugin run under several service accounts of one family (EFS CSI:
`efs-csi-*`), matched with `StringLike` as its docs prescribe. All teams share one checkpoint bucket,
and each team's role reaches only its own prefix `<team>/` of it (objects, and listing with an
`s3:prefix` condition), so no team can read or overwrite another's checkpoints. Loki gets its own bucket.
"""

from __future__ import annotations

import functools
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
    """The assume-role policy that lets exactly `namespace/service_account` of this cluster in.

    A `*` in `service_account` names a family of service accounts (`efs-csi-*`): IAM expands wildcards
    only under `StringLike`, so `sub` moves there while `aud` stays an exact match.
    """
    host = issuer_url.removeprefix("https://")
    sub = {f"{host}:sub": f"system:serviceaccount:{namespace}:{service_account}"}
    aud = {f"{host}:aud": "sts.amazonaws.com"}
    condition = (
        {"StringLike": sub, "StringEquals": aud}
        if "*" in service_account
        else {"StringEquals": {**sub, **aud}}
    )
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": condition,
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


def prefix_policy(bucket_arn: str, prefix: str, key_arn: str, region: str) -> str:
    """Read/write under `prefix/` of a shared bucket and nothing else of it, plus the data key via S3.

    IAM's pattern for per-folder access to one bucket (IAM user guide, "Amazon S3: Allows IAM users
    access to their S3 home directory"; S3 user guide, condition key `s3:prefix`): object actions on
    `<bucket>/<prefix>/*`, and `s3:ListBucket` only when the request's `s3:prefix` is under `<prefix>/`.
    The bare `<prefix>` is left out on purpose: listing with it would also show the keys of a team
    whose name starts the same way (`llm` would list `llm2/...`). `s3:ListBucketMultipartUploads` takes no
    prefix condition and would list every team's in-flight keys, so it is not granted (the trainer
    aborts its own uploads by key; the bucket lifecycle aborts stale ones). The data key is shared by
    every team and usable only through S3 (`kms:ViaService`), where the object prefix is the gate.
    """
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ListOwnPrefix",
                    "Effect": "Allow",
                    "Action": ["s3:ListBucket"],
                    "Resource": [bucket_arn],
                    "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}},
                },
                {
                    "Sid": "Bucket",
                    "Effect": "Allow",
                    "Action": ["s3:GetBucketLocation"],
                    "Resource": [bucket_arn],
                },
                {
                    "Sid": "OwnObjects",
                    "Effect": "Allow",
                    "Action": OBJECT_ACTIONS,
                    "Resource": [f"{bucket_arn}/{prefix}/*"],
                },
                {
                    "Sid": "DataKeyThroughS3",
                    "Effect": "Allow",
                    "Action": KMS_ACTIONS,
                    "Resource": [key_arn],
                    # KMS developer guide, condition key kms:ViaService: only requests S3 makes for the role.
                    "Condition": {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}},
                },
            ],
        }
    )


@dataclass(frozen=True)
class OidcIssuer:
    """The cluster's IAM OIDC provider, what every IRSA trust policy points at."""

    provider_arn: pulumi.Input[str]
    issuer_url: pulumi.Input[str]


@dataclass(frozen=True, kw_only=True)
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


def team_prefix(team: str) -> str:
    """The key prefix (without the trailing '/') a team's checkpoints live under in the shared bucket."""
    return team_namespace(team)


def scoped_policy(build: Callable[..., str], *inputs: pulumi.Input[str]) -> pulumi.Output[str]:
    """A policy document from resolved inputs (ARNs are known only after their resources exist)."""
    return pulumi.Output.all(*inputs).apply(lambda v: build(*v))


@dataclass(frozen=True, kw_only=True)
class WorkloadIdentitiesArgs:
    oidc: OidcIssuer
    teams: Sequence[str]
    checkpoint_bucket_arn: pulumi.Input[str]
    data_key_arn: pulumi.Input[str]
    # The region of the buckets (S3's endpoint in the data key's kms:ViaService condition).
    region: str
    # None when Loki is off (no logs bucket).
    logs_bucket_arn: pulumi.Input[str] | None = None
    tags: dict[str, str] | None = None


def _team_policy(arns: list[str], team: str, region: str) -> str:
    """The team role's policy once the bucket and key ARNs are known."""
    return prefix_policy(arns[0], team_prefix(team), arns[1], region)


class WorkloadIdentities(pulumi.ComponentResource):
    """One role per team (`<team>/trainer`) on its prefix of the checkpoint bucket; Loki's on the logs bucket."""

    team_roles: dict[str, pulumi.Output[str]]
    loki_role: pulumi.Output[str] | None

    def __init__(self, name: str, args: WorkloadIdentitiesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:WorkloadIdentities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.team_roles = {}
        for team in args.teams:
            checkpoints = pulumi.Output.all(args.checkpoint_bucket_arn, args.data_key_arn).apply(
                functools.partial(_team_policy, team=team, region=args.region)
            )
            role = ServiceAccountRole(
                f"{name}-team-{team}",
                ServiceAccountRoleArgs(
                    oidc=args.oidc,
                    namespace=team_namespace(team),
                    service_account=TEAM_SERVICE_ACCOUNT,
                    policy=checkpoints,
                    description=f"Training jobs of team {team}: its prefix of the checkpoint bucket only",
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
