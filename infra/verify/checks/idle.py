"""idle: does each team's idle policy (teams[].idle, issue 20) reach the jobs it is meant for?

The names are the contract's (contract/idle.py). Each finding starts with its rule:
- `alert`: with observability's alert rules on, the PrometheusRules hold the team's IDLE_ALERT: labelled
  with the team and its action, `for` its window, its expression the team's namespace below its threshold
  `unless` the controller's exemption series (components/incluster/idle_rules.py writes it). Without
  Prometheus or with alerts off, the policy never fires;
- `recording`: the JOB_GPU_UTIL recording rule the alerts read is there;
- `dcgm-labels`: the GPU operator's DCGM ServiceMonitor has honorLabels, so a GPU's `pod`/`namespace` are
  the workload's (dcgm-exporter's) and not the exporter pod's: gpu-operator v26.7.0 deployments/gpu-operator
  values.yaml `dcgmExporter.serviceMonitor.honorLabels: false` by default (infra/verify/facts.yaml), and
  Prometheus' scrape.mutateSampleLabels then renames the exporter's labels `exported_pod`/`exported_namespace`;
- `controller`: the GPU health controller runs (gpuHealth on, its Deployment in the plan): it posts the
  Event, exports the exemption series and requeues;
- `requeue-rbac`: for `action: requeue`, the controller's ServiceAccount may get, list and patch Kueue
  Workloads in the team's namespace (a ClusterRoleBinding, or a RoleBinding there): deactivating one is a
  patch of its spec.active (kueue@v0.19.2 apis/kueue/v1beta2/workload_types.go `active`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from components.incluster.names import GPU_OPERATOR_NAMESPACE
from contract import recovery as R
from contract.idle import IDLE_ALERT, IDLE_EXEMPT_METRIC, IDLE_PERMISSIONS, JOB_GPU_UTIL
from infra.verify.checks.recovery_base import _binds, _controller, _grants, _observability, _role_rules, _spec
from infra.verify.context import Context
from infra.verify.report import CheckResult

# What `requeue` does to a Workload: the Workload entries of the controller's own permissions (list the team's
# Workloads, read one, patch spec.active and its annotation), checked in each requeue team's namespace.
REQUEUE_PERMISSIONS = tuple(p for p in IDLE_PERMISSIONS if p[1] == "workloads")
HONOR_LABELS = ("dcgmExporter", "serviceMonitor", "honorLabels")
_DURATION = re.compile(r"^([0-9]+)([mh])$")


def _minutes(duration: object) -> int | None:
    m = _DURATION.match(str(duration or ""))
    return int(m.group(1)) * (60 if m.group(2) == "h" else 1) if m else None


def _idle_alerts(ctx: Context) -> dict[str, list[Mapping[str, Any]]]:
    """The IDLE_ALERT rules by their `team` label."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for pr in ctx.platform.objects("PrometheusRule"):
        for g in pr.spec.get("groups") or []:
            for r in g.get("rules") or []:
                if r.get("alert") == IDLE_ALERT:
                    out.setdefault(str((r.get("labels") or {}).get("team")), []).append(r)
    return out


def _alert_problem(rule: Mapping[str, Any], team: str, idle: Any) -> str | None:
    """Why the team's alert rule does not implement its policy, or None."""
    expr = str(rule.get("expr") or "")
    got = re.search(rf'{re.escape(JOB_GPU_UTIL)}\{{namespace="{re.escape(team)}"\}}\s*<\s*([0-9.]+)', expr)
    if got is None:
        return f'its expression does not compare {JOB_GPU_UTIL}{{namespace="{team}"}} with a threshold'
    if float(got.group(1)) != float(idle.gpu_util_below):
        return f"its threshold is {got.group(1)}%, the team's gpuUtilBelow {idle.gpu_util_below:g}%"
    if _minutes(rule.get("for")) != idle.minutes:
        return f"its `for` is {rule.get('for')}, the team's window {idle.for_}"
    action = (rule.get("labels") or {}).get("action")
    if action != idle.action:
        return f"its action label is {action}, the team's action {idle.action}"
    if not re.search(rf"unless on \(namespace, job\) \(\s*{IDLE_EXEMPT_METRIC} == 1\s*\)", expr):
        return f"it does not leave out the exempt jobs (unless on (namespace, job) {IDLE_EXEMPT_METRIC})"
    return None


def check_rules(ctx: Context, res: CheckResult, spec: Any, teams: list[Any]) -> None:
    prometheus, alerts = _observability(ctx, spec)
    names = ", ".join(t.name for t in teams)
    if not alerts:
        what = "observability.alerts is off" if prometheus else "the plan installs no Prometheus"
        res.fail(
            f"alert: teams {names} set an idle policy but {what}: {IDLE_ALERT} never fires", f"teams {names}"
        )
        return
    refs = [pr.ref for pr in ctx.platform.objects("PrometheusRule")]
    records = {
        r.get("record")
        for pr in ctx.platform.objects("PrometheusRule")
        for g in pr.spec.get("groups") or []
        for r in g.get("rules") or []
    }
    if JOB_GPU_UTIL not in records:
        res.fail(
            f"recording: no recording rule {JOB_GPU_UTIL} in {', '.join(refs) or 'any PrometheusRule'}: the "
            f"idle alerts of teams {names} read a series nothing records",
            *refs,
        )
    by_team = _idle_alerts(ctx)
    for t in teams:
        res.examined.append(f"idle alert of team {t.name}")
        rules = by_team.get(t.name, [])
        if not rules:
            res.fail(
                f"alert: team {t.name} sets idle (below {t.idle.gpu_util_below:g}% for {t.idle.for_}) but no "
                f"{IDLE_ALERT} rule is labelled team={t.name}: its idle jobs are never reported",
                f"team {t.name}",
                *refs,
            )
            continue
        problems = [p for p in (_alert_problem(r, t.name, t.idle) for r in rules) if p]
        if len(problems) == len(rules):
            res.fail(f"alert: team {t.name}'s {IDLE_ALERT} rule: {problems[0]}", f"team {t.name}", *refs)


def check_dcgm(ctx: Context, res: CheckResult, teams: list[Any]) -> None:
    names = ", ".join(t.name for t in teams)
    releases = ctx.platform.releases("gpu-operator")
    if not releases:
        res.fail(
            f"dcgm-labels: teams {names} set an idle policy but the plan installs no GPU operator (DCGM)"
        )
        return
    for rel in releases:
        res.examined.append(f"DCGM ServiceMonitor of {rel.ref}")
        node: Any = rel.values
        for key in HONOR_LABELS:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not True:
            res.fail(
                f"dcgm-labels: {rel.ref} leaves {'.'.join(HONOR_LABELS)} {node if node is not None else 'unset'} "
                "(false by default): DCGM series carry the exporter's pod/namespace, so no GPU maps to a job and "
                f"teams {names}' idle alerts never fire",
                rel.ref,
            )


def _may(ctx: Context, namespace: str, group: str, resource: str, verb: str) -> bool:
    """The controller's ServiceAccount may `verb` `resource` in `namespace` (ClusterRoleBindings, and
    RoleBindings in that namespace to a Role there or a ClusterRole; recovery.py's RBAC matching)."""
    ns, name = GPU_OPERATOR_NAMESPACE, R.CONTROLLER_NAME
    unknown: list[str] = []
    bindings: list[tuple[Any, str | None]] = [(b, None) for b in ctx.platform.objects("ClusterRoleBinding")]
    bindings += [(b, namespace) for b in ctx.platform.objects("RoleBinding", namespace)]
    for binding, where in bindings:
        ref = binding.body.get("roleRef") or {}
        if not _binds(binding, ns, name):
            continue
        if ref.get("kind") == "ClusterRole":
            rules = _role_rules(ctx, str(ref.get("name")), unknown)
        elif ref.get("kind") == "Role" and where:
            role = ctx.object("Role", where, str(ref.get("name")))
            rules = list(role.body.get("rules") or []) if role else []
        else:
            continue
        if rules is None or any(_grants(r, group, resource, verb) for r in rules):
            return True
    return False


def check_controller(ctx: Context, res: CheckResult, spec: Any, teams: list[Any]) -> None:
    names = ", ".join(t.name for t in teams)
    ref = f"Deployment {GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME}"
    if spec is not None and not spec.gpu_health.enabled:
        res.fail(
            f"controller: teams {names} set an idle policy but gpuHealth is off: no controller acts on it"
        )
        return
    if _controller(ctx) is None:
        res.fail(f"controller: teams {names} set an idle policy but the plan has no {ref}", ref)
        return
    for t in teams:
        if t.idle.action != "requeue":
            continue
        res.examined.append(f"requeue RBAC in namespace {t.name}")
        missing = [
            f"{group}/{resource} {verb}"
            for group, resource, verbs in REQUEUE_PERMISSIONS
            for verb in verbs
            if not _may(ctx, t.name, group, resource, verb)
        ]
        if missing:
            res.fail(
                f"requeue-rbac: team {t.name} sets idle action requeue but ServiceAccount "
                f"{GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME} may not {', '.join(missing)} in namespace "
                f"{t.name}: its idle jobs are never requeued",
                f"team {t.name}",
                f"ServiceAccount {GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME}",
            )


def run(ctx: Context) -> CheckResult:
    res = CheckResult("idle")
    if ctx.job_only:
        return res  # the platform's policies are judged on the platform
    spec = _spec(ctx)
    teams = [t for t in spec.teams if t.idle is not None] if spec is not None else []
    if not teams:
        res.note("no team sets an idle policy (teams[].idle)")
        return res
    check_rules(ctx, res, spec, teams)
    check_dcgm(ctx, res, teams)
    check_controller(ctx, res, spec, teams)
    return res
