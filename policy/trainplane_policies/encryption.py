"""trainplane-encryption-at-rest: data at rest is encrypted where the provider lets a program turn it off.

- S3: every bucket has a server-side encryption configuration (aws:s3/bucketServerSideEncryptionConfiguration
  naming it) with an allowed algorithm (default: SSE-KMS, the platform's data key).
- EBS: every launch template's EBS block devices and every aws:ebs/volume are `encrypted`.
- EFS: `encrypted`. EKS: Kubernetes secrets envelope-encrypted (`encryptionConfig.resources` has secrets).
- GKE: application-layer secrets encryption (a Cloud KMS key) only where the config asks for it
  (`gkeApplicationLayerSecrets`). A stack policy sees outputs, and GKE reports `databaseEncryption` on every
  cluster: {state: DECRYPTED, keyName: ""} where none was set (terraform-provider-google v7.45.0
  resource_container_cluster.go: database_encryption Optional+Computed, flattenDatabaseEncryption copies
  the API's state), GKE's default, in which etcd and its Secrets are still encrypted at rest with
  Google-managed keys. Failing DECRYPTED by default would block every preview of every GKE stack after
  its first deploy (a new cluster's value is unknown in its first preview, so that one would pass).
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

from .common import config_schema, dig, items, known, linked, report_each, settings, truthy

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
    "gkeApplicationLayerSecrets": {
        "type": "boolean",
        "default": False,
        "description": "Require GKE application-layer secrets encryption with a Cloud KMS key "
        "(databaseEncryption ENCRYPTED); off: GKE's default encryption at rest (DECRYPTED) passes",
    },
}
# databaseEncryption states with application-layer encryption on (terraform-provider-google v7.45.0
# resource_container_cluster.go: ENCRYPTED, ALL_OBJECTS_ENCRYPTION_ENABLED, DECRYPTED).
GKE_ENCRYPTED = ("ENCRYPTED", "ALL_OBJECTS_ENCRYPTION_ENABLED")


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


def _gke(props: Any) -> str | None:
    """Why a GKE cluster's Secrets lack application-layer encryption, None when they have it. In a first
    preview a block the program left unset is unknown as a whole (Optional+Computed): not set; one it set is
    known, its key maybe not yet (a new Cloud KMS key's id)."""
    encryption = known(lambda: props.get("databaseEncryption"), None)
    state = dig(encryption, "state")
    if state in GKE_ENCRYPTED and known(lambda: dig(encryption, "keyName"), "(a new key)"):
        return None
    return f"databaseEncryption is {state or 'not set'} (application-layer secrets encryption required)"


def _unencrypted(r: PolicyResource, gke_alse: bool) -> str | None:
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
    if t == "gcp:container/cluster:Cluster" and gke_alse:
        return _gke(props)
    return None


def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    conf = settings(args, PROPERTIES)
    allowed, gke_alse = list(conf["s3Algorithms"]), bool(conf["gkeApplicationLayerSecrets"])
    configs = [r for r in args.resources if r.resource_type == S3_SSE]

    def findings(r: PolicyResource) -> list[str]:
        why = _s3(r, configs, allowed) if r.resource_type == S3_BUCKET else _unencrypted(r, gke_alse)
        return [] if why is None else [f"{r.resource_type} {r.name}: {why}"]

    report_each(args.resources, findings, report_violation)


POLICY = StackValidationPolicy(
    name=NAME,
    description="Buckets, disks, file systems and Kubernetes secrets are encrypted at rest.",
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(PROPERTIES),
    validate=validate,
)
