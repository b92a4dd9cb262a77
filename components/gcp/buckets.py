"""PlatformBuckets: the GCS buckets of a platform, checkpoints for every team and logs for Loki.

Both buckets: uniform bucket-level access (IAM only, no object ACLs), public access prevention enforced,
never force-destroyed (a `pulumi destroy` fails on a non-empty bucket instead of deleting checkpoints),
soft delete off (versioning already keeps checkpoints recoverable, and Loki churns its index). The
checkpoint bucket keeps object versions, bounded by a lifecycle: a noncurrent version is deleted after
NONCURRENT_DAYS or once NEWER_VERSIONS newer versions exist, whichever comes first.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.gcp.naming import GcpPlacement, short_id

NONCURRENT_DAYS = 7
# The type the buckets component had before it was named like AWS's (stacks deployed before keep it).
OLD_BUCKETS_TYPE = pulumi.Alias(type_="trainplane:gcp:Buckets")
NEWER_VERSIONS = 3
# Multi-GB checkpoint shards are uploaded in parts; parts of a crashed upload are cleaned after a day.
ABORT_UPLOADS_DAYS = 1
# Loki's compactor enforces retention; the bucket deletes what it may have missed a week later.
LOG_BACKSTOP_EXTRA_DAYS = 7


def bucket_name(place: GcpPlacement, purpose: str) -> str:
    """Globally unique by construction: project ids are unique, cluster names unique per project."""
    return short_id(f"{place.project}-{place.cluster_name}-{purpose}", 63)


@dataclass(frozen=True, kw_only=True)
class PlatformBucketsArgs:
    placement: GcpPlacement
    logs: bool = False  # a bucket for Loki (observability.loki)
    # Loki's retention (observability.logRetentionDays); the bucket keeps logs a week longer.
    log_retention_days: int = 14


class PlatformBuckets(pulumi.ComponentResource):
    """The checkpoint bucket and, with Loki, the log bucket."""

    checkpoints: gcp.storage.Bucket
    logs: gcp.storage.Bucket | None = None

    def __init__(self, name: str, args: PlatformBucketsArgs, opts: pulumi.ResourceOptions | None = None):
        # Named like AWS's; deployed stacks registered it as trainplane:gcp:Buckets.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[OLD_BUCKETS_TYPE]))
        super().__init__("trainplane:gcp:PlatformBuckets", name, None, opts)
        place = args.placement
        common = {
            "project": place.project,
            "location": place.region.upper(),  # the API answers in upper case
            "storage_class": "STANDARD",
            "uniform_bucket_level_access": True,
            "public_access_prevention": "enforced",
            "force_destroy": False,
            "soft_delete_policy": {"retention_duration_seconds": 0},
            "labels": place.labels,
        }
        abort_uploads = {
            "action": {"type": "AbortIncompleteMultipartUpload"},
            "condition": {"age": ABORT_UPLOADS_DAYS},
        }
        self.checkpoints = gcp.storage.Bucket(
            f"{name}-checkpoints",
            name=bucket_name(place, "checkpoints"),
            versioning={"enabled": True},
            lifecycle_rules=[
                {
                    "action": {"type": "Delete"},
                    "condition": {"days_since_noncurrent_time": NONCURRENT_DAYS, "with_state": "ARCHIVED"},
                },
                {
                    "action": {"type": "Delete"},
                    "condition": {"num_newer_versions": NEWER_VERSIONS, "with_state": "ARCHIVED"},
                },
                abort_uploads,
            ],
            opts=pulumi.ResourceOptions(parent=self),
            **common,
        )
        if args.logs:
            self.logs = gcp.storage.Bucket(
                f"{name}-logs",
                name=bucket_name(place, "logs"),
                versioning={"enabled": False},
                lifecycle_rules=[
                    {
                        "action": {"type": "Delete"},
                        "condition": {"age": args.log_retention_days + LOG_BACKSTOP_EXTRA_DAYS},
                    },
                    abort_uploads,
                ],
                opts=pulumi.ResourceOptions(parent=self),
                **common,
            )
        self.register_outputs(
            {"checkpoints": self.checkpoints.name, "logs": self.logs.name if self.logs is not None else None}
        )
