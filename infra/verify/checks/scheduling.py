"""scheduling: what must run on GPU nodes can, and a training job lands on its pool and is admitted.

- Every DaemonSet that must run on GPU nodes (device plugin, DCGM exporter, feature discovery, node
  exporter, log shipper, CSI node plugins of the volumes jobs mount, EFA plugin on EFA pools, the node
  monitoring agent) tolerates every taint of every GPU pool; Kueue does not gate their pods.
- Each training pod (the largest job of each team on each GPU pool, made by the real job program)
  selects exactly its pool's nodes, tolerates its taints, fits its machine (GPUs, EFA devices, CPU,
  memory, /dev/shm) and its scale-from-zero template; Kueue covers every resource it requests with a
  flavor that matches its pool; the team's ResourceQuota, LimitRange and ClusterQueue admit the job.
"""

from __future__ import annotations

from typing import Any

from infra.verify import facts as F
from infra.verify.charts import tolerates
from infra.verify.checks.controllers import check_job_runtime, run_checks
from infra.verify.checks.kueue_admission import (
    check_cluster_queue,
    check_kueue_pod_integration,
    check_pod_topology,
    check_queues,
    pod_lands_on,
)
from infra.verify.checks.pool_nodes import GIB, PoolNodes, _taint_str, pool_nodes, quantity, shown
from infra.verify.checks.spot_notice import check_spot_notice, note_gke_spot_grace
from infra.verify.context import EFA_RESOURCE, GPU_RESOURCE, Context
from infra.verify.jobs import TrainingPod
from infra.verify.report import CheckResult

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _is_efa_pool(nodes: PoolNodes) -> bool:
    return nodes.extended.get(EFA_RESOURCE, 0) > 0


# ---- DaemonSets on GPU nodes ------------------------------------------------------------------------


def check_daemonsets(ctx: Context, res: CheckResult) -> None:
    gpu_pools = [(p, pool_nodes(ctx, p)) for p in ctx.gpu_pools()]
    if ctx.job_only:
        gpu_pools = [(p, n) for p, n in gpu_pools if any(pod.pool == p["name"] for pod in ctx.pods)]
    _check_daemonset_tolerations(ctx, res, gpu_pools)
    if ctx.job_only:
        return
    for u in ctx.charts.unknown:
        res.fail(u)
    if ctx.platform.cloud == "aws":
        _check_aws_gpu_pools(ctx, res, gpu_pools)
    elif ctx.platform.cloud == "gcp":
        note_gke_spot_grace(ctx, res)
    check_kueue_pod_integration(ctx, res)


def _check_daemonset_tolerations(
    ctx: Context, res: CheckResult, gpu_pools: list[tuple[Any, PoolNodes]]
) -> None:
    mounted_drivers = _drivers_mounted(ctx)
    for d in ctx.charts.daemon_sets:
        if d.scope == "selected":
            continue
        if d.scope == "storage" and d.csi_driver not in mounted_drivers:
            continue
        for pool, nodes in gpu_pools:
            if d.scope == "efa" and not _is_efa_pool(nodes):
                continue
            if d.scope == "spot" and pool.get("capacity") != "spot":
                continue
            for t in nodes.taints:
                if not tolerates(d.tolerations, t):
                    res.fail(
                        f"DaemonSet {d.name} ({d.role}, {d.owner}) does not tolerate taint {_taint_str(t)} "
                        f"of GPU pool {pool['name']}: it never runs there",
                        d.name,
                        f"pool {pool['name']}",
                    )
            res.examined.append(f"{d.name} on {pool['name']}")


def _check_aws_gpu_pools(ctx: Context, res: CheckResult, gpu_pools: list[tuple[Any, PoolNodes]]) -> None:
    """EKS: node repair has its monitoring agent, the autoscaler knows GPU nodes, one EFA layout a pool."""
    plan = ctx.platform
    repair = F.cloud("aws")["nodeRepair"]
    for pool, nodes in gpu_pools:
        if nodes.node_repair and repair["addon"] not in plan.eks_addons():
            res.fail(
                f"node repair is on for GPU pool {pool['name']} but EKS add-on {repair['addon']} is not "
                "installed: GPU faults (AcceleratedHardwareReady) are never detected",
                nodes.source,
            )
    check_spot_notice(ctx, res, gpu_pools)
    if plan.releases("cluster-autoscaler"):
        label = F.cloud("aws")["autoscaler"]["gpuLabel"]
        for pool, nodes in gpu_pools:
            if label not in nodes.labels:
                res.fail(
                    f"GPU pool {pool['name']} nodes lack label {label}: cluster-autoscaler does not treat "
                    "them as GPU nodes while the device plugin starts and may add more",
                    nodes.source,
                )
            if nodes.template is not None and label not in nodes.template.get("label", {}):
                res.fail(
                    f"GPU pool {pool['name']}: the scale-from-zero template has no label {label}",
                    nodes.source,
                )
    for pool, nodes in gpu_pools:
        efa_counts = {s.name: s.efa_interfaces for s in nodes.machines if s is not None}
        if _is_efa_pool(nodes) and len(set(efa_counts.values())) > 1:
            res.fail(
                f"EFA pool {pool['name']} mixes instance types with different EFA layouts "
                f"({', '.join(f'{k} {v}' for k, v in sorted(efa_counts.items()))}); its launch template "
                f"attaches {nodes.extended[EFA_RESOURCE]}: split the pool per layout",
                nodes.source,
            )


def _drivers_mounted(ctx: Context) -> set[str]:
    drivers = set()
    for pv in ctx.platform.objects("PersistentVolume"):
        driver = (pv.spec.get("csi") or {}).get("driver")
        if driver:
            drivers.add(driver)
    return drivers


# ---- training pods ----------------------------------------------------------------------------------


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
        if other.get("name") in pod.all_pools:
            continue
        o = pool_nodes(ctx, other)
        if selector and pod_lands_on(spec, o.labels):
            res.fail(f"{pod.ref}: its nodeSelector {selector} also matches pool {other['name']}", pod.ref)
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


def run(ctx: Context) -> CheckResult:
    res = CheckResult("scheduling")
    check_daemonsets(ctx, res)
    if not ctx.job_only:
        check_queues(ctx, res)
    run_checks(ctx, res)
    for line in ctx.pod_problems:
        res.fail(line)
    for pod in ctx.pods:
        check_pod_fit(ctx, res, pod)
        check_job_runtime(ctx, res, pod)
        res.examined.append(pod.ref)
    return res
