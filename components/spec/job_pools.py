"""Checks of a job's pools taken together (`nodePools`) and of its `topology` key, against its platform.

A job may list several pools in its order of preference; Kueue then places it on the first of their
ResourceFlavors with room, in the order the team's ClusterQueue lists the flavors (the platform's capacity
order, components/incluster/placement.py). The pod is one template for all of them, so the pools must
agree on what shapes the pod: GPU kind and count, fabric, extended resources, fabric environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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
    return (repr(fabric), sorted(pool.extended_resources.items()), sorted(pool.pod_env.items()))


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
                f"{root}.nodePools: pools {first.name} and {p.name} differ in their fabric, extended resources "
                "or fabric environment; one pod template cannot fit both"
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
    return problems


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
