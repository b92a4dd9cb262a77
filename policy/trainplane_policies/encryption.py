"""trainplane-encryption-at-rest: data at rest is encrypted where the provider lets a program turn it off.

- S3: every bucket has a server-side encryption configuration (aws:s3/bucketServerSideEncryptionConfiguration
  naming it) with an allowed algorithm (default: SSE-KMS, the platform's data key).
- EBS: every launch template's EBS block devices and every aws:ebs/volume are `encrypted`.
- EFS: `encrypted`. EKS: Kubernetes secrets envelope-encrypted (`encryptionConfig.resources` has secrets).
- GKE: application-layer secrets encryption not set to DECRYPTED.
FSx for Lustre, GCS, Filestore, Managed Lustre and GKE's disks are always encrypted at rest by the cloud
(no input turns it off), so they have nothing to check here.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from .common import config_schema, dig, items, linked, settings, truthy

NAME = "trainplane-encryption-at-rest"
S3_BUCKET = "aws:s3/bucket:Bucket"
S3_SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
PROPERTIES: dict[str, dict[str, Any]] = {
    "s3Algorithms": {
        "type": "array",
        "items": {"type": "string"},
        # pulumi_aws s3 ...RuleApplyServerSideEncryptionByDefaultArgs.sse_algorithm: AES256, aws:kms,
        # aws:kms:dsse.
        "default": ["aws:kms", "aws:kms:dsse"],
        "description": "S3 default encryption algorithms allowed (add AES256 to accept S3-managed keys)",
    },
}


def _s3(resources: list[PolicyResource], allowed: list[str], report: ReportViolation) -> None:
    configs = [r for r in resources if r.resource_type == S3_SSE]
    for bucket in (r for r in resources if r.resource_type == S3_BUCKET):
        mine = [c for c in configs if linked(c, "bucket", [bucket])]
        algorithms = [
            dig(rule, "applyServerSideEncryptionByDefault.sseAlgorithm")
            for c in mine
            for rule in items(c.props.get("rules"))
        ]
        if not any(a in allowed for a in algorithms):
            found = ", ".join(str(a) for a in algorithms) or "no encryption configuration"
            report(f"S3 bucket {bucket.name}: {found} (allowed: {', '.join(allowed)})", bucket.urn)


def _unencrypted(r: PolicyResource) -> str | None:
    """Why one resource stores data unencrypted, None when it does not."""
    t, props = r.resource_type, r.props
    if t == "aws:ec2/launchTemplate:LaunchTemplate":
        plain = [
            str(m.get("deviceName"))
            for m in items(props.get("blockDeviceMappings"))
            if m.get("ebs") is not None and not truthy(dig(m, "ebs.encrypted"))
        ]
        return f"EBS devices {', '.join(plain)} not encrypted" if plain else None
    if t in ("aws:ebs/volume:Volume", "aws:efs/fileSystem:FileSystem") and not truthy(props.get("encrypted")):
        return "encrypted is not set"
    if t == "aws:eks/cluster:Cluster" and "secrets" not in items(dig(props, "encryptionConfig.resources")):
        return "Kubernetes secrets are not envelope-encrypted (encryptionConfig)"
    if t == "gcp:container/cluster:Cluster" and dig(props, "databaseEncryption.state") == "DECRYPTED":
        return "databaseEncryption is DECRYPTED"
    return None


def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    _s3(args.resources, list(settings(args, PROPERTIES)["s3Algorithms"]), report_violation)
    for r in args.resources:
        if (why := _unencrypted(r)) is not None:
            report_violation(f"{r.resource_type} {r.name}: {why}", r.urn)


POLICY = StackValidationPolicy(
    name=NAME,
    description="Buckets, disks, file systems and Kubernetes secrets are encrypted at rest.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(PROPERTIES),
    validate=validate,
)
