"""identity: each team's service account, the cloud identity it names, that identity's trust and the
data it reaches match one to one, and no team reaches another team's data.

The cloud's verifier checks one team's wiring (`CloudVerifier.verify_team_identity`: the annotation its
mechanism uses, the identity's trust, the object keys it may write; infra/verify/clouds/<cloud>/identity.py)
and answers the key patterns the team may write. A job's checkpoint URI must fall inside what its team
may write.
"""

from __future__ import annotations

import re

from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.model import PlanResource
from infra.verify.report import CheckResult


def key_prefix(pattern: str) -> str:
    """The literal part of a key pattern before its first wildcard."""
    return re.split(r"[*?]", pattern, maxsplit=1)[0]


def within_team(pattern: str, team: str) -> bool:
    """Whether an object key pattern stays under the team's prefix `<team>/`."""
    return key_prefix(pattern).startswith(f"{team}/")


def deps_of_type(
    plan_resources: dict[str, PlanResource], res: PlanResource, type_: str
) -> list[PlanResource]:
    return [plan_resources[d] for d in res.deps if d in plan_resources and plan_resources[d].type == type_]


def object_store_schemes() -> list[str]:
    """The URI schemes of every cloud's object store (facts `objectStore.scheme` of each cloud): a
    checkpoint URI of any of them is checked against the team's reach, whatever the platform's cloud."""
    stores = [c.get("objectStore") or {} for c in F.facts()["clouds"].values()]
    return sorted({str(s["scheme"]) for s in stores if s.get("scheme")})


def check_checkpoint_uris(ctx: Context, res: CheckResult, reach: dict[str, list[str]]) -> None:
    schemes = "|".join(map(re.escape, object_store_schemes()))
    for pod in ctx.pods:
        for c in pod.pod_spec.get("containers") or []:
            for e in c.get("env") or []:
                if e.get("name") != "TRAINPLANE_CHECKPOINT_URI":
                    continue
                uri = str(e.get("value", ""))
                m = re.match(rf"^({schemes})://[^/]+/(.*)$", uri)
                if not schemes or not m or pod.team not in reach:
                    continue
                key = m.group(2).rstrip("/") + "/"
                if not any(key_prefix(p) == "" or key.startswith(key_prefix(p)) for p in reach[pod.team]):
                    res.fail(
                        f"{pod.ref} checkpoints to {uri}, outside what team {pod.team}'s identity may write "
                        f"({', '.join(reach[pod.team]) or 'nothing'})",
                        pod.ref,
                    )


def run(ctx: Context) -> CheckResult:
    res = CheckResult("identity")
    plan = ctx.platform
    check_team = ctx.verifier.verify_team_identity()
    if check_team is None:
        res.note("existing cluster: teams get no cloud identity from the platform")
        return res
    teams = plan.teams
    if ctx.job_only:
        teams = [t for t in teams if any(p.team == t.name for p in ctx.pods)]
    reach: dict[str, list[str]] = {}
    for team in teams:
        ns, sa_name = team.namespace, team.service_account
        sa = ctx.object("ServiceAccount", ns, sa_name)
        if sa is None:
            res.fail(
                f"team {team.name}: ServiceAccount {ns}/{sa_name} is not in the plan",
                f"team {team.name}",
            )
            continue
        reach[team.name] = check_team(ctx, res, team, sa)
        res.examined.append(sa.ref)
    check_checkpoint_uris(ctx, res, reach)
    return res
