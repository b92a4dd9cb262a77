"""S3 buckets: checkpoints (versioned, old versions expire) and Loki's logs, private and SSE-KMS.

Every bucket blocks public access, enforces bucket-owner object ownership (no ACLs), encrypts with the
platform's data key (S3 bucket keys on, to keep KMS request costs flat with many small writes) and
refuses plain-HTTP requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

# A checkpoint overwritten or deleted stays recoverable this long (bad step, accidental cleanup).
NONCURRENT_DAYS = 7
# Failed multipart uploads (a preempted writer) otherwise cost storage forever.
ABORT_MULTIPART_DAYS = 2


def tls_only_policy(bucket_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyPlainHttp",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


@dataclass(frozen=True, kw_only=True)
class PrivateBucketArgs:
    # Short purpose; with the cluster name it prefixes the globally unique bucket name.
    prefix: str
    kms_key_arn: pulumi.Input[str]
    versioned: bool = False
    # Delete current objects after this many days (None: keep).
    expire_days: int | None = None
    tags: dict[str, str] = field(default_factory=dict)


class PrivateBucket(pulumi.ComponentResource):
    """One S3 bucket with public access blocked, SSE-KMS, TLS only, optional versioning."""

    name: pulumi.Output[str]
    arn: pulumi.Output[str]

    def __init__(self, name: str, args: PrivateBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:PrivateBucket", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            # S3 appends a unique suffix: bucket names are global, cluster names are not.
            bucket_prefix=args.prefix[:37],
            tags=args.tags,
            opts=child,
        )
        block = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-sse",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms", kms_master_key_id=args.kms_key_arn
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(tls_only_policy),
            # S3 rejects any bucket policy while the public access block is being applied.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[block]),
        )
        versioning = None
        if args.versioned:
            versioning = aws.s3.BucketVersioning(
                f"{name}-versioning",
                bucket=bucket.id,
                versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
                opts=child,
            )
        rules = [
            aws.s3.BucketLifecycleConfigurationRuleArgs(
                id="abort-incomplete-multipart",
                status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                    days_after_initiation=ABORT_MULTIPART_DAYS
                ),
            )
        ]
        if args.versioned:
            rules.append(
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-old-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=NONCURRENT_DAYS
                    ),
                )
            )
        if args.expire_days:
            rules.append(
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-objects",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=args.expire_days),
                )
            )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=rules,
            # Noncurrent-version rules need versioning in place first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning] if versioning else []),
        )
        # The provider's id of a bucket is its name, known as soon as the bucket exists.
        self.name = bucket.id
        self.arn = bucket.arn
        self.register_outputs({"name": self.name, "arn": self.arn})


@dataclass(frozen=True, kw_only=True)
class PlatformBucketsArgs:
    cluster_name: str
    kms_key_arn: pulumi.Input[str]
    loki: bool = False
    # Loki deletes by its own retention; the bucket expires objects a little later as a backstop.
    log_retention_days: int = 14
    tags: dict[str, str] = field(default_factory=dict)


class PlatformBuckets(pulumi.ComponentResource):
    """The checkpoint bucket and, with Loki, the logs bucket."""

    checkpoints: PrivateBucket
    logs: PrivateBucket | None

    def __init__(self, name: str, args: PlatformBucketsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:PlatformBuckets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.checkpoints = PrivateBucket(
            f"{name}-checkpoints",
            PrivateBucketArgs(
                prefix=f"{args.cluster_name[:24]}-ckpt-",
                kms_key_arn=args.kms_key_arn,
                versioned=True,
                tags=args.tags,
            ),
            child,
        )
        self.logs = None
        if args.loki:
            self.logs = PrivateBucket(
                f"{name}-logs",
                PrivateBucketArgs(
                    prefix=f"{args.cluster_name[:24]}-logs-",
                    kms_key_arn=args.kms_key_arn,
                    expire_days=args.log_retention_days + 7,
                    tags=args.tags,
                ),
                child,
            )
        self.register_outputs({"checkpoints": self.checkpoints.name})

    def names(self) -> dict[str, pulumi.Output[str]]:
        out = {"checkpoints": self.checkpoints.name}
        if self.logs is not None:
            out["logs"] = self.logs.name
        return out
