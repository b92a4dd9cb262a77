"""Shared helpers of the GCP tests: each reference stack is planned once per test process."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from infra.mockcloud import Resource, RunResult, run_program, run_stack
from tests.conftest import ROOT, config_for, platform_object

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


@cache
def plan(stack: str) -> RunResult:
    """The mock-engine plan of a stack file (cached: tests only read it)."""
    return run_stack(stack, None, ROOT)


def plan_platform(platform: dict[str, Any], stack: str = "test") -> RunResult:
    return run_program(config_for(platform), stack)


def mutated(stack: str) -> dict[str, Any]:
    return copy.deepcopy(platform_object(stack))


def one(result: RunResult, type_: str, name: str | None = None) -> Resource:
    found = [r for r in result.of_type(type_) if name is None or r.name == name]
    assert len(found) == 1, f"{len(found)} {type_} named {name!r}: {[r.name for r in result.of_type(type_)]}"
    return found[0]


def pool(result: RunResult, pool_name: str) -> Resource:
    return one(
        result, NODE_POOL, next(r.name for r in result.of_type(NODE_POOL) if r.inputs["name"] == pool_name)
    )


def upstream(result: RunResult, res: Resource) -> set[str]:
    """URNs `res` waits for, directly or through other resources' dependencies (parents excluded)."""
    by_urn = result.by_urn()
    seen: set[str] = set()
    todo = list(res.deps)
    while todo:
        urn = todo.pop()
        if urn in seen:
            continue
        seen.add(urn)
        dep = by_urn.get(urn)
        if dep is not None:
            todo.extend(dep.deps)
            # Waiting for a component means waiting for its children.
            if not dep.custom:
                todo.extend(c.urn for c in result.children(dep))
    return seen
