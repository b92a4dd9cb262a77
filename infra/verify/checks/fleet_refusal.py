"""Rule of fleet-dispatch: each worker that must refuse a job refuses it.

MultiKueue copies a job to workers in turn and the first whose Kueue admits it runs it
(kubernetes-sigs/kueue@v0.19.2 site/content/en/docs/concepts/multikueue.md). A worker's Kueue admits on
quota and on its flavors, not on its nodes: it compares the pod's node selectors and required node affinity
only on the keys the flavor's `nodeLabels` carry (pkg/scheduler/flavorassigner/flavorassigner.go
flavorSelector: "Remove affinity constraints with irrelevant keys"). A worker whose flavors carry none of
the keys another worker's job selects admits that job, and its pods stay Pending on nodes it lacks.

What refuses a job on a worker flavor, as Kueue decides (flavorassigner.go checkFlavorForPodSets,
tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS):
- a TAS request on a flavor without `topologyName` (the ClusterQueue covers the job's GPUs), or no TAS
  request on a flavor with one in a ClusterQueue that is not topology-only;
- a selected key the flavor carries with another value;
- on a topology-aware flavor whose lowest level is kubernetes.io/hostname, no node of the flavor's pools
  that can carry the selected labels (TAS matches the pod's node selector against the nodes:
  pkg/cache/scheduler/tas_flavor_snapshot.go). Labels under `trainplane.dev/` are only on the nodes of
  pools that declare them; other keys a node may carry unannounced, so they prove nothing.

The jobs checked: for each GPU flavor of each worker, the least constrained job on it (it selects exactly
the flavor's `nodeLabels` and asks for a topology iff the flavor has one); a job on fewer pools selects
more, so it is refused wherever this one is.
"""

from __future__ import annotations

from collections.abc import Mapping

from components.outputs import NodePoolInfo
from infra.verify.fleet_model import FleetPlan, FleetWorkerPlan
from infra.verify.model import K8sObject
from infra.verify.report import CheckResult

HOSTNAME = "kubernetes.io/hostname"
OURS = "trainplane.dev/"


def _team_flavors(w: FleetWorkerPlan, team: str) -> list[K8sObject]:
    """The worker's ResourceFlavors in the team's ClusterQueue (its LocalQueue's), in the queue's order."""
    t = w.plan.platform_outputs.team(team) if w.plan.platform_outputs else None
    if t is None:
        return []
    ns, lq_name = t.namespace or team, t.local_queue
    lq = next((o for o in w.plan.objects("LocalQueue", ns) if o.name == lq_name), None)
    cq_name = str(lq.spec.get("clusterQueue", "")) if lq is not None else ""
    cq = next((o for o in w.plan.objects("ClusterQueue") if o.name == cq_name), None)
    if cq is None:
        return []
    names = [str(f.get("name")) for g in cq.spec.get("resourceGroups") or [] for f in g.get("flavors") or []]
    by_name = {o.name: o for o in w.plan.objects("ResourceFlavor")}
    return [by_name[n] for n in names if n in by_name]


def _pools(w: FleetWorkerPlan) -> list[NodePoolInfo]:
    return [p for p in w.plan.node_pools if p.gpu]


def _node_may_match(w: FleetWorkerPlan, flavor: K8sObject, selector: Mapping[str, str]) -> bool:
    """Whether a node of the flavor's pools may carry every selected label (module docstring)."""
    own = dict(flavor.spec.get("nodeLabels") or {})
    pools = [dict(p.labels) for p in _pools(w) if all(p.labels.get(k) == v for k, v in own.items())]
    for labels in pools or [own]:
        if all(
            labels.get(k) == v if (k in labels or k.startswith(OURS)) else True for k, v in selector.items()
        ):
            return True
    return False


def _lowest_level(w: FleetWorkerPlan, topology: str) -> str | None:
    topo = next((o for o in w.plan.objects("Topology") if o.name == topology), None)
    levels = [str(lv.get("nodeLabel")) for lv in (topo.spec.get("levels") or [])] if topo else []
    return levels[-1] if levels else None


def admits(
    w: FleetWorkerPlan, flavors: list[K8sObject], selector: Mapping[str, str], tas: bool
) -> str | None:
    """The first of the worker's flavors that admits a job selecting `selector` (with a topology request
    when `tas`), None when every one refuses it."""
    tas_only = bool(flavors) and all(f.spec.get("topologyName") for f in flavors)
    for f in flavors:
        topology = f.spec.get("topologyName")
        if tas and not topology:
            continue
        if not tas and topology and not tas_only:
            continue
        labels = dict(f.spec.get("nodeLabels") or {})
        if any(k in labels and labels[k] != v for k, v in selector.items()):
            continue
        if topology and _lowest_level(w, str(topology)) == HOSTNAME and not _node_may_match(w, f, selector):
            continue
        return f.name
    return None


def check_refusals(result: CheckResult, fleet: FleetPlan) -> None:
    """Rule: each worker that must refuse a job refuses it."""
    for team in (t.name for t in fleet.spec.teams):
        flavors = {w.name: _team_flavors(w, team) for w in fleet.workers}
        for v in fleet.workers:
            for fv in flavors[v.name]:
                selector = dict(fv.spec.get("nodeLabels") or {})
                tas = bool(fv.spec.get("topologyName"))
                for w in fleet.workers:
                    if w.name == v.name or not flavors[w.name]:
                        continue
                    won = admits(w, flavors[w.name], selector, tas)
                    if won is None:
                        continue
                    keys = sorted(
                        dict(next(f for f in flavors[w.name] if f.name == won).spec.get("nodeLabels") or {})
                    )
                    result.fail(
                        f"team {team}: worker {w.name} admits the jobs of worker {v.name}'s flavor {fv.name} on its "
                        f"flavor {won}, which compares only [{', '.join(keys)}] of the jobs' node selectors "
                        f"[{', '.join(f'{k}={x}' for k, x in sorted(selector.items()))}]: their pods would stay "
                        f"Pending on {w.name}; give the flavors a label the other workers' jobs select with "
                        "another value",
                        w.stack,
                    )
