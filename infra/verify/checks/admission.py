"""admission: does the API server's admission chain accept what the platform and its jobs send?

- Pod Security: every pod template the plan sends (Pod, Job, CronJob, DaemonSet, Deployment, StatefulSet,
  ReplicaSet, each replicated job of a JobSet), the training jobs verify synthesises per team and pool
  (infra/verify/jobs.py) and the NCCL preflight JobSet of each of them (infra/nccl_test.py build), against
  its namespace's `pod-security.kubernetes.io/enforce` level: the Namespace in the plan, else the
  cluster's default (facts.yaml `admission.podSecurity.defaultLevel`: privileged; kube-system and default
  carry no label on EKS or GKE). The rules are pod_security.py's, at the namespace's `enforce-version`
  or the cluster's minor.
- Validating webhooks (admission_webhooks.py), each finding citing file@tag: JobSet's on every JobSet;
  Kueue's job webhooks on every JobSet and batch/v1 Job Kueue manages (team namespaces, or carrying a
  queue name); Kueue's on every ClusterQueue, Cohort and ResourceFlavor.

Helm releases' pods are rendered in the cluster, not in the plan: a note names their namespaces' levels.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from infra.verify import facts as F
from infra.verify.checks import admission_webhooks as W
from infra.verify.checks.pod_security import violations
from infra.verify.context import Context
from infra.verify.model import K8sObject, Plan
from infra.verify.report import CheckResult

TEAM_LABEL = "trainplane.dev/team"
POLICY = "pod-security-admission@v0.33.13:policy"
_TEMPLATE_PATHS = {
    "Job": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def pod_templates(body: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(where, metadata, spec) of every pod (template) an object makes."""
    kind = body.get("kind")
    if kind == "Pod":
        yield "pod", body.get("metadata") or {}, body.get("spec") or {}
    elif kind == "JobSet":
        for rj in (body.get("spec") or {}).get("replicatedJobs") or []:
            template = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            yield (
                f"replicatedJob {rj.get('name')}",
                template.get("metadata") or {},
                template.get("spec") or {},
            )
    elif kind in _TEMPLATE_PATHS:
        node: Any = body
        for key in _TEMPLATE_PATHS[str(kind)]:
            node = (node or {}).get(key) or {}
        yield "pod template", node.get("metadata") or {}, node.get("spec") or {}


class _Levels:
    """Each namespace's enforced level and version, from the platform plan's Namespace objects."""

    def __init__(self, platform: Plan):
        ps = F.facts()["admission"]["podSecurity"]
        self.default = str(ps["defaultLevel"])
        self.minor = platform.minor
        self.namespaces = {o.name: o.labels for o in platform.objects("Namespace")}
        self._label, self._version = ps["label"], ps["versionLabel"]

    def level(self, namespace: str) -> str:
        return str((self.namespaces.get(namespace) or {}).get(self._label, self.default))

    def version(self, namespace: str) -> tuple[int, int] | None:
        raw = str((self.namespaces.get(namespace) or {}).get(self._version, "latest"))
        if raw == "latest":
            return self.minor
        major, minor = raw.lstrip("v").split(".")[:2]
        return int(major), int(minor)

    def team(self, namespace: str) -> bool:
        return TEAM_LABEL in (self.namespaces.get(namespace) or {})


def _check_pods(res: CheckResult, levels: _Levels, ref: str, body: Mapping[str, Any]) -> None:
    namespace = str((body.get("metadata") or {}).get("namespace") or "default")
    level = levels.level(namespace)
    for where, meta, spec in pod_templates(body):
        res.examined.append(f"pods {ref}")
        for v in violations(meta, spec, level, levels.version(namespace)):
            check_id = v.split(":", 1)[0]
            res.fail(
                f"{ref} {where}: namespace {namespace} enforces Pod Security {level}, which refuses {v} "
                f"(Pod Security Standards; {POLICY}/check_{check_id}.go)",
                ref,
            )


def _check_webhooks(res: CheckResult, levels: _Levels, ref: str, body: Mapping[str, Any]) -> None:
    kind, meta, spec = body.get("kind"), body.get("metadata") or {}, body.get("spec") or {}
    found: list[str] = []
    if kind == "JobSet":
        found += W.jobset(body)
    managed = levels.team(str(meta.get("namespace"))) or W.QUEUE_LABEL in (meta.get("labels") or {})
    if kind in ("JobSet", "Job") and managed:
        pod_sets = [m for _, m, _ in pod_templates(body)]
        found += W.kueue_job(meta, spec, pod_sets, batch_job=kind == "Job")
    if kind == "ClusterQueue":
        found += W.cluster_queue(spec)
    elif kind == "Cohort":
        found += W.cohort(spec)
    elif kind == "ResourceFlavor":
        found += W.resource_flavor(spec)
    if kind in ("JobSet", "ClusterQueue", "Cohort", "ResourceFlavor") or (kind == "Job" and managed):
        res.examined.append(f"webhook {ref}")
    for line in found:
        res.fail(f"{ref}: {line}", ref)


def _check(res: CheckResult, levels: _Levels, ref: str, body: Mapping[str, Any]) -> None:
    _check_pods(res, levels, ref, body)
    _check_webhooks(res, levels, ref, body)


def _preflight(ctx: Context, res: CheckResult, plan: Plan) -> Mapping[str, Any] | None:
    """The NCCL preflight JobSet `trainplane nccl-test` would send for a job plan's job, if it has one."""
    from pydantic import ValidationError

    from components.spec import JobSpec
    from infra.nccl_test import PreflightError, build

    if not plan.config:
        res.note(f"job {plan.stack}: no job config in the plan (a dump?), its NCCL preflight is not checked")
        return None
    try:
        job = JobSpec.model_validate(dict(plan.config))
    except ValidationError:
        # a mockplan dump records no config: only its team and pools are recovered (infra/verify/dump.py)
        res.note(
            f"job {plan.stack}: the plan's job config is partial (a recovered dump?), its NCCL preflight is not checked"
        )
        return None
    if job.nodes.max < 2:
        return None  # a one-node job has no preflight (nccl_test.build needs 2 nodes)
    platform = ctx.platform.platform_outputs
    if platform is None:
        res.note(
            f"job {plan.stack}: its platform's plan records no outputs, its NCCL preflight is not checked"
        )
        return None
    try:
        return build(job, platform).manifest
    except PreflightError as e:
        res.fail(f"job {job.name}: its NCCL preflight cannot be built: {e}", f"job {job.name}")
        return None


def _objects(plan: Plan) -> list[K8sObject]:
    return list(plan.iter_objects())


def run(ctx: Context) -> CheckResult:
    res = CheckResult("admission")
    levels = _Levels(ctx.platform)
    if not ctx.job_only:
        for obj in _objects(ctx.platform):
            _check(res, levels, obj.ref, obj.body)
    job_plans = {id(p.plan): p.plan for p in ctx.pods}
    if ctx.job_only:
        job_plans.setdefault(id(ctx.plan), ctx.plan)
    for plan in job_plans.values():
        for obj in _objects(plan):
            _check(res, levels, obj.ref, obj.body)
        preflight = _preflight(ctx, res, plan)
        if preflight is not None:
            meta = preflight["metadata"]
            _check(res, levels, f"NCCL preflight JobSet {meta['namespace']}/{meta['name']}", preflight)
    unknown = sorted(t.namespace for t in ctx.platform.teams if t.namespace not in levels.namespaces)
    if unknown:
        res.note(
            f"team namespaces {', '.join(unknown)} are not in the plan (recorded outputs?): their pods are "
            f"checked at the cluster default, {levels.default}"
        )
    releases = sorted({f"{r.namespace} ({levels.level(r.namespace)})" for r in ctx.platform.releases()})
    if releases and not ctx.job_only:
        res.note(
            f"Helm releases' pods are rendered in the cluster, not checked here; namespaces: {', '.join(releases)}"
        )
    return res
