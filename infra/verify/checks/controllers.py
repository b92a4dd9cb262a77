"""scheduling, the controllers' side: what Kueue, JobSet and the Job controller then do with the objects.

Each rule models one behaviour read at the pinned tags (kueue v0.19.2, jobset v0.12.0):
- quota per flavor: the ClusterQueues' nominal GPU quotas on one flavor add up to at most the GPUs of the
  pools behind it; Kueue counts the sum as what exists (apis/kueue/v1beta2/clusterqueue_types.go
  ResourceQuota.nominalQuota) and keeps admitting to a flavor while it has quota (kueue#2560);
- a ClusterQueue names only ResourceFlavors the plan creates (pkg/cache/scheduler/clusterqueue.go
  inactiveReason: FlavorNotFound, the queue admits nothing);
- the JobSet runtime: the JobSet controller release, Kueue's `jobset.x-k8s.io/jobset` integration, a
  managedJobsNamespaceSelector that selects every team namespace (pkg/controller/jobframework/reconciler.go:
  a job in a namespace it does not select is never reconciled and stays suspended), the queue-name label
  on the job object (reconciler.go: without it and without manageJobsWithoutQueueName, Kueue ignores the
  job), the JobSet's failurePolicy with rules (jobset v0.12.0 pkg/controllers/failure_policy.go) and its
  child Job's podFailurePolicy (the trainer's exit contract);
- pods-ready timing: waitForPodsReady on, its timeout at least the floor, its recovery timeout at least
  the timeout (a lost node is replaced from zero);
- partial admission: an elastic Job admitted with fewer pods keeps completions equal to parallelism
  (pkg/controller/jobs/job/job_controller.go RunWithPodSetsInfo);
- a Capacity Block's flavor is limited to the block's dates (the block-window controller covers it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components.incluster.job_runtime import COMPLETIONS_EQUAL_PARALLELISM, MIN_PARALLELISM
from components.outputs import NodePoolInfo
from components.spec.platform import PODS_READY_FLOOR_MINUTES
from infra.verify import facts as F
from infra.verify.checks.kueue_admission import kueue_configs, pod_lands_on
from infra.verify.checks.pool_nodes import pool_nodes, quantity
from infra.verify.context import GPU_RESOURCE, Context
from infra.verify.jobs import TrainingPod
from infra.verify.report import CheckResult

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
BLOCK_WINDOW = "trainplane-block-window"


def kueue_partial_admission(job: Mapping[str, Any], count: int) -> dict[str, Any]:
    """The spec of a batch/v1 Job once Kueue admits it with `count` pods (kueue v0.19.2
    pkg/controller/jobs/job/job_controller.go RunWithPodSetsInfo): with a job-min-parallelism annotation,
    parallelism becomes `count`, and completions too only when job-completions-equal-parallelism is true."""
    spec = dict(job.get("spec") or {})
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if MIN_PARALLELISM in annotations:
        spec["parallelism"] = count
        if str(annotations.get(COMPLETIONS_EQUAL_PARALLELISM, "")).lower() in ("true", "1", "t"):
            spec["completions"] = count
    return spec


def kueue_config(ctx: Context) -> tuple[Any, dict[str, Any]] | None:
    """(the Kueue release, its manager Configuration), or None without Kueue."""
    return next(kueue_configs(ctx), None)


# ---- quotas and flavors -----------------------------------------------------------------------------


def _flavor_pools(ctx: Context, flavor: Any) -> list[NodePoolInfo]:
    labels = dict(flavor.spec.get("nodeLabels") or {})
    return [
        p for p in ctx.gpu_pools() if all(pool_nodes(ctx, p).labels.get(k) == v for k, v in labels.items())
    ]


def _queue_flavors(queues: list[Any]) -> list[tuple[Any, Mapping[str, Any]]]:
    """(ClusterQueue, one of its flavor entries) over every resource group of every queue."""
    return [
        (cq, fl)
        for cq in queues
        for g in cq.spec.get("resourceGroups") or []
        for fl in g.get("flavors") or []
    ]


def check_flavor_quotas(ctx: Context, res: CheckResult) -> None:
    queues = ctx.platform.objects("ClusterQueue")
    flavors = {f.name: f for f in ctx.platform.objects("ResourceFlavor")}
    entries = _queue_flavors(queues)
    for cq, fl in entries:
        if str(fl.get("name")) not in flavors:
            res.fail(
                f"{cq.ref} names ResourceFlavor {fl.get('name')}, which the plan does not create: Kueue "
                "marks the queue inactive (FlavorNotFound) and admits nothing through it",
                cq.ref,
            )
    for name, flavor in flavors.items():
        pools = _flavor_pools(ctx, flavor)
        if not pools:
            continue
        capacity = sum(p.gpus_per_node * p.max_nodes for p in pools)
        nominal: dict[str, float] = {}
        for cq, fl in entries:
            for r in fl.get("resources") or [] if fl.get("name") == name else []:
                if r.get("name") == GPU_RESOURCE:
                    nominal[cq.name] = nominal.get(cq.name, 0) + quantity(r.get("nominalQuota", 0))
        if sum(nominal.values()) > capacity:
            shares = ", ".join(f"{q} {v:g}" for q, v in sorted(nominal.items()))
            behind = ", ".join(f"{p.name} {p.max_nodes} x {p.gpus_per_node}" for p in pools)
            res.fail(
                f"ResourceFlavor {name}: the ClusterQueues' nominal {GPU_RESOURCE} quotas add up to "
                f"{sum(nominal.values()):g} ({shares}) but its pools have {capacity} GPUs ({behind}): Kueue "
                "admits jobs the nodes cannot hold and they wait there instead of falling back (kueue#2560)",
                f"ResourceFlavor {name}",
            )
        res.examined.append(f"ResourceFlavor {name}")


def check_block_windows(ctx: Context, res: CheckResult) -> None:
    """Every Capacity Block pool's flavor is in the block-window controller's config, with dates."""
    flavors = {f.name: f for f in ctx.platform.objects("ResourceFlavor")}
    covered: dict[str, set[str]] = {}
    deployed = {d.name for d in ctx.platform.objects("Deployment")}
    role = next((r for r in ctx.platform.objects("ClusterRole") if r.name == BLOCK_WINDOW), None)
    may_patch = role is not None and any(
        "clusterqueues" in (rule.get("resources") or []) and "patch" in (rule.get("verbs") or [])
        for rule in role.body.get("rules") or []
    )
    for cm in ctx.platform.objects("ConfigMap"):
        if cm.name != BLOCK_WINDOW or BLOCK_WINDOW not in deployed or not may_patch:
            continue
        try:
            config = json.loads(str((cm.body.get("data") or {}).get("config.json", "{}")))
        except json.JSONDecodeError:
            continue
        for fl in config.get("flavors") or []:
            for p in fl.get("pools") or []:
                if p.get("start") is not None and p.get("end") is not None:
                    covered.setdefault(str(fl.get("name")), set()).add(str(p.get("name")))
    for pool in ctx.gpu_pools():
        if pool.capacity != "capacity-block":
            continue
        labels = pool_nodes(ctx, pool).labels
        for name, flavor in flavors.items():
            if not all(labels.get(k) == v for k, v in (flavor.spec.get("nodeLabels") or {}).items()):
                continue
            if pool.name not in covered.get(name, set()):
                res.fail(
                    f"GPU pool {pool.name} is a Capacity Block but nothing limits flavor {name} to the "
                    "block's dates (no block-window controller with its dates): outside them Kueue keeps "
                    "admitting jobs there and they never fall back (kueue#2560)",
                    f"ResourceFlavor {name}",
                )


# ---- the JobSet runtime and Kueue's configuration ---------------------------------------------------


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels, matchExpressions) against labels; the operators are a node
    selector's, so the node-affinity evaluator answers it."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    terms = [{"matchExpressions": list(selector.get("matchExpressions") or [])}]
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    return pod_lands_on({"affinity": affinity}, labels)


def check_runtime(ctx: Context, res: CheckResult) -> None:
    found = kueue_config(ctx)
    if found is None:
        return
    rel, config = found
    if not ctx.platform.releases("jobset"):
        res.fail(
            f"{rel.ref}: the plan has no JobSet controller release: fixed-size jobs (JobSets) are never run",
            rel.ref,
        )
    frameworks = F.dig(config, "integrations.frameworks") or []
    if JOBSET_FRAMEWORK not in frameworks:
        res.fail(
            f"{rel.ref} does not enable Kueue's {JOBSET_FRAMEWORK} integration: JobSets are created suspended "
            "and nothing ever admits them",
            rel.ref,
        )
    selector = config.get("managedJobsNamespaceSelector")
    if isinstance(selector, Mapping):
        for team in ctx.platform.teams:
            ns = ctx.object("Namespace", None, team.namespace or team.name)
            # The API server labels every namespace with its name.
            labels = {**(ns.labels if ns else {}), "kubernetes.io/metadata.name": team.namespace}
            if not _selects(selector, labels):
                res.fail(
                    f"{rel.ref}: managedJobsNamespaceSelector does not select team namespace {team.namespace}: "
                    "Kueue never reconciles its jobs and they stay suspended (jobframework/reconciler.go)",
                    rel.ref,
                )
    ready = config.get("waitForPodsReady")
    if not isinstance(ready, Mapping):
        res.fail(
            f"{rel.ref} has no waitForPodsReady: a multi-node job can hold half its GPUs forever", rel.ref
        )
        return
    timeout = _minutes(ready.get("timeout"))
    recovery = _minutes(ready.get("recoveryTimeout")) if ready.get("recoveryTimeout") else timeout
    if timeout is None or timeout < PODS_READY_FLOOR_MINUTES:
        res.fail(
            f"{rel.ref}: waitForPodsReady.timeout {ready.get('timeout')} is under {PODS_READY_FLOOR_MINUTES}m "
            "(Kueue's default): a GPU node from zero takes longer, so jobs are evicted while their nodes start",
            rel.ref,
        )
    elif recovery is None or recovery < timeout:
        res.fail(
            f"{rel.ref}: waitForPodsReady.recoveryTimeout {ready.get('recoveryTimeout')} is shorter than the "
            f"timeout {ready.get('timeout')}: a lost node is replaced from zero, so jobs are evicted meanwhile",
            rel.ref,
        )


def _minutes(value: Any) -> float | None:
    """A Go duration of hours/minutes/seconds ("30m", "1h30m", "90s") in minutes."""
    text, total, number = str(value or ""), 0.0, ""
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in "hms" and number:
            total += float(number) * {"h": 60, "m": 1, "s": 1 / 60}[ch]
            number = ""
        else:
            return None
    return total if text and not number else None


def check_job_runtime(ctx: Context, res: CheckResult, pod: TrainingPod) -> None:
    """The job object carries its queue, its failure policies, and partial admission keeps it whole."""
    job = pod.job
    if not job.labels.get(QUEUE_LABEL):
        res.fail(
            f"{pod.ref} has no {QUEUE_LABEL} label: Kueue ignores it (manageJobsWithoutQueueName is off) and "
            "it stays suspended",
            pod.ref,
        )
    if not (job.spec.get("podFailurePolicy") or {}).get("rules"):
        res.fail(f"{pod.ref} has no podFailurePolicy: every exit counts as a crash", pod.ref)
    if pod.runtime == "JobSet":
        # jobset v0.12.0 pkg/controllers/failure_policy.go executeFailurePolicy: no failurePolicy fails the
        # JobSet on the first failed child Job; no rule matching means RestartJobSet, counted.
        js = next((o for o in pod.plan.objects("JobSet") if o.name == job.name), None)
        policy = js.spec.get("failurePolicy") if js is not None else {}
        if js is not None and not policy:
            res.fail(
                f"{pod.ref} has no failurePolicy: JobSet fails the whole job on its first failed pod, a "
                "preemption included",
                pod.ref,
            )
        elif js is not None and not (policy or {}).get("rules"):
            res.fail(
                f"{pod.ref} has no failurePolicy rules: a preemption counts against maxRestarts and a "
                "configuration error restarts until they are used up",
                pod.ref,
            )
    if MIN_PARALLELISM in job.annotations:
        admitted = kueue_partial_admission(job.body, pod.min_pods)
        if admitted.get("completions") != admitted.get("parallelism"):
            res.fail(
                f"{pod.ref}: admitted with {pod.min_pods} pods Kueue sets parallelism {admitted.get('parallelism')} "
                f"but leaves completions at {admitted.get('completions')}: the missing indexes run after the "
                f'job finishes; set {COMPLETIONS_EQUAL_PARALLELISM}: "true"',
                pod.ref,
            )


def run_checks(ctx: Context, res: CheckResult) -> None:
    """The platform-wide rules (job stacks check their own job objects only)."""
    if ctx.job_only:
        return
    check_flavor_quotas(ctx, res)
    check_block_windows(ctx, res)
    check_runtime(ctx, res)
