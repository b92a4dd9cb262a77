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

from .common import config_schema, dig, items, linked, report_each, settings, truthy

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


def _s3(bucket: PolicyResource, configs: list[PolicyResource], allowed: list[str]) -> str | None:
    """Why an S3 bucket's default encryption is missing or not allowed, None when it is fine."""
    algorithms = [
        dig(rule, "applyServerSideEncryptionByDefault.sseAlgorithm")
        for c in configs
        if linked(c, "bucket", [bucket])
        for rule in items(c.props.get("rules"))
    ]
    if any(a in allowed for a in algorithms):
        return None
    found = ", ".join(str(a) for a in algorithms) or "no encryption configuration"
    return f"{found} (allowed: {', '.join(allowed)})"


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
    allowed = list(settings(args, PROPERTIES)["s3Algorithms"])
    configs = [r for r in args.resources if r.resource_type == S3_SSE]

    def findings(r: PolicyResource) -> list[str]:
        why = _s3(r, configs, allowed) if r.resource_type == S3_BUCKET else _unencrypted(r)
        return [] if why is None else [f"{r.resource_type} {r.name}: {why}"]

    report_each(args.resources, findings, report_violation)


POLICY = StackValidationPolicy(
    name=NAME,
    description="Buckets, disks, file systems and Kubernetes secrets are encrypted at rest.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(PROPERTIES),
    validate=validate,
)
