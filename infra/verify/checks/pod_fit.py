"""scheduling, a training pod on its pool's nodes: it selects exactly its pool's nodes, tolerates their
taints, fits their machine (GPUs, EFA devices, CPU, memory, /dev/shm) and the autoscaler's
scale-from-zero template; then it is admitted (pod_admission.py)."""

from __future__ import annotations

from infra.verify.charts import tolerates
from infra.verify.checks.kueue_admission import pod_lands_on
from infra.verify.checks.pod_admission import check_admission
from infra.verify.checks.pool_nodes import GIB, PoolNodes, _taint_str, pool_nodes, quantity
from infra.verify.context import GPU_RESOURCE, Context
from infra.verify.jobs import TrainingPod
from infra.verify.report import CheckResult


def pod_requests(pod: TrainingPod) -> tuple[dict[str, float], dict[str, float], float]:
    """Per-pod requests and limits (all containers), and /dev/shm (memory-backed emptyDir) in bytes."""
    req: dict[str, float] = {}
    lim: dict[str, float] = {}
    for c in pod.pod_spec.get("containers") or []:
        r = (c.get("resources") or {}).get("requests") or {}
        lm = (c.get("resources") or {}).get("limits") or {}
        # Extended resources: requests default to limits.
        for k, v in lm.items():
            lim[k] = lim.get(k, 0) + quantity(v)
            if k not in r and "/" in k:
                req[k] = req.get(k, 0) + quantity(v)
        for k, v in r.items():
            req[k] = req.get(k, 0) + quantity(v)
    shm = 0.0
    for v in pod.pod_spec.get("volumes") or []:
        ed = v.get("emptyDir") or {}
        if ed.get("medium") == "Memory" and ed.get("sizeLimit"):
            shm += quantity(ed["sizeLimit"])
    return req, lim, shm


def check_pod_fit(ctx: Context, res: CheckResult, pod: TrainingPod) -> None:
    pool = ctx.pool(pod.pool)
    if pool is None:
        res.fail(f"{pod.ref}: pool {pod.pool} is not a node pool of the platform", pod.ref)
        return
    nodes = pool_nodes(ctx, pool)
    _check_placement(ctx, res, pod, nodes)
    req, lim, shm = pod_requests(pod)
    _check_machine_fit(res, pod, nodes, req, lim, shm)
    _check_extended(res, pod, nodes, req)
    if nodes.template is not None:
        _check_template(res, pod, nodes, req)
    check_admission(ctx, res, pod, nodes, req, lim)


def _check_placement(ctx: Context, res: CheckResult, pod: TrainingPod, nodes: PoolNodes) -> None:
    """The pod selects exactly its pool's nodes and tolerates their taints."""
    spec = pod.pod_spec
    selector = dict(spec.get("nodeSelector") or {})
    missing = {k: v for k, v in selector.items() if nodes.labels.get(k) != v}
    if missing:
        res.fail(
            f"{pod.ref} selects {missing} but nodes of pool {pod.pool} ({nodes.source}) carry "
            f"{ {k: nodes.labels.get(k) for k in missing} }: it never schedules",
            pod.ref,
        )
    for other in ctx.platform.node_pools:
        if other.name in pod.all_pools:
            continue
        o = pool_nodes(ctx, other)
        if selector and pod_lands_on(spec, o.labels):
            res.fail(f"{pod.ref}: its nodeSelector {selector} also matches pool {other.name}", pod.ref)
    tolerations = spec.get("tolerations") or []
    for t in nodes.taints:
        if not tolerates(tolerations, t):
            res.fail(f"{pod.ref} does not tolerate taint {_taint_str(t)} of pool {pod.pool}", pod.ref)


def _check_machine_fit(
    res: CheckResult,
    pod: TrainingPod,
    nodes: PoolNodes,
    req: dict[str, float],
    lim: dict[str, float],
    shm: float,
) -> None:
    """GPUs, CPU, memory and /dev/shm fit every machine of the pool."""
    gpus = req.get(GPU_RESOURCE, 0)
    if gpus > nodes.gpus:
        res.fail(f"{pod.ref} requests {gpus:g} GPUs; nodes of pool {pod.pool} have {nodes.gpus}", pod.ref)
    for shape in nodes.machines:
        if shape is None:
            continue
        if req.get("cpu", 0) > shape.vcpus:
            res.fail(f"{pod.ref} requests {req['cpu']:g} CPUs; {shape.name} has {shape.vcpus}", pod.ref)
        if req.get("memory", 0) > shape.memory_gib * GIB:
            res.fail(
                f"{pod.ref} requests {req['memory'] / GIB:g} GiB of memory; {shape.name} has {shape.memory_gib:g} GiB",
                pod.ref,
            )
    if shm and lim.get("memory") and shm > lim["memory"]:
        res.fail(
            f"{pod.ref}: /dev/shm of {shm / GIB:g} GiB exceeds the container memory limit of {lim['memory'] / GIB:g} GiB",
            pod.ref,
        )


def _check_extended(res: CheckResult, pod: TrainingPod, nodes: PoolNodes, req: dict[str, float]) -> None:
    """The pod requests every device (EFA) of its nodes, and no extended resource they lack."""
    for name, have in nodes.extended.items():
        want = req.get(name, 0)
        if want == 0:
            res.fail(
                f"{pod.ref} requests no {name} on pool {pod.pool}, whose nodes have {have}: "
                "the job gets no EFA device and NCCL falls back to TCP",
                pod.ref,
            )
        elif want != have:
            res.fail(
                f"{pod.ref} requests {want:g} {name}; nodes of pool {pod.pool} have {have} (request all)",
                pod.ref,
            )
    for name, want in req.items():
        if "/" in name and name != GPU_RESOURCE and nodes.extended.get(name, 0) < want:
            res.fail(
                f"{pod.ref} requests {want:g} {name}; nodes of pool {pod.pool} have {nodes.extended.get(name, 0)}",
                pod.ref,
            )


def _check_template(res: CheckResult, pod: TrainingPod, nodes: PoolNodes, req: dict[str, float]) -> None:
    """The autoscaler's scale-from-zero template would start a node the pod fits on."""
    assert nodes.template is not None
    selector = dict(pod.pod_spec.get("nodeSelector") or {})
    tolerations = pod.pod_spec.get("tolerations") or []
    tmpl_labels = nodes.template.get("label", {})
    gaps = {k: v for k, v in selector.items() if tmpl_labels.get(k) != v}
    if gaps:
        res.fail(
            f"{pod.ref}: the scale-from-zero template of pool {pod.pool} lacks labels {gaps}: "
            "the autoscaler never scales the pool up for it",
            pod.ref,
            nodes.source,
        )
    for key, value in nodes.template.get("taint", {}).items():
        val, _, effect = value.rpartition(":")
        if not tolerates(tolerations, {"key": key, "value": val, "effect": effect}):
            res.fail(f"{pod.ref} does not tolerate template taint {key}={value} of pool {pod.pool}", pod.ref)
    for name, want in req.items():
        if "/" in name and name != GPU_RESOURCE:
            have = quantity(nodes.template.get("resources", {}).get(name, 0))
            if have < want:
                res.fail(
                    f"{pod.ref} requests {want:g} {name}; the scale-from-zero template of pool {pod.pool} "
                    f"offers {have:g}: the autoscaler never scales the pool up for it",
                    pod.ref,
                    nodes.source,
                )
