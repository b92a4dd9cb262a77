"""Google identities of a platform: the nodes' own service account, and one per workload through
Workload Identity (each team's `trainer` service account, and Loki).

Workload Identity: a Kubernetes service account `<ns>/<ksa>` acts as a Google service account (GSA) when
the GSA grants `roles/iam.workloadIdentityUser` to `serviceAccount:<project>.svc.id.goog[<ns>/<ksa>]` and
the KSA carries the annotation `iam.gke.io/gcp-service-account: <gsa email>` (the in-cluster layer adds it).
Each GSA gets object access to exactly one bucket, granted on that bucket, not on the project; a team's
GSA only to its own prefix `<team>/` of the shared checkpoint bucket (an IAM condition).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.bundle import LOKI_SERVICE_ACCOUNT, MONITORING_NAMESPACE, TEAM_SERVICE_ACCOUNT, team_namespace
from components.gcp.cluster import workload_pool
from components.gcp.naming import GcpPlacement, service_account_id

WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
# Create, read, overwrite, delete and list objects; no bucket settings, no IAM.
BUCKET_OBJECT_ROLE = "roles/storage.objectUser"
# Least-privilege node roles: logs, metrics, autoscaler metadata (GKE's recommended node role), and image
# pulls from Artifact Registry in the project.
NODE_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")


def workload_identity_member(project: str, namespace: str, service_account: str) -> str:
    return f"serviceAccount:{workload_pool(project)}[{namespace}/{service_account}]"


def prefix_condition(bucket: str, prefix: str) -> dict[str, str]:
    """An IAM condition that limits a bucket role to the objects under `prefix/` and to listings of it.

    Object permissions are checked on `projects/_/buckets/<bucket>/objects/<object>` (IAM conditions
    resource attributes, Cloud Storage resource names). `storage.objects.list` is a bucket-level call
    whose resource is the bucket itself, so it is admitted through the list request's prefix instead
    (API attribute `storage.googleapis.com/objectListPrefix`, IAM conditions attribute reference): a team
    lists under `<team>/` only. The trailing slash keeps team `ml` out of `ml2/`.
    """
    objects = f"projects/_/buckets/{bucket}/objects/{prefix}/"
    expression = (
        f'resource.name.startsWith("{objects}") || '
        f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{prefix}/")'
    )
    return {
        "title": f"{prefix}/ only",
        "description": f"objects under {prefix}/ in {bucket}, and listings of that prefix",
        "expression": expression,
    }


@dataclass(frozen=True, kw_only=True)
class NodeIdentityArgs:
    placement: GcpPlacement


class NodeIdentity(pulumi.ComponentResource):
    """The service account GKE nodes run as (instead of the Compute Engine default with Editor)."""

    account: gcp.serviceaccount.Account
    bindings: list[gcp.projects.IAMMember]

    def __init__(self, name: str, args: NodeIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:NodeIdentity", name, None, opts)
        place = args.placement
        project = place.project
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            account_id=service_account_id(place.cluster_name, "nodes"),
            display_name=f"GKE nodes of {place.cluster_name}",
            project=project,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.bindings = [
            gcp.projects.IAMMember(
                f"{name}-{role.split('/')[-1].replace('.', '-').lower()}",
                project=project,
                role=role,
                member=pulumi.Output.concat("serviceAccount:", self.account.email),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role in NODE_ROLES
        ]
        self.email = self.account.email
        self.register_outputs({"email": self.account.email})


@dataclass(frozen=True, kw_only=True)
class WorkloadIdentityArgs:
    placement: GcpPlacement
    namespace: str
    service_account: str
    # What this identity is for, in the GSA's id (a team name, "loki").
    purpose: str
    # The one bucket this identity may use.
    bucket: pulumi.Input[str]
    # The cluster: the `<project>.svc.id.goog` pool exists only once a Workload Identity cluster does, and
    # IAM rejects members of a pool that does not exist yet.
    cluster: pulumi.Resource
    # Only this prefix of it (`<prefix>/...`), when the bucket is shared (teams in the checkpoint bucket).
    prefix: str | None = None


class WorkloadIdentity(pulumi.ComponentResource):
    """A GSA bound to one Kubernetes service account, with object access to one bucket."""

    account: gcp.serviceaccount.Account
    email: pulumi.Output[str]

    def __init__(self, name: str, args: WorkloadIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:WorkloadIdentity", name, None, opts)
        place = args.placement
        project = place.project
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            account_id=service_account_id(place.cluster_name, args.purpose),
            display_name=f"{args.namespace}/{args.service_account} on {place.cluster_name}",
            project=project,
            opts=child,
        )
        self.member = workload_identity_member(project, args.namespace, args.service_account)
        gcp.serviceaccount.IAMMember(
            f"{name}-wi",
            service_account_id=self.account.name,
            role=WORKLOAD_IDENTITY_USER,
            member=self.member,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster]),
        )
        prefix = args.prefix
        gcp.storage.BucketIAMMember(
            f"{name}-bucket",
            bucket=args.bucket,
            role=BUCKET_OBJECT_ROLE,
            member=pulumi.Output.concat("serviceAccount:", self.account.email),
            condition=(
                pulumi.Output.from_input(args.bucket).apply(lambda b: prefix_condition(b, prefix))
                if prefix is not None
                else None
            ),
            opts=child,
        )
        self.email = self.account.email
        self.register_outputs({"email": self.account.email})


@dataclass(frozen=True, kw_only=True)
class WorkloadIdentitiesArgs:
    placement: GcpPlacement
    teams: Sequence[str]
    # Teams share the checkpoint bucket; each reaches only `<team>/` (jobs write there).
    checkpoint_bucket: pulumi.Input[str]
    # Loki's bucket; None without Loki (then no Loki identity).
    logs_bucket: pulumi.Input[str] | None
    cluster: pulumi.Resource
    # Where the identities were registered before they were grouped here (the GCP cloud component):
    # they answer to their old URNs through an alias, so deployed identities are not replaced.
    former_parent: pulumi.Resource | None = None


class WorkloadIdentities(pulumi.ComponentResource):
    """Every Workload Identity of a platform: one per team (its prefix of the checkpoint bucket) and
    Loki's (the logs bucket). Named like the AWS component of the same role."""

    team_emails: dict[str, pulumi.Output[str]]
    loki_email: pulumi.Output[str] | None

    def __init__(self, name: str, args: WorkloadIdentitiesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:gcp:WorkloadIdentities", name, None, opts)
        aliases = [pulumi.Alias(parent=args.former_parent)] if args.former_parent is not None else []
        child = pulumi.ResourceOptions(parent=self, aliases=aliases)
        # Children are named after the platform (`<platform>-team-<team>`), not this component, as before.
        base = name.removesuffix("-identity")
        self.team_emails = {}
        for team in args.teams:
            ident = WorkloadIdentity(
                f"{base}-team-{team}",
                WorkloadIdentityArgs(
                    placement=args.placement,
                    namespace=team_namespace(team),
                    service_account=TEAM_SERVICE_ACCOUNT,
                    purpose=team,
                    bucket=args.checkpoint_bucket,
                    prefix=team,
                    cluster=args.cluster,
                ),
                child,
            )
            self.team_emails[team] = ident.email
        self.loki_email = None
        if args.logs_bucket is not None:
            loki = WorkloadIdentity(
                f"{base}-loki",
                WorkloadIdentityArgs(
                    placement=args.placement,
                    namespace=MONITORING_NAMESPACE,
                    service_account=LOKI_SERVICE_ACCOUNT,
                    purpose="loki",
                    bucket=args.logs_bucket,
                    cluster=args.cluster,
                ),
                child,
            )
            self.loki_email = loki.email
        self.register_outputs({"teams": self.team_emails})
