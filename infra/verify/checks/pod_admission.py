"""scheduling, a training job admitted in its team's namespace: its queue names a LocalQueue and
ClusterQueue of the plan that admit it (kueue_admission.py), and the namespace's ResourceQuota and
LimitRange admit its pods at the job's minimum size."""

from __future__ import annotations

from typing import Any

from infra.verify.checks.kueue_admission import check_cluster_queue, check_pod_topology
from infra.verify.checks.pool_nodes import PoolNodes, quantity, shown
from infra.verify.context import Context
from infra.verify.jobs import TrainingPod
from infra.verify.report import CheckResult

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _cluster_queue(ctx: Context, pod: TrainingPod) -> tuple[Any, Any]:
    queue = pod.labels.get(KUEUE_QUEUE_LABEL) or (pod.job.labels or {}).get(KUEUE_QUEUE_LABEL)
    if not queue:
        return None, None
    lq = ctx.object("LocalQueue", pod.namespace, queue)
    if lq is None:
        return queue, None
    return queue, ctx.object("ClusterQueue", None, str(lq.spec.get("clusterQueue")))


def check_admission(
    ctx: Context,
    res: CheckResult,
    pod: TrainingPod,
    nodes: PoolNodes,
    req: dict[str, float],
    lim: dict[str, float],
) -> None:
    # An elastic job (kueue.x-k8s.io/job-min-parallelism) is admitted at its minimum when quota is short
    # (Kueue partial admission, beta and on by default): that is the size that must fit.
    n = pod.min_pods
    total = {k: v * n for k, v in req.items()}
    queue, cq = _cluster_queue(ctx, pod)
    if queue and cq is None:
        res.fail(f"{pod.ref} names queue {queue}, which has no LocalQueue/ClusterQueue in the plan", pod.ref)
    if cq is not None:
        check_cluster_queue(ctx, res, pod, nodes, cq, req, total)
    check_pod_topology(ctx, res, pod, cq)
    _check_resource_quota(ctx, res, pod, total, lim)
    _check_limit_range(ctx, res, pod)


def _check_resource_quota(
    ctx: Context, res: CheckResult, pod: TrainingPod, total: dict[str, float], lim: dict[str, float]
) -> None:
    """The namespace's ResourceQuota admits the job's pods at its minimum size."""
    n = pod.min_pods
    for rq in ctx.platform.objects("ResourceQuota", pod.namespace):
        hard = rq.spec.get("hard") or {}
        for key, value in hard.items():
            want = None
            if key.startswith("requests."):
                want = total.get(key.removeprefix("requests."))
            elif key.startswith("limits."):
                want = (
                    lim.get(key.removeprefix("limits."), 0) * n
                    if key.removeprefix("limits.") in lim
                    else None
                )
            elif key in ("cpu", "memory"):
                want = total.get(key)
            elif key == "pods":
                want = n
            if want is not None and want > quantity(value):
                res.fail(
                    f"{pod.ref} needs {key} {shown(key, want)} for {n} pods; {rq.ref} allows {value}",
                    pod.ref,
                    rq.ref,
                )


def _check_limit_range(ctx: Context, res: CheckResult, pod: TrainingPod) -> None:
    """Every container is within the namespace's LimitRange."""
    for lr in ctx.platform.objects("LimitRange", pod.namespace):
        for item in lr.spec.get("limits") or []:
            if item.get("type") != "Container":
                continue
            for c in pod.pod_spec.get("containers") or []:
                r = (c.get("resources") or {}).get("requests") or {}
                lm = (c.get("resources") or {}).get("limits") or {}
                for name, mx in (item.get("max") or {}).items():
                    got = max(quantity(r.get(name, 0)), quantity(lm.get(name, 0)))
                    if got > quantity(mx):
                        res.fail(
                            f"{pod.ref}: container {c.get('name')} asks {name} {shown(name, got)}; {lr.ref} allows at most {mx}",
                            pod.ref,
                            lr.ref,
                        )
                for name, mn in (item.get("min") or {}).items():
                    if quantity(r.get(name, lm.get(name, 0))) < quantity(mn):
                        res.fail(
                            f"{pod.ref}: container {c.get('name')} asks less {name} than {lr.ref}'s minimum {mn}",
                            pod.ref,
                            lr.ref,
                        )
