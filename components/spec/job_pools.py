"""Checks of a job's pools taken together (`nodePools`) and of its `topology` key, against its platform.

A job may list several pools in its order of preference; Kueue then places it on the first of their
ResourceFlavors with room, in the order the team's ClusterQueue lists the flavors (the platform's capacity
order, components/incluster/placement.py). The pod is one template for all of them, so the pools must
agree on what shapes the pod: GPU kind and count, fabric, extended resources, fabric environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from components.incluster.compute_domain import rack_level
from components.incluster.placement import (
    CAPACITY_ORDER,
    capacity_rank,
    levels_of_pool_flavor,
    named_levels,
    tas_blocker,
)

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo, PlatformOutputs
    from components.spec.job import JobSpec


def _shape(pool: NodePoolInfo) -> tuple[object, ...]:
    fabric = pool.fabric.exports() if pool.fabric is not None else None
    rack = pool.rack.exports() if pool.rack is not None else None
    return (repr(fabric), sorted(pool.extended_resources.items()), sorted(pool.pod_env.items()), repr(rack))


def check_pools(
    job: JobSpec, platform: PlatformOutputs, pools: Sequence[NodePoolInfo], root: str
) -> list[str]:
    problems: list[str] = []
    first = pools[0]
    for p in pools[1:]:
        if (p.gpu, p.gpus_per_node) != (first.gpu, first.gpus_per_node):
            problems.append(
                f"{root}.nodePools: pools {first.name} ({first.gpu} x{first.gpus_per_node}) and {p.name} "
                f"({p.gpu} x{p.gpus_per_node}) differ; a job's pools must have the same GPU kind and count"
            )
        elif _shape(p) != _shape(first):
            problems.append(
                f"{root}.nodePools: pools {first.name} and {p.name} differ in their fabric, extended resources, "
                "fabric environment or NVLink rack; one pod template cannot fit both"
            )
    ranks = [capacity_rank(str(p.capacity)) for p in pools]
    if ranks != sorted(ranks):
        ordered = [p.name for p in sorted(pools, key=lambda p: capacity_rank(str(p.capacity)))]
        problems.append(
            f"{root}.nodePools: [{', '.join(job.pools)}] is not in the platform's fallback order "
            f"({', '.join(CAPACITY_ORDER)}), the order Kueue tries a team's flavors in; "
            f"list them as [{', '.join(ordered)}]"
        )
    if job.topology is not None:
        problems += _check_topology(job, platform, pools, root)
    if not problems:
        problems += _check_rack(job, platform, pools, root)
    return problems


def _check_rack(
    job: JobSpec, platform: PlatformOutputs, pools: Sequence[NodePoolInfo], root: str
) -> list[str]:
    """A job on a rack-scale pool stays within one NVLink clique, or spans cliques at a level above it
    (components/incluster/compute_domain.py); a level it asks for must hold all of its nodes."""
    rack = pools[0].rack
    if rack is None:
        return []
    nodes = job.nodes.max
    level = job.topology.level if job.topology is not None else None
    if level == "clique" and nodes > rack.nodes:
        return [
            f"{root}.topology.level: clique holds {rack.nodes} nodes (one NVLink rack of pool {pools[0].name}); "
            f"the job asks for up to {nodes}: pick the level above it or fewer nodes"
        ]
    if level is None and nodes > rack.nodes:
        levels = levels_of_pool_flavor(pools[0], platform.node_pools)
        if rack_level(levels, rack, nodes) is None:
            return [
                f"{root}.nodes.max: {nodes} nodes do not fit one NVLink rack of pool {pools[0].name} "
                f"({rack.nodes} nodes), and its topology has no level above the clique to span racks at"
            ]
    return []


def _check_topology(
    job: JobSpec, platform: PlatformOutputs, pools: Sequence[NodePoolInfo], root: str
) -> list[str]:
    assert job.topology is not None
    labels = set()
    for p in pools:
        levels = levels_of_pool_flavor(p, platform.node_pools)
        if not levels:
            why = tas_blocker(p) or "its capacity kind shares a flavor with pools of other topologies"
            return [
                f"{root}.topology: pool {p.name} has no topology Kueue can place by ({why}); remove the key"
            ]
        named = named_levels(levels)
        if job.topology.level is not None and job.topology.level not in named:
            return [
                f"{root}.topology.level: {job.topology.level!r} is not a level of pool {p.name} "
                f"(it has: {', '.join(named) or 'none above the node'})"
            ]
        labels.add(levels)
    if len(labels) > 1:
        return [
            f"{root}.topology: the pools {', '.join(job.pools)} have different topologies; list pools of one"
        ]
    return []
