"""Bucket policies, on the whole stack (an S3 bucket's public access block, encryption and versioning
are resources of their own that name it):

- trainplane-no-public-buckets: S3: every bucket has a public access block with all four switches on; no
  public canned ACL; no bucket policy that allows everyone without a condition. GCS: public access
  prevention `enforced`; no IAM member or binding for allUsers/allAuthenticatedUsers.
- trainplane-checkpoint-buckets-protected: the checkpoint bucket keeps overwritten and deleted checkpoints
  (S3: versioning Enabled; GCS: versioning on or a retention policy) or is `protect`ed, and a GCS one is
  not force-destroyed (`pulumi destroy` would delete every checkpoint in it). `retainOnDelete` cannot
  count: a policy sees `protect` but not it (pulumi pulumi/analyzer.proto AnalyzerResourceOptions:
  protect, ignoreChanges, deleteBeforeReplace, additionalSecretOutputs, aliases, customTimeouts, parent).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from .common import config_schema, dig, items, known, linked, report_each, settings, truthy

S3_BUCKET = "aws:s3/bucket:Bucket"
S3_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
S3_VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
S3_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
S3_ACLS = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
GCS_BUCKET = "gcp:storage/bucket:Bucket"
GCS_MEMBERS = {
    "gcp:storage/bucketIAMMember:BucketIAMMember": "member",
    "gcp:storage/bucketIAMBinding:BucketIAMBinding": "members",
    "gcp:storage/bucketAccessControl:BucketAccessControl": "entity",
    "gcp:storage/defaultObjectAccessControl:DefaultObjectAccessControl": "entity",
}
# The four switches of an S3 public access block (pulumi_aws s3 BucketPublicAccessBlockArgs).
BLOCK_SWITCHES = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
# Canned ACLs that grant to everyone or every AWS account (S3 user guide, "Canned ACL").
PUBLIC_ACLS = ("public-read", "public-read-write", "authenticated-read")
# GCS principals meaning anyone (Cloud Storage docs, "IAM principals": allUsers, allAuthenticatedUsers).
PUBLIC_MEMBERS = ("allusers", "allauthenticatedusers")

PUBLIC_NAME = "trainplane-no-public-buckets"
PROTECTED_NAME = "trainplane-checkpoint-buckets-protected"
PROTECTED_PROPERTIES: dict[str, dict[str, Any]] = {
    "checkpointBucketMarker": {
        "type": "string",
        "default": "checkpoints",
        "description": "A bucket whose resource name contains this is a checkpoint bucket",
    },
}


def _of(resources: list[PolicyResource], type_: str) -> list[PolicyResource]:
    return [r for r in resources if r.resource_type == type_]


def _public_statement(policy: Any) -> bool:
    """A bucket policy statement that allows everyone (Principal "*" or {"AWS": "*"}) unconditionally."""
    doc = json.loads(policy) if isinstance(policy, str) else policy
    for st in items(dig(doc, "Statement")) if isinstance(doc, Mapping) else []:
        principal = st.get("Principal")
        everyone = principal == "*" or (
            isinstance(principal, Mapping) and principal.get("AWS") in ("*", ["*"])
        )
        if st.get("Effect") == "Allow" and everyone and not st.get("Condition"):
            return True
    return False


# Each thing that can make one bucket, access block, ACL, policy or IAM grant public is a check of its own:
# during a preview an unknown output (a new S3 bucket's `acl`: Optional+Computed in pulumi-aws 7.51
# s3.Bucket, unset by the program) skips the check that reads it, not the resource's other checks.
Check = Callable[[PolicyResource, list[PolicyResource]], str | None]


def _no_block(r: PolicyResource, blocks: list[PolicyResource]) -> str | None:
    if r.resource_type == S3_BUCKET and not any(linked(b, "bucket", [r]) for b in blocks):
        return f"S3 bucket {r.name} has no public access block"
    return None


def _acl(r: PolicyResource, _: list[PolicyResource]) -> str | None:
    if r.resource_type in (S3_BUCKET, *S3_ACLS) and r.props.get("acl") in PUBLIC_ACLS:
        return f"{r.resource_type} {r.name} has the public ACL {r.props['acl']}"
    return None


def _switches(r: PolicyResource, _: list[PolicyResource]) -> str | None:
    if r.resource_type == S3_ACCESS_BLOCK and (
        off := [s for s in BLOCK_SWITCHES if not truthy(r.props.get(s))]
    ):
        return f"S3 public access block {r.name} leaves off {', '.join(off)}"
    return None


def _bucket_policy(r: PolicyResource, _: list[PolicyResource]) -> str | None:
    if r.resource_type == S3_POLICY and _public_statement(r.props.get("policy")):
        return f"S3 bucket policy {r.name} allows everyone without a condition"
    return None


def _prevention(r: PolicyResource, _: list[PolicyResource]) -> str | None:
    if r.resource_type == GCS_BUCKET and r.props.get("publicAccessPrevention") != "enforced":
        return f"GCS bucket {r.name}: publicAccessPrevention is not enforced"
    return None


def _members(r: PolicyResource, _: list[PolicyResource]) -> str | None:
    if r.resource_type not in GCS_MEMBERS:
        return None
    value = r.props.get(GCS_MEMBERS[r.resource_type])
    named = [str(m).lower() for m in ([value] if isinstance(value, str) else items(value))]
    return (
        f"{r.resource_type} {r.name} grants a bucket to {value}"
        if any(m in PUBLIC_MEMBERS for m in named)
        else None
    )


PUBLIC_CHECKS: tuple[Check, ...] = (_no_block, _acl, _switches, _bucket_policy, _prevention, _members)


def _public(r: PolicyResource, blocks: list[PolicyResource]) -> list[str]:
    """What makes one resource public, each check on its own (an unknown skips that check only)."""
    found = [known(functools.partial(check, r, blocks), None) for check in PUBLIC_CHECKS]
    return [m for m in found if m is not None]


def validate_public(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    blocks = _of(args.resources, S3_ACCESS_BLOCK)
    report_each(args.resources, lambda r: _public(r, blocks), report_violation)


def _protected(bucket: PolicyResource, resources: list[PolicyResource]) -> str | None:
    """Why a checkpoint bucket is not protected, None when it is."""
    if bucket.resource_type == GCS_BUCKET and truthy(bucket.props.get("forceDestroy")):
        return "forceDestroy is on: a destroy deletes every checkpoint in it"
    if bucket.opts.protect:
        return None
    if bucket.resource_type == S3_BUCKET:
        versioning = [v for v in _of(resources, S3_VERSIONING) if bucket in linked(v, "bucket", [bucket])]
        if any(dig(v.props, "versioningConfiguration.status") == "Enabled" for v in versioning):
            return None
        return "no versioning Enabled (aws:s3/bucketVersioning) and not protected"
    if truthy(dig(bucket.props, "versioning.enabled")) or dig(
        bucket.props, "retentionPolicy.retentionPeriod"
    ):
        return None
    return "neither versioning nor a retention policy, and not protected"


def validate_protected(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    marker = settings(args, PROTECTED_PROPERTIES)["checkpointBucketMarker"]

    def findings(bucket: PolicyResource) -> list[str]:
        if bucket.resource_type not in (S3_BUCKET, GCS_BUCKET) or marker not in bucket.name:
            return []
        why = _protected(bucket, args.resources)
        return [] if why is None else [f"checkpoint bucket {bucket.name}: {why}"]

    report_each(args.resources, findings, report_violation)


PUBLIC = StackValidationPolicy(
    name=PUBLIC_NAME,
    description="No bucket is readable or writable by everyone.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=validate_public,
)
PROTECTED = StackValidationPolicy(
    name=PROTECTED_NAME,
    description="Checkpoint buckets keep overwritten and deleted checkpoints recoverable.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(PROTECTED_PROPERTIES),
    validate=validate_protected,
)
