"""Summarise an offline run of the program: resource tree, counts, GPUs, cost per hour, critical path.

Everything here works on the recorded `RunResult` plus the validated spec, so the numbers shown are the
ones the program would really send to the cloud, not a second model of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic.alias_generators import to_camel

from components.catalog import catalog
from components.spec import JobSpec, PlatformSpec, machine_of
from components.spec.capacity import RESERVED
from infra.mockcloud import Resource, RunResult

# Rough creation times in seconds per resource type, from provider docs and deploy logs (FSx and the
# association from ai-on-eks comments). Used only to find the critical path and estimate its length.
CREATE_SECONDS: dict[str, float] = {
    "aws:eks/cluster:Cluster": 600,
    "aws:eks/nodeGroup:NodeGroup": 240,
    "aws:eks/addon:Addon": 60,
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": 2,
    "kubernetes:storage.k8s.io/v1:StorageClass": 1,
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": 5,
    "aws:fsx/lustreFileSystem:LustreFileSystem": 600,
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": 420,
    "aws:efs/fileSystem:FileSystem": 30,
    "aws:efs/mountTarget:MountTarget": 90,
    "aws:ec2/natGateway:NatGateway": 100,
    "aws:ec2/eip:Eip": 5,
    "aws:ec2/vpc:Vpc": 5,
    "aws:kms/key:Key": 10,
    "aws:iam/role:Role": 5,
    "aws:s3/bucket:Bucket": 5,
    "aws:s3/bucketV2:BucketV2": 5,
    "gcp:container/cluster:Cluster": 480,
    "gcp:container/nodePool:NodePool": 300,
    "gcp:filestore/instance:Instance": 300,
    "gcp:lustre/instance:Instance": 1200,
    "gcp:compute/network:Network": 30,
    "gcp:compute/subnetwork:Subnetwork": 20,
    "gcp:compute/router:Router": 20,
    "gcp:compute/routerNat:RouterNat": 30,
    "gcp:serviceaccount/account:Account": 5,
    "gcp:storage/bucket:Bucket": 5,
    "kubernetes:helm.sh/v3:Release": 120,
    "pulumi:providers:kubernetes": 1,
}
DEFAULT_CREATE_SECONDS = 3.0
# Helm releases that roll out DaemonSets on every GPU node take much longer than the default.
SLOW_RELEASES = {"gpu-operator": 420, "kube-prometheus-stack": 240}

# Managed control-plane fees in USD per hour (EKS standard support; GKE Standard cluster management fee).
CONTROL_PLANE_HOURLY = {"aws": 0.10, "gcp": 0.10}


def create_seconds(r: Resource) -> float:
    if not r.custom or (r.type.startswith("pulumi:providers:") and r.type != "pulumi:providers:kubernetes"):
        return 0.0
    if r.type == "kubernetes:helm.sh/v3:Release":
        chart = str(r.inputs.get("chart", "")).rsplit("/", 1)[-1]
        return SLOW_RELEASES.get(chart, CREATE_SECONDS[r.type])
    return CREATE_SECONDS.get(r.type, DEFAULT_CREATE_SECONDS)


@dataclass(frozen=True)
class PathStep:
    name: str
    type: str
    seconds: float


class _DependencyGraph:
    """What each resource waits for, as the engine sees it, and the longest path to each."""

    def __init__(self, resources: list[Resource]) -> None:
        self.by_urn = {r.urn: r for r in resources}
        self.children: dict[str, list[str]] = {}
        for r in resources:
            if r.parent:
                self.children.setdefault(r.parent, []).append(r.urn)
        self.best: dict[str, tuple[float, str | None]] = {}
        self._leaves: dict[str, tuple[str, ...]] = {}

    def leaves(self, urn: str) -> tuple[str, ...]:
        """The custom resources a dependency on `urn` waits for (a component: everything inside it)."""
        if urn not in self._leaves:
            r = self.by_urn.get(urn)
            if r is None:
                found: tuple[str, ...] = ()
            elif r.custom:
                found = (urn,)
            else:
                found = tuple(leaf for c in self.children.get(urn, []) for leaf in self.leaves(c))
            self._leaves[urn] = found
        return self._leaves[urn]

    def waits_for(self, r: Resource) -> set[str]:
        deps = {leaf for d in r.deps for leaf in self.leaves(d)}
        if r.provider:
            # A provider reference is "<urn>::<id>".
            provider_urn = r.provider.rsplit("::", 1)[0]
            if provider_urn in self.by_urn:
                deps.add(provider_urn)
        deps.discard(r.urn)
        return deps

    def finish(self, urn: str, stack: frozenset[str] = frozenset()) -> float:
        """When `urn` is created at the earliest, remembering the dependency that decides it."""
        if urn in self.best:
            return self.best[urn][0]
        r = self.by_urn[urn]
        before, via = 0.0, None
        # In URN order, taking the first of equally late dependencies: the same path in every run (a set's
        # order changes with each process's string hashing).
        for d in sorted(self.waits_for(r)):
            if d in stack:  # a cycle cannot be deployed; the engine would refuse it too
                continue
            t = self.finish(d, stack | {urn})
            if t > before:
                before, via = t, d
        self.best[urn] = (before + create_seconds(r), via)
        return self.best[urn][0]


def critical_path(resources: list[Resource]) -> list[PathStep]:
    """The longest chain of dependent resources, weighted by typical creation time.

    A dependency on a component means waiting for everything inside it, as the engine does; a resource
    also waits for its explicit provider (a Kubernetes provider waits for its cluster's kubeconfig).
    """
    graph = _DependencyGraph(resources)
    customs = [r.urn for r in resources if r.custom]
    if not customs:
        return []
    end = max(sorted(customs), key=graph.finish)  # ties: the first URN, not the first registered
    chain: list[PathStep] = []
    cursor: str | None = end
    while cursor is not None:
        r = graph.by_urn[cursor]
        chain.append(PathStep(r.name, r.type, create_seconds(r)))
        cursor = graph.best[cursor][1]
    return list(reversed(chain))


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
    spec: PlatformSpec, shape_name: str | None, on_demand: float | None
) -> tuple[float | None, float | None, str]:
    basis = catalog().pricing.get(spec.cloud)
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
    pools: list[PoolCost] = []
    for p in spec.node_pools:
        shape = machine_of(spec.cloud, p)
        name = shape.name if shape else (p.instance_type or p.machine_type)
        od, spot, source = _price(spec, name, shape.on_demand_hourly if shape else None)
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
    control = CONTROL_PLANE_HOURLY.get(spec.cloud, 0.0)

    def total(nodes_of, price_of, base: float = control) -> float | None:
        prices = [(nodes_of(c), price_of(c)) for c in pools]
        if any(n and p is None for n, p in prices):
            return None
        return round(base + sum(n * (p or 0.0) for n, p in prices), 2)

    assumptions: list[str] = []
    basis = catalog().pricing.get(spec.cloud)
    if spec.cloud == "kubernetes":
        assumptions.append("existing cluster: the hardware is already paid for; no cloud prices apply")
        return Cost(None, None, None, None, 0.0, pools, assumptions)
    if basis is not None:
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
    lines = []
    dws = [c.pool for c in pools if c.capacity in ("flex-start", "queued")]
    if dws:
        lines.append(
            f"{', '.join(dws)}: GKE flex-start/queued nodes priced at on-demand (Google bills them at a "
            "discounted flex-start rate the catalog does not hold): an upper bound"
        )
    reserved = [c for c in pools if c.committed]
    if not reserved:
        return lines
    lines += [
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


def resource_tree(result: RunResult) -> list[dict[str, Any]]:
    """Components and resources nested by parent, siblings by type then name.

    Not in registration order: resources waiting on outputs register whenever their inputs resolve, so
    that order changes from run to run and two plans of one stack would not diff."""
    nodes: dict[str, dict[str, Any]] = {
        r.urn: {"name": r.name, "type": r.type, "custom": r.custom, "children": []} for r in result.resources
    }
    roots: list[dict[str, Any]] = []
    for r in sorted(result.resources, key=lambda r: (r.type, r.name, r.urn)):
        parent = nodes.get(r.parent or "")
        (parent["children"] if parent else roots).append(nodes[r.urn])
    return roots


def camel(value: Any) -> Any:
    """Dataclass fields (snake_case) as the JSON keys every command uses: camelCase, like the config."""
    if isinstance(value, dict):
        return {to_camel(k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


@dataclass
class PlanSummary:
    stack: str
    cloud: str
    resource_count: int
    counts: dict[str, int]
    tree: list[dict[str, Any]]
    gpus_min: int
    gpus_max: int
    cost: Cost
    critical_path: list[PathStep]
    outputs: dict[str, Any]

    @property
    def critical_seconds(self) -> float:
        return sum(s.seconds for s in self.critical_path)

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "cloud": self.cloud,
            "resources": self.resource_count,
            "counts": self.counts,
            "tree": self.tree,
            "gpus": {"min": self.gpus_min, "max": self.gpus_max},
            "cost": camel(asdict(self.cost)),
            "criticalPath": {
                "seconds": self.critical_seconds,
                "steps": [asdict(s) for s in self.critical_path],
            },
            "outputs": self.outputs,
        }


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


def summarize(result: RunResult, cloud: str, gpus: tuple[int, int], cost: Cost) -> PlanSummary:
    customs = [r for r in result.resources if r.custom]
    outputs = {k: ("[secret]" if k in result.secret_outputs else v) for k, v in result.outputs.items()}
    return PlanSummary(
        stack=result.stack,
        cloud=cloud,
        resource_count=len(customs),
        counts=dict(sorted(Counter(r.type for r in customs).items())),
        tree=resource_tree(result),
        gpus_min=gpus[0],
        gpus_max=gpus[1],
        cost=cost,
        critical_path=critical_path(result.resources),
        outputs=outputs,
    )


def summarize_platform(result: RunResult, spec: PlatformSpec) -> PlanSummary:
    return summarize(result, spec.cloud, (spec.min_gpus(), spec.max_gpus()), estimate_cost(spec))


def summarize_job(result: RunResult, job: JobSpec, cloud: str, platform: PlatformSpec | None) -> PlanSummary:
    gpus = (job.nodes.min * job.gpus_per_node, job.nodes.max * job.gpus_per_node)
    return summarize(result, cloud, gpus, job_cost(job, platform))
