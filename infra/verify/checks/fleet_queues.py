"""fleet-queues: the fleet's teams are the same queues everywhere, and the manager's quota is the sum.

MultiKueue creates the job's Workload on a worker in the namespace, and for the LocalQueue, of the
manager's (kueue@v0.19.2 pkg/controller/admissionchecks/multikueue/workload.go cloneForCreate: the remote
Workload copies the local one's metadata and spec, `spec.queueName` included), so every worker must have the team's namespace and a
LocalQueue of the same name; the manager admits against its own ClusterQueue first, so its quota must be
what the workers can run together: the sum over the workers of what the team can hold at once there.

On one worker that is (`held`): GPUs, its ClusterQueue's nominal quota summed over the flavors, capped by
its namespace ResourceQuota (the pods cannot start past `requests.nvidia.com/gpu`, whatever Kueue
admits); CPU and memory, the ResourceQuota's `requests.*` (the ClusterQueue repeats them on every flavor,
the namespace holds them once); other resources (fabric devices), their flavor sum capped at what those
GPUs need at the flavors' highest ratio to GPUs.

A job on a worker flavor with a Topology carries a TAS podset annotation, and the manager admits it first:
Kueue refuses it on a manager flavor without `topologyName`, or whose Topology lacks the requested level
(kueue@v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS,
pkg/cache/scheduler/tas_flavor_snapshot.go HasLevel), and the Workload stays Pending. So for each worker
flavor with a Topology, the team's ClusterQueue on the manager must list a topology-aware flavor whose
Topology has every level of the worker's (a job may request any of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from infra.verify.checks.admission_webhooks import quantity
from infra.verify.context import Context
from infra.verify.fleet_model import MANAGER, FleetPlan
from infra.verify.model import K8sObject, Plan
from infra.verify.report import CheckResult

NAME = "fleet-queues"


def nominal(cq: K8sObject | Mapping[str, Any] | None) -> dict[str, Decimal]:
    """A ClusterQueue's nominal quota per resource, summed over its flavors."""
    if cq is None:
        return {}
    spec = cq.spec if isinstance(cq, K8sObject) else (cq.get("spec") or {})
    out: dict[str, Decimal] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                out[r["name"]] = out.get(r["name"], Decimal(0)) + quantity(r.get("nominalQuota", 0))
    return out


GPU = "nvidia.com/gpu"


def _spec(o: K8sObject | Mapping[str, Any] | None) -> Mapping[str, Any]:
    if o is None:
        return {}
    return o.spec if isinstance(o, K8sObject) else (o.get("spec") or {})


def held(
    cq: K8sObject | Mapping[str, Any] | None, rq: K8sObject | Mapping[str, Any] | None
) -> dict[str, Decimal]:
    """What a team can hold at once on a worker, from its ClusterQueue and namespace ResourceQuota."""
    sums = nominal(cq)
    hard = {
        k.removeprefix("requests."): quantity(v)
        for k, v in (_spec(rq).get("hard") or {}).items()
        if k.startswith("requests.")
    }
    out = dict(sums)
    for r in ("cpu", "memory", GPU):
        if r in hard:
            out[r] = min(sums[r], hard[r]) if r == GPU and r in sums else hard[r]
    gpus = out.get(GPU, Decimal(0))
    for r in set(sums) - {"cpu", "memory", GPU}:
        ratios = [
            quantity(res[r]) / quantity(res[GPU])
            for f in _flavors(cq)
            if (res := {x["name"]: x.get("nominalQuota", 0) for x in f.get("resources") or []}).get(GPU)
            and quantity(res[GPU]) > 0
            and r in res
        ]
        if ratios:
            out[r] = min(sums[r], (gpus * max(ratios)).to_integral_value(rounding="ROUND_CEILING"))
    return out


def _flavors(cq: K8sObject | Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [f for g in _spec(cq).get("resourceGroups") or [] for f in g.get("flavors") or []]


def team_queue(plan: Plan, team: str) -> tuple[str, str] | None:
    """(namespace, LocalQueue) of a team on a platform, from its outputs."""
    t = plan.platform_outputs.team(team) if plan.platform_outputs else None
    if t is None:
        return None
    return t.namespace or team, t.local_queue


def _obj(plan: Plan, kind: str, name: str, namespace: str | None = None) -> K8sObject | None:
    return next((o for o in plan.objects(kind, namespace) if o.name == name), None)


def _fmt(v: Decimal) -> str:
    return format(v.normalize(), "f")


def run(ctx: Context) -> CheckResult:
    result = CheckResult(NAME)
    fleet: FleetPlan = ctx.fleet
    for team in (t.name for t in fleet.spec.teams):
        queues: dict[str, tuple[str, str] | None] = {w.name: team_queue(w.plan, team) for w in fleet.workers}
        known = [q for q in queues.values() if q is not None]
        for w in fleet.workers:
            if queues[w.name] is None:
                result.fail(
                    f"team {team} is not a team of worker {w.name} ({w.stack}); add it there", w.stack
                )
        if not known:
            continue
        ns, lq = known[0]
        for w in fleet.workers:
            q = queues[w.name]
            if q is not None and q != (ns, lq):
                result.fail(
                    f"team {team}: worker {w.name} queues it as {q[0]}/{q[1]}, worker {fleet.workers[0].name} as "
                    f"{ns}/{lq}; MultiKueue keeps the manager's namespace and LocalQueue name on every worker",
                    w.stack,
                )
            elif q is not None and _obj(w.plan, "LocalQueue", lq, ns) is None:
                result.fail(f"team {team}: worker {w.name} has no LocalQueue {ns}/{lq}", w.stack)
        if fleet.find(MANAGER, "Namespace", ns) is None:
            result.fail(f"team {team}: the manager has no Namespace {ns}", f"Namespace {ns}")
        manager_lq = fleet.find(MANAGER, "LocalQueue", lq, ns)
        result.examined.append(f"team {team}")
        if manager_lq is None:
            result.fail(
                f"team {team}: the manager has no LocalQueue {ns}/{lq}, the name the workers queue it under",
                f"LocalQueue {ns}/{lq}",
            )
            continue
        _check_quota(result, fleet, team, ns, lq, str(manager_lq.spec.get("clusterQueue", "")))
    return result


def _check_quota(result: CheckResult, fleet: FleetPlan, team: str, ns: str, lq: str, cq_name: str) -> None:
    cq = fleet.find(MANAGER, "ClusterQueue", cq_name)
    if cq is None:
        result.fail(
            f"team {team}: LocalQueue {ns}/{lq} on the manager names ClusterQueue {cq_name!r}, which it lacks"
        )
        return
    per_worker: dict[str, dict[str, Decimal]] = {}
    for w in fleet.workers:
        wlq = _obj(w.plan, "LocalQueue", lq, ns)
        if wlq is not None:
            rqs = w.plan.objects("ResourceQuota", ns)
            rq = next((o for o in rqs if "requests.nvidia.com/gpu" in (o.spec.get("hard") or {})), None)
            per_worker[w.name] = held(_obj(w.plan, "ClusterQueue", str(wlq.spec.get("clusterQueue", ""))), rq)
    _check_topology(result, fleet, team, ns, lq, cq)
    have = nominal(cq)
    for resource in sorted({r for q in per_worker.values() for r in q} | set(have)):
        want = sum((q.get(resource, Decimal(0)) for q in per_worker.values()), Decimal(0))
        if have.get(resource, Decimal(0)) != want:
            parts = ", ".join(f"{n} {_fmt(q.get(resource, Decimal(0)))}" for n, q in per_worker.items())
            result.fail(
                f"ClusterQueue {cq_name} on the manager: {resource} quota {_fmt(have.get(resource, Decimal(0)))} "
                f"is not {_fmt(want)}, the sum of team {team}'s quota on the workers ({parts})",
                cq.ref,
            )


def _levels(plan_objects: list[K8sObject], name: Any) -> list[str] | None:
    topo = next((t for t in plan_objects if t.name == str(name)), None)
    if topo is None:
        return None
    return [str(lv.get("nodeLabel")) for lv in topo.spec.get("levels") or []]


def _check_topology(
    result: CheckResult, fleet: FleetPlan, team: str, ns: str, lq: str, cq: K8sObject
) -> None:
    """Rule: a manager flavor that cannot admit a worker's TAS jobs fails (module docstring)."""
    manager_levels = []
    for f in _flavors(cq):
        rf = fleet.find(MANAGER, "ResourceFlavor", str(f.get("name")))
        if rf is not None and rf.spec.get("topologyName"):
            levels = _levels(fleet.on(MANAGER, "Topology"), rf.spec["topologyName"])
            manager_levels.append(set(levels or []))
    for w in fleet.workers:
        wlq = _obj(w.plan, "LocalQueue", lq, ns)
        wcq = _obj(w.plan, "ClusterQueue", str(wlq.spec.get("clusterQueue", ""))) if wlq else None
        for f in _flavors(wcq):
            rf = _obj(w.plan, "ResourceFlavor", str(f.get("name")))
            if rf is None or not rf.spec.get("topologyName"):
                continue
            levels = _levels(w.plan.objects("Topology"), rf.spec["topologyName"]) or []
            if not any(set(levels) <= have for have in manager_levels):
                result.fail(
                    f"ClusterQueue {cq.name} on the manager has no topology-aware flavor with the levels "
                    f"[{', '.join(levels)}] of worker {w.name}'s flavor {rf.name}: the manager's Kueue refuses the "
                    "jobs that carry a topology request for it (tas_flavorassigner.go), and they stay Pending",
                    cq.ref,
                )
