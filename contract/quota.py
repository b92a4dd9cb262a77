"""How one flavor's GPUs are split across the teams' ClusterQueues (pure functions, no Pulumi).

Kueue counts the nominal quotas of a cohort's ClusterQueues as what exists: "the sum of the quotas for each
(flavor, resource) combination defines the maximum quantity that can be allocated by a ClusterQueue in the
cohort" (kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go, ResourceQuota.nominalQuota). A flavor
whose quotas add up past its GPUs lets Kueue admit jobs its nodes cannot hold; they wait Pending on that
flavor, and Kueue never moves them to the next one while the flavor has quota (kueue#2560).

The split rule (docs/configuration.md "Queueing"), deterministic:
- a flavor has `capacity` GPUs: its pools' maxNodes x GPUs per node;
- each team is entitled to `min(gpuQuota, capacity)` of it;
- when the entitlements fit, each team gets its entitlement; otherwise the capacity is apportioned in
  proportion to gpuQuota by the largest-remainder method: each team gets the floor of its exact share,
  and the GPUs left go one each to the largest remainders, ties to the team listed first in `teams`;
- so the shares of a flavor add up to at most its capacity, and no team gets more than its entitlement.

Unused shares are lent through the cohort: no lendingLimit is set, which is "all the nominalQuota can be
borrowed by other clusterQueues in the cohort" (clusterqueue_types.go, ResourceQuota.lendingLimit). A team
borrows at most up to its entitlement (borrowingLimit = entitlement - share: "Workloads in a ClusterQueue
can consume a quantity of quota equal to nominalQuota+borrowingLimit", ResourceQuota.borrowingLimit), as
its namespace ResourceQuota would not let more of its pods start anyway.

The plan (components/incluster/kueue_objects.py, components/fleet/) and the block-window controller
(controllers/block_window_agent.py, in the controller image with this package) apply the same rule, the
latter to the GPUs of a Capacity Block while it runs; standard library only, as all of contract/.

Example:
    >>> gpu_shares(32, [("research", 64), ("eval", 16)])
    {'research': 26, 'eval': 6}
"""

from __future__ import annotations

from collections.abc import Sequence


def gpu_shares(capacity: int, quotas: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Team name -> its nominal GPU quota on a flavor of `capacity` GPUs, from (team, gpuQuota) in the
    teams' order (the rule in the module docstring)."""
    wants = {name: min(quota, capacity) for name, quota in quotas}
    if sum(wants.values()) <= capacity:
        return wants
    total = sum(quota for _, quota in quotas)
    # Integer arithmetic: share = capacity * quota / total as (floor, remainder), exact and reproducible.
    parts = {name: divmod(capacity * quota, total) for name, quota in quotas}
    shares = {name: floor for name, (floor, _) in parts.items()}
    left = capacity - sum(shares.values())
    # Largest remainder first; `sorted` is stable, so equal remainders keep the teams' order.
    for name in sorted(parts, key=lambda n: parts[n][1], reverse=True)[:left]:
        shares[name] += 1
    return shares


def borrowing_limit(share: int, reach: int) -> int:
    """How much a team may borrow on a flavor: up to what it may hold there in all (`reach`)."""
    return max(0, reach - share)
