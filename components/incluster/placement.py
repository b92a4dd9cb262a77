"""Where a training job may run, as Kueue sees it: flavors, their order, and topology-aware placement.

The platform's queueing (components/incluster/queueing.py) and the job builder
(components/incluster/job_pod.py) both decide from these functions, on the platform's own pools
and on the pools a job stack reads back (one model, `NodePoolInfo`), so the ResourceFlavors and Topologies
the platform creates and the selectors and annotations a job carries always agree.

- One ResourceFlavor per (GPU kind, capacity kind), whose node labels are the labels every pool of the
  group carries. Kueue (v0.19.2 flavorassigner.go checkFlavorForPodSets) matches a pod against a flavor
  on that flavor's own label keys only, so a pod pinned to one pool of the group still fits the flavor.
- Flavors are tried in the platform's capacity order (CAPACITY_ORDER): reserved capacity first, then
  on-demand, then Dynamic Workload Scheduler capacity, then spot.
- Topology-aware scheduling (Kueue TAS) counts only nodes that exist and are Ready
  (site/content/en/docs/concepts/topology_aware_scheduling.md at v0.19.2, "Capacity calculation"), and
  works with the cluster autoscaler only through the ProvisioningRequest admission check ("ClusterAutoscaler
  support"). A pool that scales from fewer nodes than it may have, without a ProvisioningRequest class, would
  never admit a job that needs new nodes; such a pool keeps its levels but gets no Topology.

Example:
    >>> from components.bundle import NodePoolInfo
    >>> levels = ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
    ...           "cloud.google.com/gce-topology-host", "kubernetes.io/hostname")
    >>> pool = NodePoolInfo(name="h100", gpu="H100", gpus_per_node=8, capacity="reservation", min_nodes=4,
    ...                     max_nodes=4, topology_levels=levels)
    >>> named_levels(tas_levels(pool))["subblock"]
    'cloud.google.com/gce-topology-subblock'
    >>> tas_blocker(NodePoolInfo(name="spot", gpu="H100", gpus_per_node=8, capacity="spot", max_nodes=4,
    ...                          topology_levels=levels))
    'it scales from 0 to 4 nodes without a ProvisioningRequest class, and Kueue TAS places jobs only on nodes that exist'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from contract.rack import CLIQUE_LABEL

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo

HOSTNAME_LABEL = "kubernetes.io/hostname"

# The order in which a team's ClusterQueue lists its flavors, so Kueue falls back from capacity that is
# already paid for (an existing reservation or AWS Capacity Block) to on-demand, then to GKE's Dynamic
# Workload Scheduler (flex-start, then queued provisioning, which may wait for capacity), then to spot.
CAPACITY_ORDER: tuple[str, ...] = (
    "reservation",
    "capacity-block",
    "on-demand",
    "flex-start",
    "queued",
    "spot",
)

# A job's `topology.level` names, broadest first: the pool's levels above kubernetes.io/hostname, in order
# (GKE cloud.google.com/gce-topology-block|subblock|host; EKS topology.k8s.aws/network-node-layer-1..3),
# and "clique": the NVLink clique of a rack-scale pool (contract/rack.py CLIQUE_LABEL), which its backend
# puts just above kubernetes.io/hostname and which is named by its label, not by its position.
LEVEL_NAMES: tuple[str, ...] = ("block", "subblock", "host", "clique")

# Kueue's podset annotations (kueue v0.19.2 apis/kueue/v1beta1/topology_types.go), set on the pod template.
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"


def capacity_rank(capacity: str) -> int:
    return CAPACITY_ORDER.index(capacity) if capacity in CAPACITY_ORDER else len(CAPACITY_ORDER)


def flavor_name(gpu: str, capacity: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"{gpu.lower()}-{capacity}")


def flavor_of(pool: NodePoolInfo) -> str:
    assert pool.gpu, "CPU pools have no flavor"
    return flavor_name(pool.gpu, str(pool.capacity))


def flavor_groups(pools: Iterable[NodePoolInfo]) -> list[tuple[str, list[NodePoolInfo]]]:
    """GPU pools grouped per flavor, in the order a ClusterQueue lists them (capacity order, then GPU)."""
    groups: dict[tuple[int, str, str], list[NodePoolInfo]] = {}
    for p in pools:
        if p.gpu:
            groups.setdefault((capacity_rank(str(p.capacity)), p.gpu, str(p.capacity)), []).append(p)
    return [(flavor_name(gpu, cap), members) for (_, gpu, cap), members in sorted(groups.items())]


def common_labels(pools: Sequence[NodePoolInfo]) -> dict[str, str]:
    """Labels every pool of `pools` carries with the same value."""
    common = dict(pools[0].labels)
    for p in pools[1:]:
        common = {k: v for k, v in common.items() if p.labels.get(k) == v}
    return common


def tas_blocker(pool: NodePoolInfo) -> str | None:
    """Why Kueue cannot place jobs on `pool` by topology (None: it can)."""
    if not pool.topology_levels:
        return "its nodes carry no topology labels"
    if pool.min_nodes < pool.max_nodes and not pool.provisioning_class:
        return (
            f"it scales from {pool.min_nodes} to {pool.max_nodes} nodes without a ProvisioningRequest class, "
            "and Kueue TAS places jobs only on nodes that exist"
        )
    return None


def tas_levels(pool: NodePoolInfo) -> tuple[str, ...]:
    """The pool's topology levels when Kueue can place jobs on it by topology, else ()."""
    return () if tas_blocker(pool) else tuple(pool.topology_levels)


def flavor_levels(members: Sequence[NodePoolInfo]) -> tuple[str, ...]:
    """A flavor's topology: its pools' levels when all of them can use TAS with the same levels."""
    levels = {tas_levels(p) for p in members}
    return levels.pop() if len(levels) == 1 else ()


def levels_of_pool_flavor(pool: NodePoolInfo, all_pools: Iterable[NodePoolInfo]) -> tuple[str, ...]:
    """The topology of the flavor `pool` belongs to, on a platform with `all_pools`."""
    key = flavor_of(pool)
    members = [p for p in all_pools if p.gpu and flavor_of(p) == key]
    return flavor_levels(members or [pool])


def topology_name(levels: Sequence[str]) -> str:
    """The Kueue Topology of `levels`. Levels of a Topology are immutable: other levels, another name."""
    return "topology-" + hashlib.sha256("\n".join(levels).encode()).hexdigest()[:8]


def named_levels(levels: Sequence[str]) -> dict[str, str]:
    """`block`, `subblock`, `host` -> the node label of that level: the levels above hostname (and the
    clique), broadest first; a topology with fewer levels lacks the tightest names. `clique` -> the NVLink
    clique label when the topology has it."""
    above = [lv for lv in levels if lv not in (HOSTNAME_LABEL, CLIQUE_LABEL)]
    named = dict(zip(LEVEL_NAMES[:3], above, strict=False))
    if CLIQUE_LABEL in levels:
        named["clique"] = CLIQUE_LABEL
    return named


def level_above(levels: Sequence[str], label: str) -> str | None:
    """The level just broader than `label` in `levels` (broadest first), None when `label` is the broadest."""
    i = list(levels).index(label)
    return levels[i - 1] if i > 0 else None


def default_level(levels: Sequence[str]) -> str:
    """The tightest level above a single node (a multi-node job packs there first), else the node."""
    above = [lv for lv in levels if lv != HOSTNAME_LABEL]
    return above[-1] if above else HOSTNAME_LABEL
