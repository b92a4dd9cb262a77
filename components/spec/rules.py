"""The cloud-neutral rules of a platform stack, and the helpers cloud backends build their rules from.

`check_platform` runs the rules every cloud shares (unique names, quotas, GPU sharing) and asks the
stack's backend (components.backends) for the rest: its platform keys, each pool and each storage.
Keys that only some clouds understand are refused on the others, with the key meant instead when the
stack's cloud has a twin of it (`instanceType` on gcp: use machineType).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from components.backends import CloudBackend, backend, backends
from components.catalog import catalog
from components.regions import did_you_mean
from components.spec.base import Spec, alias_of, duplicates

if TYPE_CHECKING:  # PlatformSpec.load calls check_platform: the models import this module, not back
    from components.spec.platform import NodePoolSpec, PlatformSpec

# GPUs per node of a real server, where no catalog machine says (existing clusters, toy backends).
SERVER_GPU_COUNTS = (1, 2, 4, 8, 16)


def keys_of(cloud: CloudBackend, model: type[Spec]) -> frozenset[str]:
    """The keys `cloud` lists for `model` or a model it extends (PlatformSpec.load composes the sections
    of backends a program registered on top of the installed models: components/spec/sections.py)."""
    return frozenset().union(*(cloud.keys.get(m, frozenset()) for m in model.__mro__))


def cloud_key_problems(obj: Spec, path: str, cloud: CloudBackend) -> Iterable[str]:
    """Keys of `obj` set in the stack file that other clouds own and `cloud` does not accept."""
    model = type(obj)
    mine = keys_of(cloud, model)
    for field in sorted(obj.model_fields_set):
        alias = alias_of(model, field)
        if alias in mine:
            continue
        owners = [b.name for b in backends() if alias in keys_of(b, model)]
        if owners:
            hint = cloud.twins.get(alias)
            instead = f"; use {hint}" if hint else ""
            yield f"{path}.{alias}: only for cloud {' or '.join(owners)}, this stack is cloud {cloud.name}{instead}"


def check_platform(spec: PlatformSpec, root: str = "platform") -> Iterable[str]:
    """The rules pydantic cannot express per field: catalog lookups and cross-key constraints."""
    cloud = backend(spec.cloud)
    for obj, path in (
        (spec, root),
        (spec.cluster, f"{root}.cluster"),
        (spec.network, f"{root}.network"),
        (spec.gpu_operator, f"{root}.gpuOperator"),
    ):
        yield from cloud_key_problems(obj, path, cloud)
    yield from cloud.check(spec, root)
    yield from _check_support(spec, cloud, root)
    for label, names in (
        ("nodePools", [p.name for p in spec.node_pools]),
        ("storage", [s.name for s in spec.storage]),
        ("teams", [t.name for t in spec.teams]),
    ):
        for dup in sorted(duplicates(names)):
            yield f"{root}.{label}: name {dup!r} is used more than once"

    pool_problems = [
        line
        for i, pool in enumerate(spec.node_pools)
        for line in _check_pool(spec, cloud, pool, f"{root}.nodePools[{i}]")
    ]
    yield from pool_problems
    for i, st in enumerate(spec.storage):
        path = f"{root}.storage[{i}]"
        yield from cloud_key_problems(st, path, cloud)
        yield from _check_storage_kind(st.kind, st, path)
        yield from cloud.check_storage(spec, st, path)
    # Quotas are measured against the pools; with a broken pool the ceiling would only add noise.
    yield from check_teams(spec, root, check_quota=not pool_problems)
    yield from check_gpu_operator(spec, root)
    yield from check_pods_ready(spec, root)
    yield from check_idle(spec, root)
    yield from check_fleet_manager(spec, root)


def check_idle(spec: PlatformSpec, root: str) -> Iterable[str]:
    """Idle reclaim is the GPU health controller's (controllers/idle_reclaim.py), and `requeue`
    deactivates the job's Kueue Workload: without either the policy would silently do nothing."""
    for i, team in enumerate(spec.teams):
        if team.idle is None:
            continue
        path = f"{root}.teams[{i}].idle"
        if not spec.gpu_health.enabled:
            yield f"{path}: team {team.name!r} sets an idle policy but gpuHealth is disabled: its controller runs idle reclaim"
        elif team.idle.action == "requeue" and not spec.queueing.enabled:
            yield (
                f"{path}.action: requeue deactivates the job's Kueue Workload, but queueing is disabled "
                "(no Kueue): use action alert or enable queueing"
            )


def check_fleet_manager(spec: PlatformSpec, root: str) -> Iterable[str]:
    """A fleet's MultiKueue manager holds the fleet's team queues (made by the fleet stack), none of its own:
    a team of the platform would claim the same namespace and LocalQueue the fleet mirrors there."""
    q = spec.queueing
    path = f"{root}.queueing"
    if q.fleet_manager:
        if spec.teams:
            names = ", ".join(t.name for t in spec.teams)
            yield (
                f"{root}.teams: a fleet manager (queueing.fleetManager) has no teams of its own ({names}); "
                "the fleet stack mirrors the workers' teams on it"
            )
        if not q.enabled:
            yield f"{path}.fleetManager: needs queueing.enabled (MultiKueue runs inside Kueue)"
    elif "fleet_dispatcher" in q.model_fields_set:
        yield f"{path}.fleetDispatcher: only for a fleet manager (set queueing.fleetManager: true)"


def check_pods_ready(spec: PlatformSpec, root: str) -> Iterable[str]:
    ready = spec.queueing.pods_ready
    if ready.recovery_minutes < ready.timeout_minutes:
        yield (
            f"{root}.queueing.podsReady.recoveryTimeoutMinutes: {ready.recovery_minutes} is shorter than "
            f"timeoutMinutes {ready.timeout_minutes}: a lost node is replaced from zero, which takes as long "
            "as a first start"
        )


def _check_pool(spec: PlatformSpec, cloud: CloudBackend, pool: NodePoolSpec, path: str) -> Iterable[str]:
    yield from cloud_key_problems(pool, path, cloud)
    if pool.max_nodes is not None and pool.min_nodes > pool.max_nodes:
        yield f"{path}.minNodes: {pool.min_nodes} is greater than maxNodes {pool.max_nodes}"
    yield from cloud.check_pool(spec, pool, path)


def _check_storage_kind(kind: str, st: Spec, path: str) -> Iterable[str]:
    """Keys that belong to the other kind of file system."""
    if kind == "lustre":
        if getattr(st, "tier", None) is not None:
            yield f"{path}.tier: only for kind nfs (Filestore)"
        return
    if getattr(st, "throughput_per_tib", None) is not None:
        yield f"{path}.throughputPerTiB: only for kind lustre"
    if getattr(st, "import_path", None) or getattr(st, "export_path", None):
        yield f"{path}.importPath: S3 data repositories are for kind lustre (FSx)"


def check_teams(spec: PlatformSpec, root: str, check_quota: bool = True) -> Iterable[str]:
    storage_names = {s.name for s in spec.storage}
    ceiling = spec.max_gpus()
    teams = {t.name for t in spec.teams}
    for i, pool in enumerate(spec.node_pools):
        if pool.owner is not None and pool.owner not in teams:
            known = ", ".join(sorted(teams)) or "none defined"
            yield f"{root}.nodePools[{i}].owner: {pool.owner!r} is not a team of this platform; known: {known}"
        # `reservation` is set exactly on reservation and capacity-block pools (components/spec/capacity.py).
        if pool.owner is not None and not pool.reservation:
            yield f"{root}.nodePools[{i}].owner: only for capacity reservation or capacity-block (paid idle)"
    for i, team in enumerate(spec.teams):
        path = f"{root}.teams[{i}]"
        if check_quota and team.gpu_quota > ceiling:
            yield (
                f"{path}.gpuQuota: {team.gpu_quota} GPUs is more than the platform's maximum of {ceiling} "
                "(sum of gpusPerNode x maxNodes over GPU pools)"
            )
        for j, name in enumerate(team.storage or []):
            if name not in storage_names:
                known = ", ".join(sorted(storage_names)) or "none defined"
                yield f"{path}.storage[{j}]: {name!r} is not a storage of this platform; known: {known}"


def check_gpu_operator(spec: PlatformSpec, root: str) -> Iterable[str]:
    op = spec.gpu_operator
    if op.time_slicing is not None and op.mig.strategy != "none":
        yield (
            f"{root}.gpuOperator.timeSlicing: time-slicing cannot be combined with MIG "
            f"(mig.strategy is {op.mig.strategy}); choose one way of sharing GPUs"
        )
    if op.mig.profile and op.mig.strategy == "none":
        yield f"{root}.gpuOperator.mig.profile: needs mig.strategy single or mixed"
    if op.mig.strategy != "none":
        yield from _mig_unpriceable(spec, root)


def _mig_unpriceable(spec: PlatformSpec, root: str) -> Iterable[str]:
    """MIG on a platform whose GPU pools have prices: the cost rules count `nvidia.com/gpu` per physical GPU
    (components/incluster/cost_rules.py). The device plugin of the pinned gpu-operator (v26.7.0; its
    values offer migStrategy none, single and mixed): with "single" a node advertises its MIG devices as
    nvidia.com/gpu (several per GPU), with "mixed" nvidia.com/mig-<profile> and no nvidia.com/gpu (the
    fourth review's finding, shared FACTS.md): $0 or N x the price, silently."""
    priced = _priced_gpu_pools(spec)
    if priced:
        single = spec.gpu_operator.mig.strategy == "single"
        what = "its MIG slices as nvidia.com/gpu (N x the price)" if single else "no nvidia.com/gpu ($0)"
        yield (
            f"{root}.gpuOperator.mig.strategy: {spec.gpu_operator.mig.strategy} cannot be costed: a MIG node "
            f"advertises {what} and the cost rules price physical GPUs of pools {', '.join(priced)}; use "
            "timeSlicing, or MIG on a cluster whose pools have no price"
        )


def _priced_gpu_pools(spec: PlatformSpec) -> list[str]:
    """The GPU pools the cost rules put a price on: those components.pricing prices (a catalog list price on
    a cloud that has one, or a stack override with an on-demand price). The spec layer cannot import
    pricing (pricing reads the spec), so the condition is restated here from pricing._price."""
    cloud = backend(spec.cloud)
    basis = cloud.price_basis()
    priced = []
    for pool in spec.node_pools:
        if not pool.gpu:
            continue
        shape = cloud.machine_of(pool)
        listed = shape.on_demand_hourly if shape else None
        override = spec.pricing.overrides.get(shape.name if shape else cloud.machine_type_of(pool) or "")
        if (override is not None and (override.on_demand_hourly is not None or listed is not None)) or (
            listed is not None and basis is not None
        ):
            priced.append(pool.name)
    return priced


# ---- helpers for the backends' own rules ---------------------------------------------------------


def region_required(spec: PlatformSpec, root: str, cloud: str) -> Iterable[str]:
    if not spec.region:
        yield f"{root}.region: required for cloud {cloud}"


def compact_zone_problem(path: str, zones: Sequence[str]) -> Iterable[str]:
    """A compact (cluster placement) pool lives in exactly one zone."""
    if len(zones) != 1:
        yield (
            f"{path}.placement: compact placement needs exactly one zone; "
            f"set {path.split('.', 1)[1]}.zones to a single zone"
        )


def check_declared_pool(pool: NodePoolSpec, path: str, cloud: str) -> Iterable[str]:
    """A pool of existing machines the catalog does not know: the stack states its GPUs."""
    if pool.gpu and not pool.gpus_per_node:
        yield f"{path}.gpusPerNode: required on cloud {cloud} for a GPU pool"
    if not pool.gpu and pool.gpus_per_node:
        yield f"{path}.gpu: required when gpusPerNode is set"
    if pool.gpu and pool.gpus_per_node and pool.gpus_per_node not in SERVER_GPU_COUNTS:
        allowed = ", ".join(map(str, SERVER_GPU_COUNTS))
        yield f"{path}.gpusPerNode: {pool.gpus_per_node} GPUs per node is not a server shape; allowed: {allowed}"


def check_catalog_pool(
    pool: NodePoolSpec, path: str, cloud: str, type_key: str, type_name: str | None
) -> tuple[list[str], bool]:
    """A pool of catalog machines of `cloud`: its type (key `type_key`) or GPU kind and count must exist.

    Returns the problems, and whether the pool's machine is known well enough for the cloud's own
    machine checks (EFA, local SSDs) to mean anything.
    """
    if not pool.gpu:
        return list(_check_cpu_pool(pool, path, cloud, type_key, type_name)), False
    kind = catalog().gpu(pool.gpu)
    assert kind is not None  # the field validator already rejected unknown kinds
    if not kind.counts(cloud):
        others = kind.offered_on()
        return [
            f"{path}.gpu: {pool.gpu} is not offered on {cloud}; it is on {', '.join(others) or 'no cloud'}"
        ], False
    if type_name:
        return _check_gpu_machine(pool, path, cloud, type_key, type_name)
    return list(_check_gpu_count(pool, path, cloud, type_key)), True


def _check_gpu_machine(
    pool: NodePoolSpec, path: str, cloud: str, type_key: str, type_name: str
) -> tuple[list[str], bool]:
    """A GPU pool that names its machine type: the type must carry the pool's GPUs, in its count."""
    kind = catalog().gpu(pool.gpu or "")
    assert kind is not None
    shape = catalog().machine(cloud, type_name)
    if shape is None or shape.gpu != pool.gpu:
        names = [m.name for m in kind.shapes_on(cloud)]
        hint = did_you_mean(type_name, names) if shape is None else ""
        return [
            f"{path}.{type_key}: {type_name!r} does not carry {pool.gpu}; {pool.gpu} comes in: "
            f"{', '.join(names)}{hint}"
        ], False
    if pool.gpus_per_node and pool.gpus_per_node != shape.gpus:
        return [f"{path}.gpusPerNode: {type_name} has {shape.gpus} GPUs, not {pool.gpus_per_node}"], True
    return [], True


def _check_gpu_count(pool: NodePoolSpec, path: str, cloud: str, type_key: str) -> Iterable[str]:
    """A GPU pool by kind and count: the cloud must offer machines with that many."""
    kind = catalog().gpu(pool.gpu or "")
    assert kind is not None
    counts = kind.counts(cloud)
    if not pool.gpus_per_node:
        yield f"{path}.gpusPerNode: required with gpu (or name the {type_key}); {pool.gpu} on {cloud} comes in {counts}"
    elif pool.gpus_per_node not in counts:
        allowed = ", ".join(map(str, counts))
        yield f"{path}.gpusPerNode: {pool.gpu} does not come in {pool.gpus_per_node} per node on {cloud}; allowed: {allowed}"


def _check_cpu_pool(
    pool: NodePoolSpec, path: str, cloud: str, type_key: str, type_name: str | None
) -> Iterable[str]:
    if pool.gpus_per_node:
        yield f"{path}.gpu: required when gpusPerNode is set"
    if not type_name:
        yield f"{path}.{type_key}: required for a CPU pool (or set gpu for a GPU pool)"
    elif (shape := catalog().machine(cloud, type_name)) is not None and shape.gpus:
        yield f"{path}.gpu: {type_name} carries {shape.gpus}x {shape.gpu}; set gpu: {shape.gpu}"
    elif shape is None:
        # A typo used to plan, and price every total as n/a without a word.
        names = catalog().machine_names(cloud)
        if problem := backend(cloud).machine_type_problem(type_name, names):
            yield f"{path}.{type_key}: {problem}"


def _check_support(spec: PlatformSpec, cloud: CloudBackend, root: str) -> Iterable[str]:
    """The cloud's support calendar on the day the stack loads (components.clock.today, TRAINPLANE_TODAY)."""
    from components import k8s_support
    from components.clock import today

    if cloud.support_calendar is None:
        return
    try:
        day = today()
    except ValueError as e:
        yield str(e)
        return
    if line := k8s_support.problem(cloud.support_calendar, spec.cluster.kubernetes_version, day):
        yield f"{root}.cluster.kubernetesVersion: {line}"
