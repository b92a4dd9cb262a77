"""Idle reclaim and a job's start-up (issue 30): a job idle since its pods started is starting up (loading a
checkpoint, a dataset, compiling) or stuck from the start, and the two look the same to the alert: its GPUs sat
below the threshold for the whole window. A job whose start-up is longer than its team's window would be
requeued at the end of every start-up, reactivated, started again and requeued again, never training.

So (idle_reclaim._on_idle, `requeue` teams): a new idle episode that began at its pods' start (the alert fires
within the window plus STARTUP_SLACK_S of the earliest live pod's status.startTime) is a start-up idle episode.
The first one requeues the job as any other (a job stuck from its start gives the GPUs back once) and marks its
Workload with IDLE_STARTUP_ANNOTATION, which reactivation keeps; once marked, a start-up idle episode gets the
GpuIdle Event only: the job is left to finish starting. An idle episode that begins later than that (the job was
busy after its start) requeues it as before, marked or not.

Known limit: a job marked once and stuck from every later start keeps its GPUs (GpuIdle once per episode, and
the platform's GpuIdleButAllocated alert, say so); deleting the annotation re-arms the start-up requeue.
Standard library only: the library imports it too (controllers/__init__.py).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

# How much later than its window an alert may fire for a job idle since its pods started: a rule evaluation
# (1 m) and a scrape (30 s) of the job's first GPU series after its container started, dcgm-exporter's
# collection interval, the controller's round, with room to spare; far under any window the spec allows (1m is
# its least, `for` ^[1-9][0-9]{0,3}[mh]$: a 1-minute window with a 5-minute slack only widens what counts as
# start-up).
STARTUP_SLACK_S = 300


def epoch(rfc3339: str) -> float:
    """Seconds since the epoch of a Kubernetes time (`2026-11-26T05:00:00Z`)."""
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def pods_started(pods: Iterable[Mapping[str, Any]]) -> float | None:
    """When the earliest of `pods` started (status.startTime), None when none has."""
    times = [epoch(t) for p in pods if (t := (p.get("status") or {}).get("startTime"))]
    return min(times) if times else None


def idle_since_start(pods: Iterable[Mapping[str, Any]], window_s: int, now: str) -> int | None:
    """Seconds the job's live `pods` have run when its idle alert fired within its window (plus the slack) of
    their start; None when the episode began later (the job was busy after its start), when no pod has
    started, or when the window is not known (0)."""
    start = pods_started(pods)
    if start is None or window_s <= 0:
        return None
    up = epoch(now) - start
    return int(up) if up < window_s + STARTUP_SLACK_S else None
