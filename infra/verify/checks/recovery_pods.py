"""recovery, the pods' side: what lands on a quarantined node, and what a quarantine eviction costs a job.

The workloads judged here are every pod template the platform and its jobs send: the plan's own objects,
the training jobs verify synthesises per team and pool (infra/verify/jobs.py; every replicated job of
their JobSets), the elastic Job the job builder makes of the same job (components/incluster/job_runtime.py
elastic_job: no reference stack runs one, and a user's elastic job is built by that same function), and
the NCCL preflight JobSet of each job (infra/nccl_test.py build).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from contract.recovery import DIAGNOSTIC_TAINT, QUARANTINE_TAINT
from infra.verify.checks.admission import pod_templates
from infra.verify.context import GPU_RESOURCE, Context
from infra.verify.model import Plan

# The controller's taints are NoSchedule (controllers/gpu_health_agent.py wanted_taints).
QUARANTINE_EFFECT = "NoSchedule"
TAINTS = (QUARANTINE_TAINT, DIAGNOSTIC_TAINT)
# MIG devices are GPUs too (gpu-operator's mixed strategy advertises nvidia.com/mig-<profile>).
MIG_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class Workload:
    """One pod template: where it comes from, its kind, and its pod spec."""

    ref: str  # "JobSet research/x replicatedJob workers", "NCCL preflight JobSet ns/x ..."
    kind: str
    spec: Mapping[str, Any]


# ---- toleration matching ----------------------------------------------------------------------------


def tolerates(toleration: Mapping[str, Any], key: str, effect: str = QUARANTINE_EFFECT) -> bool:
    """Whether `toleration` tolerates a taint `key` with `effect`, whatever the taint's value.

    kubernetes/api@v0.33.0 (Kubernetes 1.33):core/v1/toleration.go ToleratesTaint: an effect, when given,
    must equal the taint's; a key, when given, must equal the taint's; then operator Exists matches any
    value and Equal (or empty) matches when the values are equal. An empty key with Exists is the wildcard
    that tolerates every taint. The quarantine taint's value is the reason (Xid79, DiagFailed, Straggler...),
    an open set, so an Equal toleration naming the key is counted as tolerating it: it does for that reason.
    """
    if toleration.get("effect") and toleration.get("effect") != effect:
        return False
    if toleration.get("key"):
        return toleration.get("key") == key
    # A key-less toleration must be Exists (the API refuses an Equal without a key, validation.go).
    return toleration.get("operator") == "Exists"


def tolerated(tolerations: Any) -> list[str]:
    """The recovery taints these tolerations tolerate, each with the toleration that does."""
    out = []
    for key in TAINTS:
        for t in tolerations or []:
            if isinstance(t, Mapping) and tolerates(t, key):
                out.append(f"{key} (by {_describe(t)})")
                break
    return out


def _describe(t: Mapping[str, Any]) -> str:
    if not t.get("key"):
        return f"key-less operator Exists, effect {t.get('effect') or 'any'}"
    return f"key {t['key']}, operator {t.get('operator') or 'Equal'}"


def requests_gpus(spec: Mapping[str, Any]) -> bool:
    """A container or init container requests (or is limited to) GPUs, whole or MIG."""
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = c.get("resources") or {}
        for part in ("requests", "limits"):
            for name, value in (resources.get(part) or {}).items():
                if (name == GPU_RESOURCE or str(name).startswith(MIG_PREFIX)) and str(value) not in ("0", ""):
                    return True
    return False


# ---- the workloads --------------------------------------------------------------------------------


def job_plans(ctx: Context) -> list[Plan]:
    """The job stacks' plans: a job stack's own, or the jobs verify synthesised on the platform."""
    plans = {id(p.plan): p.plan for p in ctx.pods}
    if ctx.job_only:
        plans.setdefault(id(ctx.plan), ctx.plan)
    return list(plans.values())


def _job_spec(plan: Plan) -> Any:
    from pydantic import ValidationError

    from components.spec import JobSpec

    try:
        return JobSpec.model_validate(dict(plan.config or {}))
    except ValidationError:
        return None  # a dump's partial config: admission notes that its preflight is not checked


def preflight(ctx: Context, plan: Plan) -> dict[str, Any] | None:
    """The NCCL preflight JobSet of a job plan's job (None: one node, or it cannot be built; admission
    reports the latter)."""
    from infra.nccl_test import PreflightError, build

    job = _job_spec(plan)
    platform = ctx.platform.platform_outputs
    if job is None or job.nodes.max < 2 or platform is None:
        return None
    try:
        return build(job, platform).manifest
    except PreflightError:
        return None


def elastic_variant(ctx: Context, plan: Plan) -> dict[str, Any] | None:
    """The elastic (batch/v1 Job) runtime of a synthesised job: the same job with nodes.min 1, built by
    the job builder's own function. None for a job stack (its own runtime is in its plan) or one node."""
    from components.incluster.job_runtime import elastic_job

    job = _job_spec(plan) if not ctx.job_only else None
    platform = ctx.platform.platform_outputs
    if job is None or job.nodes.max < 2 or platform is None:
        return None
    elastic = job.model_copy(update={"nodes": job.nodes.model_copy(update={"min": 1})})
    try:
        return elastic_job(elastic, platform)
    except (ValueError, AssertionError):
        return None


def _ref(body: Mapping[str, Any], prefix: str = "") -> str:
    meta = body.get("metadata") or {}
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{prefix}{body.get('kind')} {ns}{meta.get('name')}"


def workloads(ctx: Context) -> Iterator[Workload]:
    """Every pod template of the platform (unless a job stack) and of its jobs, with where it comes from."""
    bodies: list[tuple[str, Mapping[str, Any]]] = []
    if not ctx.job_only:
        bodies += [("", o.body) for o in ctx.platform.iter_objects()]
    for plan in job_plans(ctx):
        bodies += [("", o.body) for o in plan.iter_objects()]
        pre = preflight(ctx, plan)
        if pre is not None:
            bodies.append(("NCCL preflight ", pre))
        elastic = elastic_variant(ctx, plan)
        if elastic is not None:
            bodies.append(("elastic ", elastic))
    for prefix, body in bodies:
        for where, _meta, spec in pod_templates(body):
            yield Workload(f"{_ref(body, prefix)} {where}", str(body.get("kind")), spec)


# ---- eviction-uncounted -----------------------------------------------------------------------------


def job_templates(ctx: Context) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any] | None, str]]:
    """(ref, the batch/v1 Job spec, its JobSet's spec or None, the replicated job's name) of every training
    job: elastic Jobs, and every replicated job of every JobSet."""
    bodies: list[tuple[str, Mapping[str, Any]]] = []
    for plan in job_plans(ctx):
        bodies += [("", o.body) for o in plan.iter_objects() if o.kind in ("Job", "JobSet")]
        elastic = elastic_variant(ctx, plan)
        if elastic is not None:
            bodies.append(("elastic ", elastic))
    for prefix, body in bodies:
        spec = body.get("spec") or {}
        if body.get("kind") == "Job":
            yield _ref(body, prefix), spec, None, ""
            continue
        for rj in spec.get("replicatedJobs") or []:
            job_spec = (rj.get("template") or {}).get("spec") or {}
            yield f"{_ref(body, prefix)} replicatedJob {rj.get('name')}", job_spec, spec, str(rj.get("name"))


# Kubernetes' Failed-condition message of a Job a podFailurePolicy FailJob rule failed on a pod condition
# (kubernetes@v1.33 pkg/controller/job/pod_failure_policy.go matchPodFailurePolicy:
# "Pod %s/%s has condition %v matching %v rule at index %d"); reason PodFailurePolicy.
DISRUPTION_MESSAGE = "Pod {ns}/{pod} has condition DisruptionTarget matching FailJob rule at index {index}"
POD_FAILURE_POLICY = "PodFailurePolicy"
# jobset@v0.12.0 api/jobset/v1alpha2/jobset_types.go: the actions that restart without counting.
UNCOUNTED = ("RestartJobSetAndIgnoreMaxRestarts", "RestartJobAndIgnoreMaxRestarts")


def _disruption_rule(policy: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    """The first podFailurePolicy rule an evicted pod (condition DisruptionTarget True) matches by its
    conditions; the pattern's status defaults to True (batch/v1 PodFailurePolicyOnPodConditionsPattern)."""
    for i, rule in enumerate(policy.get("rules") or []):
        for c in rule.get("onPodConditions") or []:
            if c.get("type") == "DisruptionTarget" and str(c.get("status", "True")) == "True":
                return i, rule
    return None


def _jobset_rule(jobset: Mapping[str, Any], replicated: str, message: str) -> Mapping[str, Any] | None:
    """The JobSet failurePolicy rule the failed child Job matches: rules in order, the first whose
    reasons (empty: any), message patterns (RE2, searched; empty: any) and target replicated jobs (empty:
    all) all match (jobset@v0.12.0 pkg/controllers/failure_policy.go findFirstFailedPolicyRuleAndJob,
    ruleIsApplicable). None: no rule matches, and JobSet's default RestartJobSet counts it."""
    for rule in (jobset.get("failurePolicy") or {}).get("rules") or []:
        reasons = rule.get("onJobFailureReasons") or []
        patterns = rule.get("onJobFailureMessagePatterns") or []
        targets = rule.get("targetReplicatedJobs") or []
        if reasons and POD_FAILURE_POLICY not in reasons:
            continue
        if patterns and not any(re.search(str(p), message) for p in patterns):
            continue
        if targets and replicated not in targets:
            continue
        return rule
    return None


def eviction_problem(
    ref: str, job_spec: Mapping[str, Any], jobset: Mapping[str, Any] | None, replicated: str
) -> str | None:
    """Why a pod evicted from a quarantined node is counted against the job's restarts (None: it is not)."""
    policy = job_spec.get("podFailurePolicy") or {}
    found = _disruption_rule(policy)
    if found is None:
        return (
            f"{ref}: no podFailurePolicy rule matches DisruptionTarget, so a pod evicted from a quarantined "
            "node is a counted failure (backoffLimit / maxRestarts): a node fault costs the job a restart"
        )
    index, rule = found
    # First match wins (pod_failure_policy.go): an earlier rule that is not Ignore may take the evicted
    # pod by its exit code (143 after SIGTERM, 137 after the grace period) before this one is reached.
    earlier = [r for r in (policy.get("rules") or [])[:index] if r.get("action") != "Ignore"]
    if earlier:
        return (
            f"{ref}: podFailurePolicy rule {index} handles DisruptionTarget but an earlier {earlier[0].get('action')} "
            "rule may match the evicted pod first (first match wins): a node fault may count against the job"
        )
    action = rule.get("action")
    if action == "Ignore":
        return None  # the Job recreates the pod without counting it
    if jobset is None or action != "FailJob":
        return (
            f"{ref}: podFailurePolicy rule {index} turns DisruptionTarget into {action}, so a pod evicted from a "
            "quarantined node counts as a failure: it must be Ignore (in a JobSet child, or a FailJob the "
            "JobSet restarts with RestartJobSetAndIgnoreMaxRestarts)"
        )
    message = DISRUPTION_MESSAGE.format(ns="ns", pod=f"job-{replicated}-0-0-x", index=index)
    js_rule = _jobset_rule(jobset, replicated, message)
    js_action = js_rule.get("action") if js_rule else "RestartJobSet (no rule matches)"
    if js_action in UNCOUNTED:
        return None
    return (
        f"{ref}: its child Job fails on DisruptionTarget (rule {index}) and the JobSet's failurePolicy "
        f"answers {js_action}{' (rule ' + str(js_rule.get('name')) + ')' if js_rule else ''}: a node "
        "quarantine counts against maxRestarts; it must be RestartJobSetAndIgnoreMaxRestarts"
    )
