"""What `trainplane verify` asks the AWS verifier about a plan: its EKS cluster and version, the nodes a
managed node group gives a pool, the DaemonSets of the EKS add-ons it turns on, and the EKS findings
about GPU pools (node repair, cluster-autoscaler's GPU label, one EFA layout a pool, spot notices).

Spot notices: EC2 gives a spot instance two minutes between its interruption notice and the reclaim. The
trainer writes its preemption checkpoint on SIGTERM; only a handler on the node (aws-node-termination-
handler in IMDS mode, components/aws/spot_notice.py) turns the notice into a drain that sends it within
seconds. The handler is modelled as a chart DaemonSet of scope "spot" (facts.yaml): a spot GPU pool needs
one, and the toleration check of the DaemonSets makes sure it reaches the pool's tainted nodes.

Imported by the verifier's hook methods (verifier.py) only when verify asks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from components.catalog import catalog
from infra.verify import facts as F
from infra.verify.charts import DaemonSetModel
from infra.verify.checks.pool_nodes import TAINT_EFFECTS, PoolNodes, is_efa_pool
from infra.verify.context import EFA_RESOURCE

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo
    from infra.verify.charts import ChartModel
    from infra.verify.context import Context
    from infra.verify.model import Plan, PlanResource
    from infra.verify.report import CheckResult
    from infra.verify.verifier import GpuPools

EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_ADDON = "aws:eks/addon:Addon"


def plan_cluster(resources: Sequence[PlanResource]) -> PlanResource | None:
    return next((r for r in resources if r.type == EKS_CLUSTER), None)


def kubernetes_version(cluster: PlanResource) -> str | None:
    return str(cluster.inputs["version"]) if cluster.inputs.get("version") else None


def eks_addons(plan: Plan) -> dict[str, PlanResource]:
    """The EKS add-ons the plan installs, by add-on name."""
    return {str(r.inputs.get("addonName")): r for r in plan.of_type(EKS_ADDON)}


# ---- pool nodes -------------------------------------------------------------------------------------


def pool_nodes(ctx: Context, pool: NodePoolInfo) -> PoolNodes | None:
    plan = ctx.platform
    by_urn = plan.by_urn()
    for ng in plan.of_type("aws:eks/nodeGroup:NodeGroup"):
        labels = dict(ng.inputs.get("labels") or {})
        if labels.get("trainplane.dev/pool") != pool.name and not str(
            ng.inputs.get("nodeGroupName", "")
        ).endswith(f"-{pool.name}"):
            continue
        labels.setdefault("eks.amazonaws.com/capacityType", str(ng.inputs.get("capacityType", "ON_DEMAND")))
        labels.setdefault("eks.amazonaws.com/nodegroup", str(ng.inputs.get("nodeGroupName", ng.name)))
        taints = [
            {
                "key": t["key"],
                "value": t.get("value", ""),
                "effect": TAINT_EFFECTS.get(t["effect"], t["effect"]),
            }
            for t in ng.inputs.get("taints") or []
        ]
        types = list(ng.inputs.get("instanceTypes") or [])
        efa = 0
        for dep in ng.deps:
            lt = by_urn.get(dep)
            if lt is not None and lt.type == "aws:ec2/launchTemplate:LaunchTemplate":
                # A Capacity Block pool names its instance type in the template, not the group.
                if not types and lt.inputs.get("instanceType"):
                    types = [str(lt.inputs["instanceType"])]
                efa = sum(
                    1
                    for n in lt.inputs.get("networkInterfaces") or []
                    if n.get("interfaceType") in ("efa", "efa-only")
                )
        shapes = [catalog().machine("aws", t) for t in types]
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
            name=pool.name,
            labels=labels,
            taints=taints,
            machines=shapes,
            machine_names=types,
            gpus=min((s.gpus for s in shapes if s), default=pool.gpus_per_node),
            extended={EFA_RESOURCE: efa} if efa else {},
            template=template if tagged else None,
            node_repair=bool((ng.inputs.get("nodeRepairConfig") or {}).get("enabled")),
            source=f"node group {ng.inputs.get('nodeGroupName', ng.name)}",
        )
    return None


# ---- EKS add-ons ------------------------------------------------------------------------------------


def _addon_config(resource_inputs: Mapping[str, Any]) -> dict[str, Any]:
    raw = resource_inputs.get("configurationValues")
    if not raw:
        return {}
    try:
        doc = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def addon_objects(plan: Plan, out: ChartModel) -> None:
    """DaemonSets and CSI drivers of the EKS add-ons the plan installs."""
    cloud = F.cloud("aws")
    drivers = {k: v for k, v in cloud["csiDrivers"].items() if k not in ("source", "asOf")}
    for name, addon in eks_addons(plan).items():
        ref = f"EKS add-on {name}"
        ds = cloud["addonDaemonSets"].get(name)
        if ds:
            out.daemon_sets.append(
                DaemonSetModel(
                    ref,
                    ds["daemonSet"],
                    name,
                    tuple(ds["tolerations"]),
                    "storage" if ds.get("csiDriver") else "gpu",
                    ds.get("csiDriver"),
                )
            )
        cds = cloud.get("addonConfigDaemonSets", {}).get(name)
        config = _addon_config(addon.inputs)
        if cds and F.dig(config, cds.get("enabledPath", ""), True) is not False:
            tol = F.dig(config, cds["tolerationsPath"], cds["default"])
            out.daemon_sets.append(
                DaemonSetModel(ref, cds["daemonSet"], f"{name} DCGM host engine", tuple(tol or ()), "gpu")
            )
        for driver, how in drivers.items():
            if how.get("addon") == name:
                out.csi_drivers[driver] = ref


# ---- GPU pools ---------------------------------------------------------------------------------------


def check_spot_notice(ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
    handlers = [d for d in ctx.charts.daemon_sets if d.scope == "spot"]
    for pool, nodes in gpu_pools:
        if pool.capacity == "spot" and not handlers:
            res.fail(
                f"GPU pool {pool.name} runs on spot but nothing turns EC2's two-minute interruption "
                "notice into a SIGTERM for its pods (no aws-node-termination-handler DaemonSet): a reclaim "
                "kills the trainer without its preemption checkpoint",
                nodes.source,
            )
        elif pool.capacity == "spot":
            res.examined.append(f"spot notice handler for {pool.name}")


# ---- (GPU pools) --------------------------------------------------------------------------------------


def check_gpu_pools(ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
    """EKS: node repair has its monitoring agent, the autoscaler knows GPU nodes, one EFA layout a pool."""
    plan = ctx.platform
    repair = F.cloud("aws")["nodeRepair"]
    for pool, nodes in gpu_pools:
        if nodes.node_repair and repair["addon"] not in eks_addons(plan):
            res.fail(
                f"node repair is on for GPU pool {pool.name} but EKS add-on {repair['addon']} is not "
                "installed: GPU faults (AcceleratedHardwareReady) are never detected",
                nodes.source,
            )
    check_spot_notice(ctx, res, gpu_pools)
    if plan.releases("cluster-autoscaler"):
        label = F.cloud("aws")["autoscaler"]["gpuLabel"]
        for pool, nodes in gpu_pools:
            if label not in nodes.labels:
                res.fail(
                    f"GPU pool {pool.name} nodes lack label {label}: cluster-autoscaler does not treat "
                    "them as GPU nodes while the device plugin starts and may add more",
                    nodes.source,
                )
            if nodes.template is not None and label not in nodes.template.get("label", {}):
                res.fail(
                    f"GPU pool {pool.name}: the scale-from-zero template has no label {label}",
                    nodes.source,
                )
    for pool, nodes in gpu_pools:
        efa_counts = {s.name: s.efa_interfaces for s in nodes.machines if s is not None}
        if is_efa_pool(nodes) and len(set(efa_counts.values())) > 1:
            res.fail(
                f"EFA pool {pool.name} mixes instance types with different EFA layouts "
                f"({', '.join(f'{k} {v}' for k, v in sorted(efa_counts.items()))}); its launch template "
                f"attaches {nodes.extended[EFA_RESOURCE]}: split the pool per layout",
                nodes.source,
            )
