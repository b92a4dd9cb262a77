"""verify `identity` on GKE (GcpVerifier.verify_team_identity): Workload Identity.

The `iam.gke.io/gcp-service-account` annotation names a Google service account that grants
roles/iam.workloadIdentityUser to `serviceAccount:<pool>[<ns>/<sa>]`, and whose bucket grants carry a
condition limiting them to the team's prefix.
"""

from __future__ import annotations

import re
from typing import Any

from components.gcp.profile import WORKLOAD_IDENTITY_ANNOTATION as GKE_ANNOTATION
from components.outputs import TeamOutput
from infra.verify.checks.identity import deps_of_type, within_team
from infra.verify.context import Context
from infra.verify.report import CheckResult


def check_team(ctx: Context, res: CheckResult, team: TeamOutput, sa: Any) -> list[str]:
    email = sa.annotations.get(GKE_ANNOTATION)
    if not email:
        res.fail(
            f"{sa.ref} of team {team.name} has no {GKE_ANNOTATION} annotation: pods get no Google identity",
            sa.ref,
        )
        return []
    by_urn = ctx.platform.by_urn()
    accounts = deps_of_type(by_urn, sa.resource, "gcp:serviceaccount/account:Account")
    if len(accounts) != 1:
        res.fail(f"{sa.ref} names {email}, which the plan does not create", sa.ref)
        return []
    gsa = accounts[0]
    cluster = ctx.platform.cluster_resource()
    pool = ((cluster.inputs.get("workloadIdentityConfig") or {}).get("workloadPool")) if cluster else None
    want = f"serviceAccount:{pool}[{sa.namespace}/{sa.name}]"
    bindings = [
        r
        for r in ctx.platform.of_type("gcp:serviceaccount/iAMMember:IAMMember")
        if gsa.urn in r.deps and r.inputs.get("role") == "roles/iam.workloadIdentityUser"
    ]
    members = [str(b.inputs.get("member")) for b in bindings]
    if want not in members:
        res.fail(
            f"Google service account {gsa.inputs.get('accountId', gsa.name)} (named by {sa.ref}) does not grant "
            f"roles/iam.workloadIdentityUser to {want}",
            gsa.name,
            sa.ref,
        )
    for m in members:
        if m != want:
            res.fail(
                f"Google service account {gsa.inputs.get('accountId', gsa.name)} also admits {m}", gsa.name
            )
    patterns = []
    for grant in ctx.platform.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        if gsa.urn not in grant.deps:
            continue
        expr = str((grant.inputs.get("condition") or {}).get("expression") or "")
        found = re.search(r"/objects/([^\"']*)", expr)
        pattern = (found.group(1) + "*") if found else "*"
        patterns.append(pattern)
        if not within_team(pattern, team.name):
            res.fail(
                f"Google service account {gsa.inputs.get('accountId', gsa.name)} of team {team.name} has "
                f"{grant.inputs.get('role')} on all of bucket {grant.inputs.get('bucket')} (no IAM condition "
                f"on objects/{team.name}/)",
                grant.name,
                sa.ref,
            )
    return patterns
