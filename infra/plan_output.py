"""Printing a plan summary for people: the resource tree, counts, pools and cost, each team's idle policy,
the critical path.

Tables come from infra.console, so a pipe or a log gets every name and price whole (never `…`).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from contract.idle import EVENT_IDLE, IDLE_ALERT, IDLE_EXEMPT_LABEL
from infra.console import heading, table
from infra.plan import IdlePolicy, PlanSummary


def _tree_node(parent: Tree, node: dict[str, Any]) -> None:
    style = "" if node["custom"] else "bold cyan"
    label = (
        f"[{style}]{node['name']}[/] [dim]{node['type']}[/]"
        if style
        else f"{node['name']} [dim]{node['type']}[/]"
    )
    branch = parent.add(label)
    for child in node["children"]:
        _tree_node(branch, child)


def money(v: float | None) -> str:
    return "n/a" if v is None else f"${v:,.2f}/h"


# Hours in a month as cloud price calculators count them (AWS Pricing Calculator: 730 hours a month).
HOURS_PER_MONTH = 730


def monthly_lines(cost: Any) -> list[str]:
    """The cost per month at both scales, and what reserved capacity costs while no pod uses it: its nodes
    above the pool's minimum are paid for and idle at the minimum scale (all of them when nothing runs)."""
    if cost.min_hourly is None or cost.max_hourly is None:
        return []
    lines = [
        f"per month ({HOURS_PER_MONTH} h): ${cost.min_hourly * HOURS_PER_MONTH:,.2f} at the minimum scale, "
        f"${cost.max_hourly * HOURS_PER_MONTH:,.2f} at the maximum"
    ]
    for p in cost.pools:
        if p.committed and p.hourly is not None:
            lines.append(
                f"reserved {p.pool}: {p.max_nodes} nodes x ${p.hourly:,.2f}/h = "
                f"${p.max_nodes * p.hourly * HOURS_PER_MONTH:,.2f}/month, used or not; while idle it costs "
                f"${p.max_nodes * p.hourly:,.2f}/h, charged to the pool's owner team (else unassigned)"
            )
    return lines


def idle_lines(policies: list[IdlePolicy]) -> list[str]:
    """One line per team: what happens to its jobs whose GPUs sit idle (components/incluster/idle_rules.py
    alerts, the GPU health controller acts)."""
    out = []
    for p in policies:
        if p.action is None:
            out.append(f"idle {p.team}: no idle policy (only the per-pod GpuIdleButAllocated alert)")
            continue
        then = (
            ", and is requeued (it checkpoints on SIGTERM and waits in its queue again)"
            if p.action == "requeue"
            else " (action alert: nothing else)"
        )
        exempt = ", ".join(f"{k}={v}" for k, v in {IDLE_EXEMPT_LABEL: "true", **p.exempt_labels}.items())
        out.append(
            f"idle {p.team}: a job whose GPUs average under {p.gpu_util_below:g}% for {p.window} raises "
            f"{IDLE_ALERT} and a {EVENT_IDLE} Event{then}; exempt: {exempt}"
        )
    return out


def duration(seconds: float) -> str:
    """A creation time in words: seconds below two minutes (a job's few objects are not "0 min")."""
    if seconds < 120:
        return f"about {seconds:.0f} s"
    return f"about {seconds / 60:.0f} min"


def print_price_age(cost: Any, console: Console) -> None:
    """How old the catalog prices the plan used are, and a warning when they are past their age."""
    if cost.prices_as_of and cost.price_age_months is not None:
        console.print(
            f"  prices: catalog list prices as of {cost.prices_as_of}, {cost.price_age_months} months old",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for w in cost.warnings:
        console.print(f"  [yellow]warning:[/] {w}", highlight=False, soft_wrap=True)


def print_resources(summary: PlanSummary, console: Console) -> None:
    """The resource tree and the count per type of a planned stack (platform, job or fleet)."""
    tree = Tree(f"[bold]{summary.stack}[/] [dim]{summary.resource_count} resources[/]")
    for node in summary.tree:
        _tree_node(tree, node)
    console.print(tree)

    counts = table("Resources by type", "type", "count", right=("count",))
    for t, n in summary.counts.items():
        counts.add_row(t, str(n))
    console.print(counts)


def print_plan(summary: PlanSummary, console: Console) -> None:
    heading(console, f"[bold]trainplane plan[/] {summary.stack} ({summary.cloud})")
    print_resources(summary, console)

    cost = summary.cost
    cols = (
        "pool",
        "machine",
        "GPUs/node",
        "capacity",
        "nodes",
        "on-demand/node",
        "spot/node",
        "reserved/node",
    )
    pools = table("Node pools and cost", *cols, right=(*cols[4:], "GPUs/node"))
    for p in cost.pools:
        pools.add_row(
            p.pool,
            p.machine or "-",
            f"{p.gpus_per_node} x {p.gpu}" if p.gpu else "-",
            p.capacity,
            f"{p.min_nodes}..{p.max_nodes}",
            money(p.on_demand_hourly),
            money(p.spot_hourly),
            money(p.reserved_hourly) if p.committed else "-",
        )
    console.print(pools)

    scale_cols = ("", "GPUs", "as configured", "of which committed", "all on-demand")
    scale = table("At scale", *scale_cols, right=scale_cols[1:])
    committed = money(cost.committed_hourly) if any(p.committed for p in cost.pools) else "-"
    scale.add_row(
        "minimum", str(summary.gpus_min), money(cost.min_hourly), committed, money(cost.min_hourly_on_demand)
    )
    scale.add_row(
        "maximum", str(summary.gpus_max), money(cost.max_hourly), committed, money(cost.max_hourly_on_demand)
    )
    console.print(scale)
    for line in monthly_lines(cost):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    for a in cost.assumptions:
        console.print(f"  [dim]assumption:[/] {a}", highlight=False)
    print_price_age(cost, console)
    for n in summary.notes:
        console.print(f"  [yellow]note:[/] {escape(n)}", highlight=False, soft_wrap=True)
    for line in idle_lines(summary.idle):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)

    title = f"Critical path: {duration(summary.critical_seconds)} to create"
    path = table(title, "#", "resource", "type", "~seconds", right=("#", "~seconds"))
    for i, step in enumerate(summary.critical_path, 1):
        path.add_row(str(i), step.name, f"[dim]{step.type}[/]", f"{step.seconds:.0f}")
    console.print(path)
