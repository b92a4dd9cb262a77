"""verify `identity` on AWS (AwsVerifier.verify_team_identity): IRSA.

The `eks.amazonaws.com/role-arn` annotation names an IAM role whose trust admits exactly this service
account (`<issuer>:sub` = system:serviceaccount:<ns>:<sa>, `<issuer>:aud` = sts.amazonaws.com, on the
cluster's OIDC provider); the role's S3 object permissions stay under `<bucket>/<team>/` and listing is
limited to that prefix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from components.aws.profile import IRSA_ANNOTATION
from components.outputs import TeamOutput
from infra.verify.checks.identity import deps_of_type, within_team
from infra.verify.context import Context
from infra.verify.model import PlanResource
from infra.verify.report import CheckResult

S3_OBJECT_ACTIONS = re.compile(r"^s3:(\*|Get|Put|Delete|Abort|List.*Parts|Restore).*", re.I)


def _statements(doc: Any) -> list[Mapping[str, Any]]:
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError:
            return []
    st = (doc or {}).get("Statement") or []
    return [st] if isinstance(st, dict) else list(st)


def _list(v: Any) -> list[str]:
    return [v] if isinstance(v, str) else list(v or [])


def object_key_pattern(arn: str) -> str | None:
    """The key part of an S3 object ARN ("research/*" of arn:aws:s3:::bucket/research/*); None for a
    bucket ARN. Mock ARNs (arn:aws:mock:::bucket/<name>/...) read the same."""
    m = re.match(r"^arn:[^:]*:(s3|mock):::(bucket/)?([^/]+)(/(.*))?$", arn)
    if not m:
        return "*" if arn == "*" else None
    return m.group(5) if m.group(4) else None


def _aws_role(ctx: Context, sa: Any, arn: str) -> PlanResource | None:
    by_urn = ctx.platform.by_urn()
    roles = deps_of_type(by_urn, sa.resource, "aws:iam/role:Role")
    if len(roles) == 1:
        return roles[0]
    name = arn.rsplit("/", 1)[-1]
    found = [r for r in ctx.platform.of_type("aws:iam/role:Role") if r.inputs.get("name", r.name) == name]
    return found[0] if len(found) == 1 else None


def check_team(ctx: Context, res: CheckResult, team: TeamOutput, sa: Any) -> list[str]:
    """Check one team's IRSA wiring; return the object key patterns its role may write."""
    arn = sa.annotations.get(IRSA_ANNOTATION)
    if not arn:
        res.fail(
            f"{sa.ref} of team {team.name} has no {IRSA_ANNOTATION} annotation: pods get no AWS identity",
            sa.ref,
        )
        return []
    role = _aws_role(ctx, sa, arn)
    if role is None:
        res.fail(f"{sa.ref} names role {arn}, which the plan does not create", sa.ref)
        return []
    _check_aws_trust(ctx, res, role, sa)
    patterns, listed_unscoped = _aws_role_object_access(ctx, res, role, team.name)
    role_name = role.inputs.get("name", role.name)
    for p in patterns:
        if not within_team(p, team.name):
            res.fail(
                f"role {role_name} of team {team.name} reaches objects {p!r}, not only its prefix "
                f"{team.name}/ of the checkpoint bucket",
                role.name,
                sa.ref,
            )
    if listed_unscoped:
        res.fail(
            f"role {role_name} of team {team.name} may list every key of the bucket (s3:ListBucket without "
            f"an s3:prefix condition on {team.name}/*)",
            role.name,
        )
    return patterns


def _check_aws_trust(ctx: Context, res: CheckResult, role: PlanResource, sa: Any) -> None:
    """The role trusts exactly the team's service account, through the cluster's OIDC provider."""
    role_name = role.inputs.get("name", role.name)
    want_sub = f"system:serviceaccount:{sa.namespace}:{sa.name}"
    issuers = {
        str(r.inputs.get("url", "")).removeprefix("https://")
        for r in ctx.platform.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    }
    trusted = False
    for st in _statements(role.inputs.get("assumeRolePolicy")):
        if st.get("Effect") != "Allow" or "sts:AssumeRoleWithWebIdentity" not in _list(st.get("Action")):
            continue
        cond = (st.get("Condition") or {}).get("StringEquals") or {}
        subs = {k.rsplit(":", 1)[0]: v for k, v in cond.items() if k.endswith(":sub")}
        auds = {k.rsplit(":", 1)[0]: v for k, v in cond.items() if k.endswith(":aud")}
        trusted = trusted or any(
            sub == want_sub and auds.get(host) == "sts.amazonaws.com" and (not issuers or host in issuers)
            for host, sub in subs.items()
        )
        other = [s for s in subs.values() if s != want_sub]
        if other:
            res.fail(
                f"role {role_name} (named by {sa.ref}) also trusts {', '.join(map(str, other))}",
                role.name,
                sa.ref,
            )
        if any(k.endswith(":sub") for k in (st.get("Condition") or {}).get("StringLike") or {}):
            res.fail(f"role {role_name} trusts service accounts by pattern (StringLike sub)", role.name)
    if not trusted:
        res.fail(
            f"role {role_name} (named by {sa.ref}) does not trust {want_sub} with aud sts.amazonaws.com on the "
            "cluster's OIDC provider: AssumeRoleWithWebIdentity is refused",
            role.name,
            sa.ref,
        )


def _aws_role_object_access(
    ctx: Context, res: CheckResult, role: PlanResource, team: str
) -> tuple[list[str], bool]:
    """The object key patterns the role may write, and whether it may list keys outside `team/`."""
    role_name = role.inputs.get("name", role.name)
    patterns: list[str] = []
    listed_unscoped = False
    for pol in ctx.platform.of_type("aws:iam/rolePolicy:RolePolicy"):
        if pol.inputs.get("role") not in (role_name, role.name) and role.urn not in pol.deps:
            continue
        for st in _statements(pol.inputs.get("policy")):
            if st.get("Effect") != "Allow":
                continue
            found, unscoped = _statement_object_access(st, team)
            patterns += found
            listed_unscoped = listed_unscoped or unscoped
    for attach in ctx.platform.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"):
        if attach.inputs.get("role") in (role_name, role.name) and "S3" in str(
            attach.inputs.get("policyArn")
        ):
            res.fail(
                f"role {role_name} has managed policy {attach.inputs.get('policyArn')}: every bucket",
                role.name,
            )
            patterns.append("*")
    return patterns, listed_unscoped


def _statement_object_access(st: Mapping[str, Any], team: str) -> tuple[list[str], bool]:
    actions = _list(st.get("Action"))
    patterns, unscoped = [], False
    for arn_ in _list(st.get("Resource")):
        key = object_key_pattern(arn_)
        if key is not None and any(S3_OBJECT_ACTIONS.match(a) for a in actions):
            patterns.append(key)
        elif key is None and any(a in ("s3:ListBucket", "s3:*") for a in actions):
            prefixes = _list(((st.get("Condition") or {}).get("StringLike") or {}).get("s3:prefix"))
            if not prefixes or not all(within_team(p, team) or p == f"{team}/" for p in prefixes):
                unscoped = True
    return patterns, unscoped
