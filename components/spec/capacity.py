"""The cloud-neutral rules of a pool's `capacity` and `reservation` keys (docs/configuration.md "Capacity").

Each cloud backend calls `check_capacity` with the capacity kinds it offers and adds its own rules (the
format of a reservation id, zones, machine types). The kinds:

- `on-demand`, `spot`: bought by the hour; spot may be taken back.
- `reservation`: an existing AWS On-Demand Capacity Reservation or GCP reservation (`reservation` names it).
- `capacity-block`: an existing AWS Capacity Block for ML, a reservation with a start and an end.
- `flex-start`, `queued`: GKE's Dynamic Workload Scheduler (flex-start VMs; flex-start with queued
  provisioning through Kueue's ProvisioningRequest admission check).

trainplane never creates or buys a reservation (a Capacity Block cannot be deleted once bought): the
stack names one that exists, and `trainplane verify STACK --cloud` checks it against the cloud.

Example:
    >>> from components.spec.platform import NodePoolSpec
    >>> pool = NodePoolSpec(name="h100", gpu="H100", gpusPerNode=8, capacity="capacity-block")
    >>> for line in check_capacity(pool, "platform.nodePools[1]", "aws", AWS_KINDS):
    ...     print(line.split(" (")[0])
    platform.nodePools[1].reservation: required for capacity capacity-block
    platform.nodePools[1].blockStart: required for capacity capacity-block
    platform.nodePools[1].blockEnd: required for capacity capacity-block
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from components.spec.platform import NodePoolSpec

# Capacity drawn from a reservation the stack names (`reservation` required).
RESERVED = ("reservation", "capacity-block")
# GKE Dynamic Workload Scheduler: nodes come when capacity is found, for a bounded time.
DWS = ("flex-start", "queued")
AWS_KINDS = ("on-demand", "spot", "reservation", "capacity-block")
GCP_KINDS = ("on-demand", "spot", "reservation", "flex-start", "queued")
# What a kind is called on the cloud that lacks it, and what that cloud offers instead.
ELSEWHERE = {
    "capacity-block": "AWS Capacity Blocks for ML; on gcp use reservation (a future reservation) or flex-start",
    "flex-start": "GKE Dynamic Workload Scheduler; on aws use capacity-block or reservation",
    "queued": "GKE Dynamic Workload Scheduler; on aws use capacity-block or reservation",
}
# Why a kind starts from zero nodes: its nodes exist only while the cloud grants them.
ZERO_MIN_REASON = {
    "capacity-block": "the block's instances exist only between its start and end",
    "flex-start": "GKE provisions flex-start nodes on demand from zero",
    "queued": "queued provisioning grants nodes per workload, from zero",
}


def check_capacity(pool: NodePoolSpec, path: str, cloud: str, kinds: Sequence[str]) -> Iterable[str]:
    """The rules of `capacity` and `reservation` every cloud shares, one line each."""
    cap = pool.capacity
    if cap not in kinds:
        hint = f" ({ELSEWHERE[cap]})" if cap in ELSEWHERE else ""
        yield f"{path}.capacity: {cap} is not offered on {cloud}; allowed: {', '.join(kinds)}{hint}"
        return
    if cap in RESERVED and not pool.reservation:
        yield f"{path}.reservation: required for capacity {cap} (the id of the reservation the pool draws from)"
    if cap not in RESERVED and pool.reservation:
        yield f"{path}.reservation: only for capacity reservation or capacity-block, this pool is {cap}"
    yield from _block_window(pool, path)
    if cap in ZERO_MIN_REASON:
        if not pool.is_gpu:
            yield f"{path}.capacity: {cap} is for GPU pools (set gpu, or use on-demand for a CPU pool)"
        if pool.min_nodes:
            yield f"{path}.minNodes: must be 0 for capacity {cap}: {ZERO_MIN_REASON[cap]}"


def zone_count_problem(path: str, cap: str, zones: Sequence[str], what: str) -> Iterable[str]:
    """A pool that lives in the one zone of its reservation (`what`: where the zones come from)."""
    if len(zones) != 1:
        key = path.split(".", 1)[1]
        got = f"{len(zones)} zones" if zones else "no zone"
        yield (
            f"{path}.zones: a {cap} pool runs in the one zone of its reservation, {what} has {got}; "
            f"set {key}.zones to that zone"
        )


def _block_window(pool: NodePoolSpec, path: str) -> Iterable[str]:
    """A Capacity Block's dates: Kueue may admit jobs to its flavor only between them (kueue#2560)."""
    if pool.capacity != "capacity-block":
        for key, value in (("blockStart", pool.block_start), ("blockEnd", pool.block_end)):
            if value is not None:
                yield f"{path}.{key}: only for capacity capacity-block (the block's dates), this pool is {pool.capacity}"
        return
    for key, value in (("blockStart", pool.block_start), ("blockEnd", pool.block_end)):
        if value is None:
            yield (
                f"{path}.{key}: required for capacity capacity-block (the block's {key[5:].lower()} date with its "
                "time zone, e.g. 2026-12-01T11:30:00Z): jobs are admitted to the block only inside its dates"
            )
    if pool.block_start and pool.block_end and pool.block_end <= pool.block_start:
        yield f"{path}.blockEnd: {pool.block_end.isoformat()} is not after blockStart {pool.block_start.isoformat()}"
