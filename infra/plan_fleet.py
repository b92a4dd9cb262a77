"""`trainplane plan FLEET`: a fleet stack run offline on its platforms' outputs, and its summary: the
workers (cloud, capacity, GPUs) in dispatch order, each team's queue with the workers' summed quota, and
what the fleet costs per month (each platform's own plan cost, infra/plan_cost.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from rich.console import Console

from components.fleet import model
from components.outputs import PlatformOutputs
from components.spec import PlatformSpec
from components.spec.fleet import FleetSpec
from infra.plan import PlanSummary, camel, summarize
from infra.plan_cost import Cost, estimate_cost
from infra.plan_output import HOURS_PER_MONTH


@dataclass
class FleetWorkerLine:
    order: int
    name: str
    stack: str
    cloud: str
    capacity: str  # the worker's best GPU capacity kind (what `dispatch.order: capacity` ranks by)
    gpus_max: int
    min_hourly: float | None = None
    max_hourly: float | None = None


@dataclass
class FleetTeamLine:
    name: str
    local_queue: str
    gpus: int
    cpu: int
    memory_gib: int
    extended: dict[str, int] = field(default_factory=dict)
    # worker name -> the team's GPUs there
    per_worker: dict[str, int] = field(default_factory=dict)


@dataclass
class FleetSummary:
    plan: PlanSummary
    fleet: str
    manager: str
    dispatcher: str
    order: str
    workers: list[FleetWorkerLine]
    teams: list[FleetTeamLine]
    manager_cost: Cost | None
    notes: list[str] = field(default_factory=list)

    def hourly(self, scale: str) -> float | None:
        """The cost per hour at `min` or `max` scale of the manager and the workers that have a price (an
        existing cluster or a platform given with --ref has none: unpriced())."""
        parts = [getattr(w, f"{scale}_hourly") for w in self.workers]
        if self.manager_cost is not None:
            parts.append(getattr(self.manager_cost, f"{scale}_hourly"))
        priced = [p for p in parts if p is not None]
        return round(sum(priced), 2) if priced else None

    def unpriced(self) -> list[str]:
        names = [w.name for w in self.workers if w.min_hourly is None or w.max_hourly is None]
        if self.manager_cost is None or self.manager_cost.min_hourly is None:
            names.insert(0, f"manager {self.manager}")
        return names

    def as_json(self) -> dict[str, Any]:
        out = self.plan.as_json()
        out["fleet"] = {
            "name": self.fleet,
            "manager": self.manager,
            "dispatcher": self.dispatcher,
            "order": self.order,
            # camelCase keys, like every command's JSON (infra/plan.py camel)
            "workers": [camel(asdict(w)) for w in self.workers],
            "teams": [
                {**camel(asdict(t)), "extended": t.extended, "perWorker": t.per_worker} for t in self.teams
            ],
            "monthly": {s: _monthly(self.hourly(s)) for s in ("min", "max")},
            "unpriced": self.unpriced(),
            "notes": self.notes,
        }
        return out


def _monthly(hourly: float | None) -> float | None:
    return None if hourly is None else round(hourly * HOURS_PER_MONTH, 2)


def summarize_fleet(
    result: Any,
    spec: FleetSpec,
    platforms: dict[str, dict[str, Any]],
    specs: dict[str, PlatformSpec | None],
    today: date | None = None,
) -> FleetSummary:
    """The fleet's summary from its offline run and its platforms' outputs (by stack name) and specs (by
    stack name; None where only outputs are known: --ref). `today`: the plan's day, which prices each
    platform's control plane (standard or extended support) and dates its prices, as a platform's plan does."""
    manager_out = platforms[spec.manager.platform_stack]
    manager_spec = specs.get(spec.manager.platform_stack)
    workers = [
        model.Worker(w.name, w.platform_stack, PlatformOutputs.model_validate(platforms[w.platform_stack]), i)
        for i, w in enumerate(spec.workers)
    ]
    manager = PlatformOutputs.model_validate(manager_out)
    ordered = model.dispatch_order(spec, workers, manager.cloud)
    lines = []
    for i, w in enumerate(ordered):
        cost = estimate_cost(s, today) if (s := specs.get(w.stack)) is not None else None
        gpus = sum(p.gpus_per_node * p.max_nodes for p in w.platform.node_pools if p.gpu)
        lines.append(
            FleetWorkerLine(
                i + 1,
                w.name,
                w.stack,
                w.cloud,
                _best_capacity(w.platform),
                gpus,
                cost.min_hourly if cost else None,
                cost.max_hourly if cost else None,
            )
        )
    teams: list[FleetTeamLine] = []
    for t in spec.teams:
        q = model.fleet_team_quota(workers, t.name)
        teams.append(
            FleetTeamLine(
                t.name,
                model.local_queue_name(t.name),
                q.gpus,
                q.cpu,
                q.memory_gib,
                dict(q.extended),
                {w.name: model.worker_team_quota(w.platform, t.name).gpus for w in ordered},
            )
        )
    # A worker on the ambient kubeconfig: the fleet stack reaches it with the deployer's kubeconfig context,
    # and the manager at its cluster.apiServer (the fleet refuses a worker with neither document nor URL).
    notes = [
        f"worker {w.name}: {w.platform_stack} is on the ambient kubeconfig (context {ctx}): deploy the fleet "
        f"where that context reaches it; the manager reaches it at {platforms[w.platform_stack].get('apiServer')} "
        "(its cluster.apiServer)"
        for w in spec.workers
        if (ctx := model.ambient_context(str(platforms[w.platform_stack].get("kubeconfig") or "")))
        is not None
    ]
    if manager_spec is not None and manager_spec.queueing.fleet_dispatcher != spec.dispatch.dispatcher:
        notes.append(
            f"dispatch.dispatcher {spec.dispatch.dispatcher} differs from the manager's queueing.fleetDispatcher "
            f"{manager_spec.queueing.fleet_dispatcher}: Kueue dispatches with the manager's (its Configuration "
            "multiKueue.dispatcherName); set both alike"
        )
    gpus_max = sum(w.gpus_max for w in lines)
    plan = summarize(result, "fleet", (0, gpus_max), Cost(None, None, None, None, 0.0))
    manager_cost = estimate_cost(manager_spec, today) if manager_spec is not None else None
    return FleetSummary(
        plan,
        spec.name,
        spec.manager.platform_stack,
        spec.dispatch.dispatcher,
        spec.dispatch.order,
        lines,
        teams,
        manager_cost,
        notes,
    )


def _best_capacity(platform: PlatformOutputs) -> str:
    gpu = [p.capacity for p in platform.node_pools if p.gpu]
    return min(gpu, key=lambda c: model.CAPACITY_RANK.get(c, 9)) if gpu else "-"


def print_fleet(summary: FleetSummary, console: Console) -> None:

    from infra.console import heading, table
    from infra.plan_output import duration, print_resources

    plan = summary.plan
    heading(console, f"[bold]trainplane plan[/] {plan.stack} (fleet {summary.fleet})")
    print_resources(plan, console)

    workers = table(
        f"Workers in dispatch order ({summary.dispatcher} dispatcher, order: {summary.order})",
        "#",
        "worker",
        "stack",
        "cloud",
        "best capacity",
        "GPUs (max)",
        "per month (min..max)",
        right=("#", "GPUs (max)", "per month (min..max)"),
    )
    for w in summary.workers:
        workers.add_row(
            str(w.order),
            w.name,
            w.stack,
            w.cloud,
            w.capacity,
            str(w.gpus_max),
            _month_range(w.min_hourly, w.max_hourly),
        )
    console.print(workers)
    teams = table(
        "Team queues on the manager (sum of the workers' quotas)",
        "team",
        "LocalQueue",
        "GPUs",
        "cpu",
        "memory",
        "GPUs per worker",
        "other resources",
        right=("GPUs", "cpu", "memory"),
    )
    for tl in summary.teams:
        teams.add_row(
            tl.name,
            tl.local_queue,
            str(tl.gpus),
            str(tl.cpu),
            f"{tl.memory_gib}Gi",
            ", ".join(f"{k} {v}" for k, v in tl.per_worker.items()),
            ", ".join(f"{k} {v}" for k, v in tl.extended.items()) or "-",
        )
    console.print(teams)
    mc = summary.manager_cost
    manager = _month_range(mc.min_hourly, mc.max_hourly) if mc is not None else "n/a"
    unpriced = summary.unpriced()
    lines = [
        f"manager {summary.manager} per month: {manager}",
        f"fleet per month ({HOURS_PER_MONTH} h): {_month_range(summary.hourly('min'), summary.hourly('max'))} "
        "at the minimum..maximum scale (each platform's own plan cost, infra/plan_cost.py)",
    ]
    if unpriced:
        lines.append(f"not priced: {', '.join(unpriced)} (an existing cluster, or outputs given with --ref)")
    lines += [f"note: {n}" for n in summary.notes]
    for line in lines:
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)

    title = f"Critical path: {duration(plan.critical_seconds)} to create"
    path = table(title, "#", "resource", "type", "~seconds", right=("#", "~seconds"))
    for i, step in enumerate(plan.critical_path, 1):
        path.add_row(str(i), step.name, f"[dim]{step.type}[/]", f"{step.seconds:.0f}")
    console.print(path)


def _month_range(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "n/a"
    return f"${lo * HOURS_PER_MONTH:,.0f}..${hi * HOURS_PER_MONTH:,.0f}"
