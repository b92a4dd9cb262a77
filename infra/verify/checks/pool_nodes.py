"""The nodes of a pool as the plan makes them (labels, taints, machines, EFA devices, scale-from-zero
template): read from the cloud resources that create them (the verifier's `pool_nodes` hook), or from the
platform outputs on an existing cluster. Used by the scheduling check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infra.verify.context import EFA_RESOURCE, Context

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo

GIB = 1024**3
# A taint effect as the clouds' node pool APIs spell it -> as Kubernetes does: EKS NodeGroup taints
# (pulumi-aws 7.51.1 eks NodeGroupTaintArgs.effect: NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE) and GKE
# NodeConfig taints (GKE API reference, NodeTaint.Effect: NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE).
TAINT_EFFECTS = {
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


def is_efa_pool(nodes: PoolNodes) -> bool:
    return nodes.extended.get(EFA_RESOURCE, 0) > 0


def pool_nodes(ctx: Context, pool: NodePoolInfo) -> PoolNodes:
    found = ctx.verifier.pool_nodes(ctx, pool)
    if found is not None:
        return found
    # Existing clusters (or a plan without the cloud resource): the pool as the platform describes it.
    return PoolNodes(
        name=pool.name,
        labels=dict(pool.labels),
        taints=ctx.pool_taints(pool),
        machines=[],
        machine_names=list(pool.machine_types),
        gpus=pool.gpus_per_node,
        extended=dict(pool.extended_resources),
        source="platform outputs",
    )
