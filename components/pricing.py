"""Each node pool's machine price per node-hour, at its capacity type: the one price table that both
`trainplane plan` (infra/plan_cost.py) and the cost recording rules (components/incluster/cost_rules.py)
read, so the plan and Prometheus never disagree on a price.

Machine prices are the catalog's (or the stack's `pricing.overrides`); where a cloud's prices come from is
its backend's (CloudBackend.price_basis).
"""

from __future__ import annotations

from dataclasses import dataclass

from components.backends import backend
from components.catalog import PriceBasis
from components.incluster.cost_rules import PoolPrice
from components.spec import PlatformSpec, machine_of
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
    # The date of the catalog price used (the machine's own, else its cloud's basis); None when the
    # stack's override or nothing priced it.
    price_as_of: str | None = None

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


def _price(
    spec: PlatformSpec,
    basis: PriceBasis | None,
    shape_name: str | None,
    on_demand: float | None,
    as_of: str | None = None,
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
    return on_demand, on_demand * fraction, f"catalog list price, {basis.region}, {as_of or basis.as_of}"


def reserved_price(spec: PlatformSpec, machine: str | None, on_demand: float | None) -> float | None:
    """A reservation's price per node-hour: `pricing.overrides.<type>.reservedHourly`, else on-demand
    (ODCRs and GCP reservations bill at the on-demand rate; a Capacity Block's price is set at purchase)."""
    override = spec.pricing.overrides.get(machine or "")
    if override is not None and override.reserved_hourly is not None:
        return override.reserved_hourly
    return on_demand


def pool_costs(spec: PlatformSpec) -> list[PoolCost]:
    """Every pool of the stack with its prices per node-hour (None where nothing prices it)."""
    basis = backend(spec.cloud).price_basis()
    pools: list[PoolCost] = []
    for p in spec.node_pools:
        shape = machine_of(spec.cloud, p)
        name = shape.name if shape else backend(spec.cloud).machine_type_of(p)
        own_date = shape.price_as_of if shape else None
        od, spot, source = _price(spec, basis, name, shape.on_demand_hourly if shape else None, own_date)
        reserved = reserved_price(spec, name, od) if p.capacity in RESERVED else None
        catalog_priced = source.startswith("catalog") and basis is not None
        as_of = (own_date or (basis.as_of if basis else None)) if catalog_priced else None
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
                price_as_of=as_of,
            )
        )
    return pools


def gpu_pool_prices(spec: PlatformSpec) -> tuple[PoolPrice, ...]:
    """What the cost recording rules price each GPU pool at: its node price at its capacity type per GPU
    (a pool nothing prices is left out; verify names it)."""
    owners = {p.name: p.owner for p in spec.node_pools}
    # Time-slicing is the GPU operator's default device-plugin config, so every GPU node shares alike
    # (components/incluster/gpu_operator.py).
    sliced = spec.gpu_operator.time_slicing
    shares = sliced.replicas if sliced else 1
    windows = {
        p.name: (int(p.block_start.timestamp()), int(p.block_end.timestamp()))
        for p in spec.node_pools
        if p.capacity == "capacity-block" and p.block_start and p.block_end
    }
    return tuple(
        PoolPrice(
            pool=c.pool,
            capacity=c.capacity,
            gpu_hourly=c.hourly / c.gpus_per_node,
            committed_gpus=c.max_nodes * c.gpus_per_node if c.committed else 0,
            owner=owners.get(c.pool),
            window=windows.get(c.pool),
            shares=shares,
        )
        for c in pool_costs(spec)
        if c.gpu and c.hourly is not None and c.gpus_per_node
    )
