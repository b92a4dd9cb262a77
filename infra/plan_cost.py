"""What a plan costs per hour: each node pool at its capacity type's price, at the platform's minimum
and maximum size, plus the managed control plane, with the assumptions behind every number.

Machine prices are the catalog's (or the stack's `pricing.overrides`); what only a cloud knows (where
its prices come from, its control plane's fee, how it bills what the catalog cannot price) comes from its
backend (CloudBackend.price_basis, control_plane_hourly, cost_assumptions).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, date

from components.backends import backend
from components.clock import PRICE_MAX_AGE_MONTHS, as_of_date, months_old
from components.k8s_support import control_plane_fee
from components.pricing import PoolCost, pool_costs
from components.spec import JobSpec, PlatformSpec


@dataclass
class Cost:
    min_hourly: float | None
    max_hourly: float | None
    min_hourly_on_demand: float | None
    max_hourly_on_demand: float | None
    control_plane_hourly: float
    pools: list[PoolCost] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    # Reserved capacity (reservation, capacity-block pools) paid per hour whatever the scale; part of
    # min_hourly and max_hourly.
    committed_hourly: float | None = 0.0
    # The oldest catalog price date among the pools' prices, and its age in months on the plan's day
    # (None when nothing came from the catalog, or no day was given).
    prices_as_of: str | None = None
    price_age_months: int | None = None
    warnings: list[str] = field(default_factory=list)


def price_age(pools: list[PoolCost], today: date | None) -> tuple[str | None, int | None, list[str]]:
    """The oldest catalog price the pools use, its age on `today`, and a warning past
    PRICE_MAX_AGE_MONTHS (prices move: the 2025 P5 cut was 45%)."""
    dates = [c.price_as_of for c in pools if c.price_as_of]
    if not dates:
        return None, None, []
    oldest = min(dates, key=as_of_date)
    if today is None:
        return oldest, None, []
    age = months_old(oldest, today)
    if age <= PRICE_MAX_AGE_MONTHS:
        return oldest, age, []
    stale = sorted(
        {
            c.machine or c.pool
            for c in pools
            if c.price_as_of and months_old(c.price_as_of, today) > PRICE_MAX_AGE_MONTHS
        }
    )
    return (
        oldest,
        age,
        [
            f"prices are {age} months old (as of {oldest}, today {today.isoformat()}; older than "
            f"{PRICE_MAX_AGE_MONTHS} months) for {', '.join(stale)}: check the cloud's price list or set "
            "platform.pricing.overrides"
        ],
    )


def estimate_cost(spec: PlatformSpec, today: date | None = None) -> Cost:
    """`today`: the plan's day, for the age of its prices (None: the age is not computed)."""
    cloud = backend(spec.cloud)
    basis = cloud.price_basis()
    pools = pool_costs(spec)
    standard = control = cloud.control_plane_hourly(spec)
    support_warning = None
    if cloud.support_calendar and today is not None:
        # Past standard support the control plane costs the cloud's extended rate (the calendar's).
        control, support_warning = control_plane_fee(
            cloud.support_calendar, spec.cluster.kubernetes_version, today, control
        )

    def total(nodes_of, price_of, base: float = control) -> float | None:
        prices = [(nodes_of(c), price_of(c)) for c in pools]
        if any(n and p is None for n, p in prices):
            return None
        return round(base + sum(n * (p or 0.0) for n, p in prices), 2)

    if basis is None:
        # A cloud that sells no machines (an existing cluster): nothing to price; its backend says why.
        return Cost(None, None, None, None, 0.0, pools, cloud.cost_assumptions(spec))
    assumptions: list[str] = []
    fraction = spec.pricing.spot_fraction or basis.spot_fraction
    if spec.region and spec.region != basis.region:
        # The catalog holds one region's list prices per cloud; say so rather than price silently.
        assumptions.append(
            f"region: priced at {basis.region} list prices, the only region the catalog has for "
            f"{spec.cloud}; {spec.region} prices differ (set platform.pricing.overrides for exact ones)"
        )
    assumptions += [
        f"on-demand: {basis.source} (as of {basis.as_of}); compute only, Linux, per node-hour",
        f"spot: {fraction:.0%} of on-demand ({basis.spot_source}); real spot prices move hourly",
        f"control plane: ${control:.2f}/h{' (extended support)' if control != standard else ''}; storage, data transfer and load balancers are not included",
    ]
    if any(c.on_demand_hourly is None for c in pools):
        missing = ", ".join(c.machine or c.pool for c in pools if c.on_demand_hourly is None)
        assumptions.append(f"no price for {missing}: totals left out (set platform.pricing.overrides)")
    assumptions += cloud.cost_assumptions(spec)
    assumptions += _reserved_assumptions(spec, pools)
    as_of, age, warnings = price_age(pools, today)
    warnings = [support_warning, *warnings] if support_warning else warnings
    return Cost(
        min_hourly=total(lambda c: c.billed_nodes(c.min_nodes), lambda c: c.hourly),
        max_hourly=total(lambda c: c.billed_nodes(c.max_nodes), lambda c: c.hourly),
        min_hourly_on_demand=total(lambda c: c.min_nodes, lambda c: c.on_demand_hourly),
        max_hourly_on_demand=total(lambda c: c.max_nodes, lambda c: c.on_demand_hourly),
        control_plane_hourly=control,
        pools=pools,
        assumptions=assumptions,
        committed_hourly=total(lambda c: c.max_nodes if c.committed else 0, lambda c: c.hourly, 0.0),
        prices_as_of=as_of,
        price_age_months=age,
        warnings=warnings,
    )


def _reserved_assumptions(spec: PlatformSpec, pools: list[PoolCost]) -> list[str]:
    reserved = [c for c in pools if c.committed]
    if not reserved:
        return []
    lines = [
        "reserved (reservation, capacity-block): committed: each pool's maxNodes are paid for at both "
        "scales, used or not (maxNodes taken as the reservation's size)"
    ]
    blocks = {
        p.name: p for p in spec.node_pools if p.capacity == "capacity-block" and p.block_start and p.block_end
    }
    for c in reserved:
        if (block := blocks.get(c.pool)) is not None and block.block_start and block.block_end:
            # As the cost rules charge it (cost_rules.committed_scalar): only between its dates.
            start, end = block.block_start.astimezone(UTC), block.block_end.astimezone(UTC)
            lines.append(
                f"{c.pool}: a Capacity Block, paid only from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} "
                f"UTC ({(end - start).total_seconds() / 3600:g} h); 0 outside those dates"
            )
        override = spec.pricing.overrides.get(c.machine or "")
        if override is None or override.reserved_hourly is None:
            lines.append(
                f"{c.pool}: reserved at the on-demand price, an assumption (set "
                f"pricing.overrides.{c.machine}.reservedHourly to the price paid)"
            )
    return lines


def job_cost(job: JobSpec, platform: PlatformSpec | None, today: date | None = None) -> Cost:
    """What the job's nodes cost per hour at its minimum and maximum size, from its platform's prices."""
    if platform is None:
        return Cost(None, None, None, None, 0.0, [], ["platform stack given as recorded outputs: no prices"])
    base = estimate_cost(platform, today)
    pool_cost = next((p for p in base.pools if p.pool == job.pools[0]), None)
    if pool_cost is None:
        return Cost(None, None, None, None, 0.0, [], base.assumptions)
    nodes = (job.nodes.min, job.nodes.max)
    pool_cost = replace(pool_cost, min_nodes=nodes[0], max_nodes=nodes[1], gpus_per_node=job.gpus_per_node)

    def at(n: int, price: float | None) -> float | None:
        return None if price is None else round(n * price, 2)

    assumptions = [a for a in base.assumptions if not a.startswith("control plane")]
    assumptions.append("the job's own nodes only; the platform's system pool and control plane are shared")
    return Cost(
        min_hourly=at(nodes[0], pool_cost.hourly),
        max_hourly=at(nodes[1], pool_cost.hourly),
        min_hourly_on_demand=at(nodes[0], pool_cost.on_demand_hourly),
        max_hourly_on_demand=at(nodes[1], pool_cost.on_demand_hourly),
        control_plane_hourly=0.0,
        pools=[pool_cost],
        assumptions=assumptions,
        prices_as_of=pool_cost.price_as_of,
        price_age_months=price_age([pool_cost], today)[1],
        warnings=price_age([pool_cost], today)[2],
    )
