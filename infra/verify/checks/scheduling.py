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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.catalog import catalog
from infra.verify import facts as F
from infra.verify.charts import tolerates
from infra.verify.context import EFA_RESOURCE, GPU_RESOURCE, Context
from infra.verify.jobs import TrainingPod
from infra.verify.report import CheckResult

GIB = 1024**3
EKS_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def shown(name: str, value: float) -> str:
    """A quantity for people: memory-like resources in GiB, the rest as numbers."""
    if name.endswith("memory") or name.endswith("storage"):
        return f"{value / GIB:g}Gi"
    return f"{value:g}"


def quantity(value: Any) -> float:
    from kubernetes.utils.quantity import parse_quantity

    return float(parse_quantity(str(value)))


def _taint_str(t: Mapping[str, Any]) -> str:
    return f"{t['key']}={t.get('value', '')}:{t['effect']}"


@dataclass
class PoolNodes:
    """What the nodes of one pool carry, read from the cloud resources that make them."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    machines: list[Any]  # catalog MachineShape per instance/machine type (None: unknown type)
    machine_names: list[str]
    gpus: int
    extended: dict[str, int] = field(default_factory=dict)
    # Scale-from-zero template (cluster-autoscaler on AWS): labels, taints, resources. None: not tagged.
    template: dict[str, dict[str, str]] | None = None
    node_repair: bool = False
    source: str = ""


def _aws_nodes(ctx: Context, pool: Mapping[str, Any]) -> PoolNodes | None:
    plan = ctx.platform
    by_urn = plan.by_urn()
    for ng in plan.of_type("aws:eks/nodeGroup:NodeGroup"):
        labels = dict(ng.inputs.get("labels") or {})
        if labels.get("trainplane.dev/pool") != pool["name"] and not str(
            ng.inputs.get("nodeGroupName", "")
        ).endswith(f"-{pool['name']}"):
            continue
        labels.setdefault("eks.amazonaws.com/capacityType", str(ng.inputs.get("capacityType", "ON_DEMAND")))
        labels.setdefault("eks.amazonaws.com/nodegroup", str(ng.inputs.get("nodeGroupName", ng.name)))
        taints = [
            {
                "key": t["key"],
                "value": t.get("value", ""),
                "effect": EKS_EFFECTS.get(t["effect"], t["effect"]),
            }
            for t in ng.inputs.get("taints") or []
        ]
        types = list(ng.inputs.get("instanceTypes") or [])
        shapes = [catalog().machine("aws", t) for t in types]
        efa = 0
        for dep in ng.deps:
            lt = by_urn.get(dep)
            if lt is not None and lt.type == "aws:ec2/launchTemplate:LaunchTemplate":
                efa = sum(
                    1
                    for n in lt.inputs.get("networkInterfaces") or []
                    if n.get("interfaceType") in ("efa", "efa-only")
                )
        template: dict[str, dict[str, str]] = {"label": {}, "taint": {}, "resources": {}}
        tagged = False
        prefix = F.cloud("aws")["templateTagPrefix"] + "/"
        for tag in plan.of_type("aws:autoscaling/tag:Tag"):
            if tag.parent != ng.parent:
                continue
            tagged = True
            key, value = (
                str((tag.inputs.get("tag") or {}).get("key", "")),
                str((tag.inputs.get("tag") or {}).get("value", "")),
            )
            if key.startswith(prefix):
                kind, _, name = key[len(prefix) :].partition("/")
                template.setdefault(kind, {})[name] = value
        return PoolNodes(
            name=pool["name"],
            labels=labels,
            taints=taints,
            machines=shapes,
            machine_names=types,
            gpus=min((s.gpus for s in shapes if s), default=int(pool.get("gpusPerNode") or 0)),
            extended={EFA_RESOURCE: efa} if efa else {},
            template=template if tagged else None,
            node_repair=bool((ng.inputs.get("nodeRepairConfig") or {}).get("enabled")),
            source=f"node group {ng.inputs.get('nodeGroupName', ng.name)}",
        )
    return None


def _gcp_nodes(ctx: Context, pool: Mapping[str, Any]) -> PoolNodes | None:
    for np in ctx.platform.of_type("gcp:container/nodePool:NodePool"):
        if np.inputs.get("name") != pool["name"]:
            continue
        cfg = np.inputs.get("nodeConfig") or {}
        labels = dict(cfg.get("labels") or {})
        labels["cloud.google.com/gke-nodepool"] = str(np.inputs.get("name"))
        accels = cfg.get("guestAccelerators") or []
        if accels:
            labels["cloud.google.com/gke-accelerator"] = str(accels[0].get("type"))
        if cfg.get("spot"):
            labels["cloud.google.com/gke-spot"] = "true"
        taints = [
            {
                "key": t["key"],
                "value": t.get("value", ""),
                "effect": EKS_EFFECTS.get(t["effect"], t["effect"]),
            }
            for t in cfg.get("taints") or []
        ]
        for t in ctx.pool_taints(dict(pool)):
            if t not in taints and accels:
                taints.append(t)
        machine = str(cfg.get("machineType", ""))
        shape = catalog().machine("gcp", machine)
        return PoolNodes(
            name=pool["name"],
            labels=labels,
            taints=taints,
            machines=[shape],
            machine_names=[machine],
            gpus=int(accels[0].get("count", 0)) if accels else 0,
            source=f"node pool {np.inputs.get('name')}",
        )
    return None


def pool_nodes(ctx: Context, pool: Mapping[str, Any]) -> PoolNodes:
    found = None
    if ctx.platform.cloud == "aws":
        found = _aws_nodes(ctx, pool)
    elif ctx.platform.cloud == "gcp":
        found = _gcp_nodes(ctx, pool)
    if found is not None:
        return found
    # Existing clusters (or a plan without the cloud resource): the pool as the platform describes it.
    return PoolNodes(
        name=pool["name"],
        labels=dict(pool.get("labels") or {}),
        taints=ctx.pool_taints(dict(pool)),
        machines=[],
        machine_names=list(pool.get("machineTypes") or []),
        gpus=int(pool.get("gpusPerNode") or 0),
        extended={k: int(v) for k, v in (pool.get("extendedResources") or {}).items()},
        source="platform outputs",
    )


def _is_efa_pool(nodes: PoolNodes) -> bool:
    return nodes.extended.get(EFA_RESOURCE, 0) > 0


# ---- DaemonSets on GPU nodes ------------------------------------------------------------------------


def check_daemonsets(ctx: Context, res: CheckResult) -> None:
    gpu_pools = [(p, pool_nodes(ctx, p)) for p in ctx.gpu_pools()]
    if ctx.job_only:
        gpu_pools = [(p, n) for p, n in gpu_pools if any(pod.pool == p["name"] for pod in ctx.pods)]
    mounted_drivers = _drivers_mounted(ctx)
    for d in ctx.charts.daemon_sets:
        if d.scope == "selected":
            continue
        if d.scope == "storage" and d.csi_driver not in mounted_drivers:
            continue
        for pool, nodes in gpu_pools:
            if d.scope == "efa" and not _is_efa_pool(nodes):
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
    if ctx.job_only:
        return
    if ctx.charts.unknown:
        for u in ctx.charts.unknown:
            res.fail(u)
    plan = ctx.platform
    if plan.cloud == "aws":
        repair = F.cloud("aws")["nodeRepair"]
        for pool, nodes in gpu_pools:
            if nodes.node_repair and repair["addon"] not in plan.eks_addons():
                res.fail(
                    f"node repair is on for GPU pool {pool['name']} but EKS add-on {repair['addon']} is not "
                    "installed: GPU faults (AcceleratedHardwareReady) are never detected",
                    nodes.source,
                )
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
    check_kueue_pod_integration(ctx, res)


def _drivers_mounted(ctx: Context) -> set[str]:
    drivers = set()
    for pv in ctx.platform.objects("PersistentVolume"):
        driver = (pv.spec.get("csi") or {}).get("driver")
        if driver:
            drivers.add(driver)
    return drivers


def check_kueue_pod_integration(ctx: Context, res: CheckResult) -> None:
    for rel in ctx.platform.releases("kueue"):
        text = F.dig(rel.values, "managerConfig.controllerManagerConfigYaml")
        try:
            config = yaml.safe_load(text) if isinstance(text, str) else {}
        except yaml.YAMLError:
            config = {}
        frameworks = F.dig(config or {}, "integrations.frameworks") or []
        if "pod" in frameworks:
            res.fail(
                f"{rel.ref} enables Kueue's `pod` integration: its webhook (failurePolicy Fail) gates every pod "
                "outside kube-system and kueue-system, so a Kueue outage stops GPU-operator DaemonSets and "
                "monitoring (kueue 0.19.2 charts/kueue/templates/webhook/manifests.yaml)",
                rel.ref,
            )


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
        if other.get("name") == pod.pool:
            continue
        o = pool_nodes(ctx, other)
        if selector and all(o.labels.get(k) == v for k, v in selector.items()):
            res.fail(f"{pod.ref}: its nodeSelector {selector} also matches pool {other['name']}", pod.ref)
    tolerations = spec.get("tolerations") or []
    for t in nodes.taints:
        if not tolerates(tolerations, t):
            res.fail(f"{pod.ref} does not tolerate taint {_taint_str(t)} of pool {pod.pool}", pod.ref)
    req, lim, shm = pod_requests(pod)
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
    if nodes.template is not None:
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
                res.fail(
                    f"{pod.ref} does not tolerate template taint {key}={value} of pool {pod.pool}", pod.ref
                )
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
    check_admission(ctx, res, pod, nodes, req, lim)


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
        groups = cq.spec.get("resourceGroups") or []
        covered = {r for g in groups for r in g.get("coveredResources") or []}
        for name in sorted(req):
            if name not in covered:
                res.fail(
                    f"{pod.ref} requests {name}, which {cq.ref} does not cover: Kueue never admits the job",
                    pod.ref,
                    cq.ref,
                )
        selector = dict(pod.pod_spec.get("nodeSelector") or {})
        fitting = []
        for g in groups:
            for fl in g.get("flavors") or []:
                flavor = ctx.object("ResourceFlavor", None, str(fl.get("name")))
                labels = dict((flavor.spec.get("nodeLabels") if flavor else {}) or {})
                if all(selector.get(k, v) == v for k, v in labels.items()) and all(
                    nodes.labels.get(k) == v for k, v in labels.items()
                ):
                    fitting.append((g, fl))
        if not fitting:
            res.fail(
                f"{pod.ref}: no flavor of {cq.ref} matches the nodes of pool {pod.pool}", pod.ref, cq.ref
            )
        for g, fl in fitting:
            quotas = {r["name"]: quantity(r.get("nominalQuota", 0)) for r in fl.get("resources") or []}
            for name in g.get("coveredResources") or []:
                if name in total and total[name] > quotas.get(name, 0):
                    res.fail(
                        f"{pod.ref} needs {shown(name, total[name])} {name} for {n} pods; flavor {fl.get('name')} "
                        f"of {cq.ref} has a nominal quota of {shown(name, quotas.get(name, 0))}",
                        pod.ref,
                        cq.ref,
                    )
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
    for line in ctx.pod_problems:
        res.fail(line)
    for pod in ctx.pods:
        check_pod_fit(ctx, res, pod)
        res.examined.append(pod.ref)
    return res
