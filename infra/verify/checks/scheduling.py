"""scheduling: what must run on GPU nodes can, and a training job lands on its pool and is admitted.

- Every DaemonSet that must run on GPU nodes (device plugin, DCGM exporter, feature discovery, node
  exporter, log shipper, CSI node plugins of the volumes jobs mount, EFA plugin on EFA pools, the node
  monitoring agent) tolerates every taint of every GPU pool; Kueue does not gate their pods.
  The cloud's verifier adds its own findings about the GPU pools' nodes (hook `check_gpu_pools`).
- Each training pod (the largest job of each team on each GPU pool, made by the real job program)
  selects exactly its pool's nodes, tolerates its taints, fits its machine (GPUs, EFA devices, CPU,
  memory, /dev/shm) and its scale-from-zero template (pod_fit.py); Kueue covers every resource it
  requests with a flavor that matches its pool; the team's ResourceQuota, LimitRange and ClusterQueue
  admit the job (pod_admission.py).
- A job stack's image on a placeholder registry (components/placeholder_images.py: the examples'
  `ghcr.io/example/...`, reserved domains, `<your-registry>`) is a note naming `job.image`, not a
  failure: its pods would be scheduled and never start.
"""

from __future__ import annotations

from components.outputs import NodePoolInfo
from infra.verify.charts import tolerates
from infra.verify.checks.controllers import check_job_runtime, run_checks
from infra.verify.checks.kueue_admission import check_kueue_pod_integration, check_queues
from infra.verify.checks.pod_fit import check_pod_fit
from infra.verify.checks.pool_nodes import PoolNodes, _taint_str, is_efa_pool, pool_nodes
from infra.verify.context import Context
from infra.verify.report import CheckResult

# ---- DaemonSets on GPU nodes ------------------------------------------------------------------------


def check_daemonsets(ctx: Context, res: CheckResult) -> None:
    gpu_pools = [(p, pool_nodes(ctx, p)) for p in ctx.gpu_pools()]
    if ctx.job_only:
        gpu_pools = [(p, n) for p, n in gpu_pools if any(pod.pool == p.name for pod in ctx.pods)]
    _check_daemonset_tolerations(ctx, res, gpu_pools)
    if ctx.job_only:
        return
    for u in ctx.charts.unknown:
        res.fail(u)
    ctx.verifier.check_gpu_pools(ctx, res, gpu_pools)
    check_kueue_pod_integration(ctx, res)


def _check_daemonset_tolerations(
    ctx: Context, res: CheckResult, gpu_pools: list[tuple[NodePoolInfo, PoolNodes]]
) -> None:
    mounted_drivers = _drivers_mounted(ctx)
    for d in ctx.charts.daemon_sets:
        if d.scope == "selected":
            continue
        if d.scope == "storage" and d.csi_driver not in mounted_drivers:
            continue
        for pool, nodes in gpu_pools:
            if d.scope == "efa" and not is_efa_pool(nodes):
                continue
            if d.scope == "spot" and pool.capacity != "spot":
                continue
            for t in nodes.taints:
                if not tolerates(d.tolerations, t):
                    res.fail(
                        f"DaemonSet {d.name} ({d.role}, {d.owner}) does not tolerate taint {_taint_str(t)} "
                        f"of GPU pool {pool.name}: it never runs there",
                        d.name,
                        f"pool {pool.name}",
                    )
            res.examined.append(f"{d.name} on {pool.name}")


def _drivers_mounted(ctx: Context) -> set[str]:
    drivers = set()
    for pv in ctx.platform.objects("PersistentVolume"):
        driver = (pv.spec.get("csi") or {}).get("driver")
        if driver:
            drivers.add(driver)
    return drivers


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
    note_placeholder_image(ctx, res)
    return res


def note_placeholder_image(ctx: Context, res: CheckResult) -> None:
    """A job stack's own image (its config's `image`; the platform's synthesized pods use a stand-in), on
    an offline plan and against a live cluster alike."""
    from components.placeholder_images import placeholder_note

    image = (ctx.plan.config or {}).get("image") if ctx.job_only else None
    if image and (note := placeholder_note(str(image), "job.image")):
        res.note(note)
