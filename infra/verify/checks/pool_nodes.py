"""The nodes of a pool as the plan makes them (labels, taints, machines, EFA devices, scale-from-zero
template): read from the cloud resources that create them, or from the platform outputs on an existing
cluster. Used by the scheduling check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.catalog import catalog
from infra.verify import facts as F
from infra.verify.context import EFA_RESOURCE, Context

GIB = 1024**3
EKS_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


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


def _gke_capacity_marks(inputs: Mapping[str, Any], labels: dict[str, str], taints: list[dict]) -> None:
    """What GKE itself puts on Dynamic Workload Scheduler nodes: flex-start nodes (also under queued
    provisioning) are labelled `cloud.google.com/gke-flex-start=true` (kubernetes/autoscaler
    cloudprovider/gce FlexStartLabel); queued-provisioning nodes are tainted
    `cloud.google.com/gke-queued=true:NoSchedule` (GKE docs, "flex-start with queued provisioning")."""
    if (inputs.get("nodeConfig") or {}).get("flexStart"):
        labels["cloud.google.com/gke-flex-start"] = "true"
    if (inputs.get("queuedProvisioning") or {}).get("enabled"):
        queued = {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}
        if queued not in taints:
            taints.append(queued)


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
        _gke_capacity_marks(np.inputs, labels, taints)
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
