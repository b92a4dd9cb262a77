"""recovery: is the loop that takes a faulty GPU node out and restarts its job elsewhere wired? (issue 19)

The names are the contract's (contract/recovery.py). Each finding starts with its rule:
- `controller`: with gpuHealth on, the GPU health controller's Deployment runs (>= 1 replica) in the GPU
  operator namespace as its ServiceAccount, and ClusterRoleBindings give that account at least
  CONTROLLER_PERMISSIONS, and idle_reclaim.IDLE_PERMISSIONS when a team has an idle policy (RBAC matching:
  kubernetes@v1.33 pkg/apis/rbac/v1/evaluation_helpers.go VerbMatches, APIGroupMatches, ResourceMatches with "*" and "*/subresource", ResourceNameMatches);
- `quarantine-tolerations`: no pod that requests GPUs, no workload that is not a node agent and no Kueue
  ResourceFlavor (Kueue adds a flavor's tolerations to the pods it admits: kueue@v0.19.2
  apis/kueue/v1beta2/resourceflavor_types.go `tolerations`) tolerates the quarantine or diagnostic taint.
  Allowed: DaemonSets that request no GPUs, i.e. the node diagnostic (it exists to run on a node under the
  diagnostic taint, and to rediagnose a quarantined one) and the node agents of the GPU stack (the GPU
  operator's driver, device plugin and DCGM exporter; GKE's driver installer and fabric DaemonSets): a
  quarantined node keeps them so it can be diagnosed and returned, they hold no GPU, and the controller
  never evicts DaemonSet pods;
- `eviction-uncounted`: the eviction gives the pod DisruptionTarget, and every training job template
  (elastic Job, every JobSet replicated job) restarts on it without counting (recovery_pods.py);
- `rules`: with observability on (Prometheus and its alert rules), the PrometheusRules hold the loop's
  recording rules and alerts by name;
- `straggler-policy`: a team with `stragglers: quarantine` needs gpuHealth on, the straggler alert
  (observability.alerts) and a controller that may reach Prometheus (NetworkPolicy);
- `rediagnose-gate`: the re-diagnosis of a quarantined node cannot start before the node's GPU pods are
  gone (recovery_gate.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from components.incluster.names import GPU_OPERATOR_NAMESPACE, PROMETHEUS_RELEASE
from contract import recovery as R
from contract.idle import IDLE_PERMISSIONS
from infra.verify.checks.network import MONITORING_NAMESPACE, PROMETHEUS
from infra.verify.checks.recovery_base import (
    _binds,
    _controller,
    _grants,
    _health_on,
    _observability,
    _role_rules,
    _spec,
)
from infra.verify.checks.recovery_gate import check_rediagnose_gate
from infra.verify.checks.recovery_pods import (
    eviction_problem,
    job_templates,
    requests_gpus,
    tolerated,
    workloads,
)
from infra.verify.context import Context
from infra.verify.netpol import Peer, allowed
from infra.verify.report import CheckResult

PROMETHEUS_PORT = 9090  # kube-prometheus-stack's Prometheus web port (its Service and pod)
RECORDING_RULES = (R.GOODPUT_RATIO, R.BADPUT_SECONDS, R.GOODPUT_TEAM_RATIO, R.STRAGGLER_RATIO)
ALERTS = (R.ALERT_STRAGGLER, R.ALERT_QUARANTINED, R.ALERT_REPLACE_NEEDED)


def check_controller(ctx: Context, res: CheckResult, spec: Any = None) -> None:
    ns, name = GPU_OPERATOR_NAMESPACE, R.CONTROLLER_NAME
    ref = f"Deployment {ns}/{name}"
    deployment = _controller(ctx)
    if deployment is None:
        res.fail(
            f"controller: gpuHealth is on but the plan has no {ref}: nothing quarantines a faulty GPU node",
            ref,
        )
        return
    res.examined.append(ref)
    # apps/v1 DeploymentSpec.replicas defaults to 1 (kubernetes/api@v0.33.0:apps/v1/types.go).
    replicas = deployment.spec.get("replicas", 1)
    if replicas is not None and int(replicas) < 1:
        res.fail(f"controller: {ref} has {replicas} replicas: the controller never runs", ref)
    pod = (deployment.spec.get("template") or {}).get("spec") or {}
    account = pod.get("serviceAccountName") or pod.get("serviceAccount") or "default"
    if account != name:
        res.fail(
            f"controller: {ref} runs as ServiceAccount {ns}/{account}, not {ns}/{name}: it has none of the "
            "controller's permissions",
            ref,
        )
        return
    if ctx.object("ServiceAccount", ns, name) is None:
        res.fail(f"controller: {ref} runs as ServiceAccount {ns}/{name}, which the plan does not create", ref)
    if pod.get("automountServiceAccountToken") is False:
        res.fail(f"controller: {ref} mounts no ServiceAccount token: it cannot call the API server", ref)
    rules: list[Mapping[str, Any]] = []
    roles: list[str] = []
    everything = False
    unknown: list[str] = []  # bound ClusterRoles the plan does not create
    for binding in ctx.platform.objects("ClusterRoleBinding"):
        role_ref = binding.body.get("roleRef") or {}
        if role_ref.get("kind") != "ClusterRole" or not _binds(binding, ns, name):
            continue
        roles.append(str(role_ref.get("name")))
        got = _role_rules(ctx, str(role_ref.get("name")), unknown)
        everything = everything or got is None
        rules += got or []
    # A team's idle policy: the controller also lists jobs and Workloads and patches Workloads.
    idle = spec is not None and any(t.idle for t in spec.teams)
    needed = R.CONTROLLER_PERMISSIONS + (IDLE_PERMISSIONS if idle else ())
    missing = [
        f"{group or 'core'}/{resource} {verb}"
        for group, resource, verbs in needed
        for verb in verbs
        if not everything and not any(_grants(r, group, resource, verb) for r in rules)
    ]
    if missing:
        bound = f"ClusterRoles {', '.join(sorted(roles))}" if roles else "no ClusterRoleBinding"
        res.fail(
            f"controller: ServiceAccount {ns}/{name} ({bound}) may not {', '.join(missing)}: the controller "
            "cannot quarantine, evict or report what it needs to (contract.recovery.CONTROLLER_PERMISSIONS"
            + (", idle_reclaim.IDLE_PERMISSIONS for the teams' idle policies)" if idle else ")")
            + (
                f"; ClusterRoles {', '.join(unknown)} are not in the plan, their rules unknown"
                if unknown
                else ""
            ),
            f"ServiceAccount {ns}/{name}",
            *(f"ClusterRole {r}" for r in roles),
        )


# ---- quarantine-tolerations --------------------------------------------------------------------------


def check_tolerations(ctx: Context, res: CheckResult) -> None:
    for w in workloads(ctx):
        res.examined.append(f"tolerations {w.ref}")
        hits = tolerated(w.spec.get("tolerations"))
        if not hits:
            continue
        gpu = requests_gpus(w.spec)
        if w.kind == "DaemonSet" and not gpu:
            continue  # a node agent (see the module docstring)
        why = (
            "it requests GPUs, so the scheduler may place it on a quarantined or undiagnosed node"
            if gpu
            else "it is not a node agent (DaemonSet), so it may be scheduled onto a quarantined or undiagnosed node"
        )
        res.fail(
            f"quarantine-tolerations: {w.ref} tolerates {'; '.join(hits)}: {why}; only the node diagnostic "
            "and node agents may",
            w.ref,
        )
    if ctx.job_only:
        return
    for flavor in ctx.platform.objects("ResourceFlavor"):
        hits = tolerated(flavor.spec.get("tolerations"))
        res.examined.append(f"tolerations {flavor.ref}")
        if hits:
            res.fail(
                f"quarantine-tolerations: {flavor.ref} tolerates {'; '.join(hits)}: Kueue adds it to every pod "
                "it admits on the flavor, so restarted jobs land back on quarantined nodes",
                flavor.ref,
            )


# ---- eviction-uncounted -----------------------------------------------------------------------------


def check_eviction(ctx: Context, res: CheckResult) -> None:
    for ref, job_spec, jobset, replicated in job_templates(ctx):
        res.examined.append(f"eviction {ref}")
        problem = eviction_problem(ref, job_spec, jobset, replicated)
        if problem:
            res.fail(f"eviction-uncounted: {problem}", ref)


# ---- rules and straggler-policy ----------------------------------------------------------------------


def _names(ctx: Context, key: str) -> set[str]:
    return {
        str(r.get(key))
        for pr in ctx.platform.objects("PrometheusRule")
        for g in pr.spec.get("groups") or []
        for r in g.get("rules") or []
        if r.get(key)
    }


def _missing(wanted: Iterable[str], have: set[str]) -> list[str]:
    return [n for n in wanted if n not in have]


def check_rules(ctx: Context, res: CheckResult, spec: Any) -> None:
    prometheus, alerts = _observability(ctx, spec)
    if not alerts:
        if prometheus:
            res.note(
                "observability.alerts is off: the recovery loop's recording rules and alerts are not installed"
            )
        return
    refs = [pr.ref for pr in ctx.platform.objects("PrometheusRule")]
    records = _missing(RECORDING_RULES, _names(ctx, "record"))
    if records:
        res.fail(
            f"rules: no recording rule {', '.join(records)} in {', '.join(refs) or 'any PrometheusRule'}: goodput "
            "and stragglers are not measured",
            *refs,
        )
    missing_alerts = _missing(ALERTS, _names(ctx, "alert"))
    if missing_alerts:
        res.fail(
            f"rules: no alert {', '.join(missing_alerts)} in {', '.join(refs) or 'any PrometheusRule'}: a "
            "straggler, a quarantined node or one waiting for replacement raises nothing",
            *refs,
        )
    res.examined.append(f"{len(RECORDING_RULES)} recording rules, {len(ALERTS)} alerts")


def check_stragglers(ctx: Context, res: CheckResult, spec: Any, health: bool) -> None:
    teams = [t.name for t in spec.teams if t.stragglers == "quarantine"] if spec is not None else []
    if not teams:
        return
    ref = f"teams {', '.join(teams)}"
    res.examined.append(f"straggler policy of {ref}")
    if not health:
        res.fail(
            f"straggler-policy: {ref} set stragglers: quarantine but gpuHealth is off: nothing quarantines a "
            "straggling node",
            ref,
        )
        return
    prometheus, alerts = _observability(ctx, spec)
    if not alerts:
        what = "observability.alerts is off" if prometheus else f"the plan installs no {PROMETHEUS_RELEASE}"
        res.fail(
            f"straggler-policy: {ref} set stragglers: quarantine but {what}: {R.ALERT_STRAGGLER} never fires, "
            "so the controller never sees a straggler",
            ref,
        )
        return
    deployment = _controller(ctx)
    if deployment is None:
        return  # `controller` says so
    labels = ((deployment.spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    me = Peer(GPU_OPERATOR_NAMESPACE, dict(labels))
    policies = [dict(o.body) for o in ctx.platform.objects("NetworkPolicy")]
    if not allowed(policies, me, Peer(MONITORING_NAMESPACE, PROMETHEUS), PROMETHEUS_PORT):
        res.fail(
            f"straggler-policy: {ref} set stragglers: quarantine but NetworkPolicy keeps Deployment "
            f"{GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME} from Prometheus ({MONITORING_NAMESPACE}, port "
            f"{PROMETHEUS_PORT}): it cannot read {R.ALERT_STRAGGLER}",
            ref,
            f"Deployment {GPU_OPERATOR_NAMESPACE}/{R.CONTROLLER_NAME}",
        )


def run(ctx: Context) -> CheckResult:
    res = CheckResult("recovery")
    check_tolerations(ctx, res)
    check_eviction(ctx, res)
    if ctx.job_only:
        return res  # the platform's loop is judged on the platform
    spec = _spec(ctx)
    health = _health_on(ctx, spec, res)
    if health:
        check_controller(ctx, res, spec)
        check_rediagnose_gate(ctx, res)
    else:
        res.note("gpuHealth is off: no GPU health controller, nothing quarantines a faulty node")
    check_rules(ctx, res, spec)
    check_stragglers(ctx, res, spec, health)
    return res
