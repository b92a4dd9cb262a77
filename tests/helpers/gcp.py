"""Resource types and lookups the GCP tests share (plans come from plans.py: each reference stack once per process)."""

from __future__ import annotations

import copy
from typing import Any

from infra.mockcloud import Resource, RunResult
from tests.helpers.plans import one, plan_object, planned, platform_object, upstream  # noqa: F401 (shared helpers)

GCP_STACKS = ("gcp-dev", "gcp-h100-mega", "gcp-byo-network")

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
FIREWALL = "gcp:compute/firewall:Firewall"
FILESTORE = "gcp:filestore/instance:Instance"
LUSTRE = "gcp:lustre/instance:Instance"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
SA = "gcp:serviceaccount/account:Account"
SA_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"


plan = planned
plan_platform = plan_object


def mutated(stack: str) -> dict[str, Any]:
    return copy.deepcopy(platform_object(stack))


def pool(result: RunResult, pool_name: str) -> Resource:
    return one(
        result, NODE_POOL, next(r.name for r in result.of_type(NODE_POOL) if r.inputs["name"] == pool_name)
    )
