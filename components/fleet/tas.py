"""Topology-aware jobs on a fleet's manager: a Topology and a topology-aware ResourceFlavor per topology of
the workers, and each team's quota split between them and the manager's plain flavor.

A job on a worker pool with a Kueue Topology carries `kueue.x-k8s.io/podset-{preferred,required}-topology`
(components/incluster/job_pod.py topology_annotations). The manager's Kueue admits it against its own
ClusterQueue first, and refuses a TAS request on a flavor without `topologyName` when the flavor covers the
job's resources, or whose Topology lacks the requested level (kubernetes-sigs/kueue@v0.19.2
pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS,
pkg/cache/scheduler/tas_flavor_snapshot.go HasLevel): the Workload stays Pending on the manager. With a
topology-aware flavor, the manager defers the placement to the worker (podSetTopologyRequest:
"Delay TAS when MultiKueue is used (topology always assigned on worker cluster)"), as in Kueue's own
MultiKueue + TAS example (site/static/examples/multikueue/tas/manager-setup.yaml at v0.19.2: a Topology and
a flavor with `topologyName` on the manager).

A job without a topology request is refused by a topology-aware flavor ("supports only
TopologyAwareScheduling") unless every flavor of its ClusterQueue is one, so the plain flavor stays: jobs
without a request take it, jobs with one a topology-aware flavor of their levels. The team's quota on the
manager is split the same way: what its worker flavors of each topology hold (fleet-queues checks the sum).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.fleet.model import TeamQuota, Worker, worker_team_quota
from components.incluster.kueue_objects import flavors
from components.incluster.placement import topology_name
from components.outputs import PlatformOutputs
from components.spec.fleet import FleetSpec
from contract.quota import gpu_shares

Levels = tuple[str, ...]
PLAIN: Levels = ()
# The one node label of a topology-aware flavor on the manager: Kueue requires one when topologyName is set
# (CRD resourceflavors.kueue.x-k8s.io at v0.19.2: "at least one nodeLabel is required when topology is
# set"). No job selects this key, so it never refuses a job; and nothing runs on the manager (a Workload with
# a MultiKueue AdmissionCheck skips local execution: pkg/controller/jobframework/reconciler.go), so no pod
# gets it as a node selector.
TOPOLOGY_LABEL = "trainplane.dev/fleet-topology"


def worker_levels(platform: PlatformOutputs) -> list[Levels]:
    """The distinct topologies of a worker's GPU flavors (PLAIN for a flavor without one), in its order."""
    return list(dict.fromkeys(f.levels for f in flavors(list(platform.node_pools))))


def fleet_levels(workers: Sequence[Worker]) -> list[Levels]:
    """The workers' topologies, each once, by Topology name (stable whatever the workers' order)."""
    found = {lv for w in workers for lv in worker_levels(w.platform) if lv}
    return sorted(found, key=topology_name)


def flavor_name(spec: FleetSpec, levels: Levels) -> str:
    """The manager's flavor for jobs of `levels`: the fleet's name for the plain one (as before)."""
    return spec.name if not levels else f"{spec.name}-{topology_name(levels)}"


def flavor_spec(levels: Levels) -> dict[str, Any]:
    if not levels:
        return {}
    name = topology_name(levels)
    return {"nodeLabels": {TOPOLOGY_LABEL: name}, "topologyName": name}


def topology_spec(levels: Levels) -> dict[str, Any]:
    """The workers' own Topology (same name, same levels: kueue_objects.topologies), so the manager has
    every level a job may request there."""
    return {"levels": [{"nodeLabel": label} for label in levels]}


def _take(wants: dict[Levels, int], total: int) -> dict[Levels, int]:
    """`total` handed out to the topologies in order, each up to what it wants."""
    out, left = {}, total
    for k, want in wants.items():
        out[k] = min(want, left)
        left -= out[k]
    return out


def worker_quota_by_levels(platform: PlatformOutputs, team: str) -> dict[Levels, TeamQuota]:
    """What the team holds on one worker (model.worker_team_quota), split by the topology of the flavors
    that give it: GPUs and extended resources by the flavors' shares, taken in the worker's flavor order up
    to the worker's total; CPU and memory (held once per namespace) in proportion to the GPUs."""
    total = worker_team_quota(platform, team)
    out = platform.team(team)
    if out is None:
        return {}
    everyone = [(t.name, t.gpu_quota) for t in platform.teams]
    gpus: dict[Levels, int] = {}
    ext: dict[Levels, dict[str, int]] = {}
    for f in flavors(list(platform.node_pools)):
        share = gpu_shares(f.gpus, everyone)[team]
        gpus[f.levels] = gpus.get(f.levels, 0) + share
        per = ext.setdefault(f.levels, {})
        for r in f.extended:
            per[r] = per.get(r, 0) + f.extended_quota(r, share)
    if not gpus:
        return {PLAIN: total}
    got = _take(gpus, total.gpus)
    ext_got = {r: _take({k: ext[k].get(r, 0) for k in gpus}, n) for r, n in total.extended}
    keys = list(gpus)
    heavy = max(keys, key=lambda k: got[k]) if total.gpus else keys[0]
    split: dict[Levels, TeamQuota] = {}
    for k in keys:
        frac = got[k] / total.gpus if total.gpus else 0.0
        split[k] = TeamQuota(
            got[k],
            int(total.cpu * frac),
            int(total.memory_gib * frac),
            tuple(sorted((r, ext_got[r][k]) for r, _ in total.extended)),
        )
    # What rounding left goes to the topology with the most GPUs, so the parts add up to the worker's total.
    cpu = total.cpu - sum(q.cpu for q in split.values())
    mem = total.memory_gib - sum(q.memory_gib for q in split.values())
    h = split[heavy]
    split[heavy] = TeamQuota(h.gpus, h.cpu + cpu, h.memory_gib + mem, h.extended)
    return split


def fleet_quota_by_levels(workers: Sequence[Worker], team: str) -> dict[Levels, TeamQuota]:
    """The team's quota on the manager per flavor: PLAIN first, then the fleet's topologies."""
    out: dict[Levels, TeamQuota] = {PLAIN: TeamQuota(), **{lv: TeamQuota() for lv in fleet_levels(workers)}}
    for w in workers:
        for lv, q in worker_quota_by_levels(w.platform, team).items():
            out[lv] = out[lv] + q
    return out
