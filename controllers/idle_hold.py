"""Idle reclaim's hold (issue 20 point 3): a Workload idle reclaim deactivated, whose pods are gone, stays
inactive while other Workloads wait for the quota it gave back, so the GPUs go to them first. idle_reclaim.decide
asks waiting_for(); idle_round.py lists the queues. Standard library only: the library imports it too (controllers/__init__.py).

Why (kueue v0.19.2): a reactivated Workload is ordered by its creation time (pkg/workload/workload.go
Ordering.GetQueueOrderTimestamp), so reactivated at once it is readmitted ahead of younger Workloads of its
priority and takes the GPUs straight back.

What counts as waiting: `status.pendingWorkloads` above 0 (apis/kueue/v1beta2/clusterqueue_types.go
ClusterQueueStatus) of the Workload's ClusterQueue, and, when that ClusterQueue has a spec.cohortName and may lend
(a lendingLimit unset or above 0 somewhere), of the ClusterQueues of the same cohortName that may borrow (a
borrowingLimit unset or above 0 somewhere; ResourceQuota.borrowingLimit/lendingLimit; the platform puts every
team in one cohort: kueue_objects.cluster_queue_spec, borrowingLimit 0 when borrowing is off).
- An inactive Workload is not in that count, so the held one never holds itself: pendingWorkloads is the queue
  manager's count (pkg/controller/core/clusterqueue_controller.go updateCqStatusIfChanged: qManager.Pending,
  pkg/cache/queue/cluster_queue.go PendingTotal = active + inadmissible); an inactive Workload is taken out of the
  queues (pkg/controller/core/workload_controller.go Update: `!active` -> queues.DeleteWorkload) and never put in
  (pkg/cache/queue/manager.go AddOrUpdateWorkloadWithoutLock: workload.IsAdmissible requires IsActive).
- Its ClusterQueue is its LocalQueue's spec.clusterQueue, the LocalQueue named by its spec.queueName in its
  namespace, as Kueue finds it (manager.go ClusterQueueForWorkload): after the eviction status.admission is empty
  (workload.go UnsetQuotaReservationWithCondition).
- A LocalQueue or ClusterQueue not found: not held (never held forever on missing data). The queue lists failing
  (idle_round.py): held this round, decided again next round.

Known limits: a pending Workload that can never be admitted (it asks for more than the cohort has) holds the job
as long as it waits (`kubectl get clusterqueues` shows the pending counts; setting the Workload's spec.active
true by hand ends the hold); only ClusterQueues of the same cohortName count (hierarchical Cohort objects'
spec.parentName is not followed; the platform's cohort is flat); pendingWorkloads counts Workloads that need
other resources or flavors than the freed ones too, and a peer counts when any of its resources may borrow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Queues:
    """Kueue's LocalQueues of the team namespaces and its ClusterQueues, for the hold (docstring)."""

    local: tuple[Mapping[str, Any], ...] = ()
    cluster: tuple[Mapping[str, Any], ...] = ()


def _zero(quantity: Any) -> bool:
    """A resource.Quantity of 0 ("0", "0Gi", "0.0"): the limit shuts borrowing or lending."""
    number = str(quantity).strip().rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    try:
        return float(number) == 0
    except ValueError:
        return False


def _may(cq: Mapping[str, Any], limit: str) -> bool:
    """Whether any resource of any flavor of the ClusterQueue has `limit` (borrowingLimit, lendingLimit) unset
    (no limit) or above 0."""
    return any(
        not _zero(r[limit]) if limit in r else True
        for g in (cq.get("spec") or {}).get("resourceGroups") or []
        for f in g.get("flavors") or []
        for r in f.get("resources") or []
    )


def _pending(cq: Mapping[str, Any]) -> int:
    return int((cq.get("status") or {}).get("pendingWorkloads") or 0)


def waiting_for(wl: Mapping[str, Any], queues: Queues) -> list[str]:
    """The ClusterQueues whose pending Workloads could take the quota `wl` gave back, as `name (N pending)`:
    its own, and the peers of its cohort that may borrow when it may lend. [] when none is pending, or when its
    LocalQueue or ClusterQueue is not found (never held on missing data)."""
    meta, queue = wl.get("metadata") or {}, (wl.get("spec") or {}).get("queueName")
    lq = next(
        (
            q
            for q in queues.local
            if (q.get("metadata") or {}).get("namespace") == meta.get("namespace")
            and (q.get("metadata") or {}).get("name") == queue
        ),
        None,
    )
    name = ((lq or {}).get("spec") or {}).get("clusterQueue")
    by_name = {(q.get("metadata") or {}).get("name"): q for q in queues.cluster}
    own = by_name.get(name)
    if own is None:
        return []
    candidates = [own]
    cohort = (own.get("spec") or {}).get("cohortName")
    if cohort and _may(own, "lendingLimit"):
        candidates += [
            q
            for n, q in sorted(by_name.items())
            if n != name and (q.get("spec") or {}).get("cohortName") == cohort and _may(q, "borrowingLimit")
        ]
    return [f"{q['metadata']['name']} ({_pending(q)} pending)" for q in candidates if _pending(q) > 0]
