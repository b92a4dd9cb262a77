"""What a plan costs per hour: each node pool at its capacity type's price, at the platform's minimum
and maximum size, plus the managed control plane, with the assumptions behind every number.

Machine prices are the catalog's (or the stack's `pricing.overrides`); what only a cloud knows (where
its prices come from, its control plane's fee, how it bills what the catalog cannot price) comes from its
backend (CloudBackend.price_basis, control_plane_hourly, cost_assumptions).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from components.backends import backend
from components.catalog import PriceBasis
from components.spec import JobSpec, PlatformSpec, machine_of
from components.spec.capacity import RESERVED


@dataclass(frozen=True)
class PoolCost:
    pool: str
    machine: str | None
    gpu: str | None
    gpus_per_node: int
    capacity: str
    min_nodes: int
    max_nodes: int
    on_demand_hourly: float | None  # per node
    spot_hourly: float | None  # per node
    price_source: str
    # Per node of a reservation or Capacity Block (None for other pools): paid whether used or not.
    reserved_hourly: float | None = None

    @property
    def committed(self) -> bool:
        """Reserved capacity: every node of the reservation (taken as maxNodes) is paid for, always."""
        return self.capacity in RESERVED

    @property
    def hourly(self) -> float | None:
        """Per node, at the capacity type the pool runs as."""
        if self.committed:
            return self.reserved_hourly
        return self.spot_hourly if self.capacity == "spot" else self.on_demand_hourly

    def billed_nodes(self, nodes: int) -> int:
        """Nodes paid for when the pool runs `nodes`: a reservation's whole size (maxNodes) regardless."""
        return self.max_nodes if self.committed else nodes


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


def _price(
    spec: PlatformSpec, basis: PriceBasis | None, shape_name: str | None, on_demand: float | None
) -> tuple[float | None, float | None, str]:
    override = spec.pricing.overrides.get(shape_name or "")
    if override is not None and (override.on_demand_hourly is not None or on_demand is not None):
        # An override may give only the spot or reserved price; the rest comes from the catalog.
        od = override.on_demand_hourly if override.on_demand_hourly is not None else on_demand
        assert od is not None
        fraction = spec.pricing.spot_fraction or (basis.spot_fraction if basis else 1.0)
        spot = override.spot_hourly if override.spot_hourly is not None else od * fraction
        return od, spot, "stack config override"
    if on_demand is None or basis is None:
        return None, None, "unknown: not in the catalog (set platform.pricing.overrides)"
    fraction = spec.pricing.spot_fraction or basis.spot_fraction
    return on_demand, on_demand * fraction, f"catalog list price, {basis.region}, {basis.as_of}"


def estimate_cost(spec: PlatformSpec) -> Cost:
    cloud = backend(spec.cloud)
    basis = cloud.price_basis()
    pools: list[PoolCost] = []
    for p in spec.node_pools:
        shape = machine_of(spec.cloud, p)
        name = shape.name if shape else (p.instance_type or p.machine_type)
        od, spot, source = _price(spec, basis, name, shape.on_demand_hourly if shape else None)
        reserved = _reserved_price(spec, name, od) if p.capacity in RESERVED else None
        pools.append(
            PoolCost(
                pool=p.name,
                machine=name,
                gpu=p.gpu,
                gpus_per_node=spec.gpus_per_node(p),
                capacity=p.capacity,
                min_nodes=p.min_nodes,
                max_nodes=p.effective_max_nodes,
                on_demand_hourly=od,
                spot_hourly=spot,
                price_source=source,
                reserved_hourly=reserved,
            )
        )
    control = cloud.control_plane_hourly(spec)

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
        f"control plane: ${control:.2f}/h; storage, data transfer and load balancers are not included",
    ]
    if any(c.on_demand_hourly is None for c in pools):
        missing = ", ".join(c.machine or c.pool for c in pools if c.on_demand_hourly is None)
        assumptions.append(f"no price for {missing}: totals left out (set platform.pricing.overrides)")
    assumptions += cloud.cost_assumptions(spec)
    assumptions += _reserved_assumptions(spec, pools)
    return Cost(
        min_hourly=total(lambda c: c.billed_nodes(c.min_nodes), lambda c: c.hourly),
        max_hourly=total(lambda c: c.billed_nodes(c.max_nodes), lambda c: c.hourly),
        min_hourly_on_demand=total(lambda c: c.min_nodes, lambda c: c.on_demand_hourly),
        max_hourly_on_demand=total(lambda c: c.max_nodes, lambda c: c.on_demand_hourly),
        control_plane_hourly=control,
        pools=pools,
        assumptions=assumptions,
        committed_hourly=total(lambda c: c.max_nodes if c.committed else 0, lambda c: c.hourly, 0.0),
    )


def _reserved_price(spec: PlatformSpec, machine: str | None, on_demand: float | None) -> float | None:
    """A reservation's price per node-hour: `pricing.overrides.<type>.reservedHourly`, else on-demand
    (ODCRs and GCP reservations bill at the on-demand rate; a Capacity Block's price is set at purchase)."""
    override = spec.pricing.overrides.get(machine or "")
    if override is not None and override.reserved_hourly is not None:
        return override.reserved_hourly
    return on_demand


def _reserved_assumptions(spec: PlatformSpec, pools: list[PoolCost]) -> list[str]:
    reserved = [c for c in pools if c.committed]
    if not reserved:
        return []
    lines = [
        "reserved (reservation, capacity-block): committed: each pool's maxNodes are paid for at both "
        "scales, used or not (maxNodes taken as the reservation's size)"
    ]
    for c in reserved:
        override = spec.pricing.overrides.get(c.machine or "")
        if override is None or override.reserved_hourly is None:
            lines.append(
                f"{c.pool}: reserved at the on-demand price, an assumption (set "
                f"pricing.overrides.{c.machine}.reservedHourly to the price paid)"
            )
    return lines


def job_cost(job: JobSpec, platform: PlatformSpec | None) -> Cost:
    """What the job's nodes cost per hour at its minimum and maximum size, from its platform's prices."""
    if platform is None:
        return Cost(None, None, None, None, 0.0, [], ["platform stack given as recorded outputs: no prices"])
    pool_cost = next((p for p in estimate_cost(platform).pools if p.pool == job.pools[0]), None)
    base = estimate_cost(platform)
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
    )
