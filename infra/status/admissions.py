"""The admissions of a job: its Kueue Workloads' conditions and Kueue's Events about them (pure)."""

from __future__ import annotations

from infra.status.api import Entry, JobState, conditions, kind_of, occurrences

# Kueue v0.19.2 apis/kueue/v1beta2/workload_types.go: the Workload conditions an admission goes through.
WORKLOAD_CONDITIONS = (
    "QuotaReserved",
    "Admitted",
    "PodsReady",
    "Evicted",
    "Preempted",
    "Requeued",
    "Finished",
)
# Kueue's Workload Events (pkg/scheduler/scheduler.go "QuotaReserved", "Admitted"; eviction:
# "EvictedDueTo<reason>", pkg/workload/evict/evict.go).
WORKLOAD_EVENTS = ("QuotaReserved", "Admitted")
EVICTED_EVENT_PREFIX = "EvictedDueTo"


def admissions(state: JobState) -> tuple[list[Entry], list[tuple[str | None, str]]]:
    """The Workloads' conditions and Events (an Event the condition already shows is left out), and the
    Kueue evictions (time, reason)."""
    entries: list[Entry] = []
    evictions: list[tuple[str | None, str]] = []
    for wl in state.workloads:
        name = wl["metadata"]["name"]
        conds = conditions(wl, f"Workload {name}", WORKLOAD_CONDITIONS)
        # A condition and the Event of the same transition: shown once, as the condition.
        shown = {(c.what.removesuffix("=True"), c.time) for c in conds if c.what.endswith("=True")}
        entries += conds
        for e in state.events:
            if kind_of(e) != ("Workload", name):
                continue
            reason = str(e.get("reason", ""))
            evicted = reason.startswith(EVICTED_EVENT_PREFIX)
            if not evicted and reason not in WORKLOAD_EVENTS:
                continue
            cause = reason[len(EVICTED_EVENT_PREFIX) :] if evicted else ""
            for t in occurrences(e):
                if evicted:
                    evictions.append((t, cause))
                what = "Evicted" if evicted else reason
                if (what, t) not in shown:
                    message = str(e.get("message", ""))
                    entries.append(
                        Entry(t, f"Workload {name}", what, f"{cause}: {message}" if cause else message)
                    )
        for c in conds:
            kind, _, status = c.what.partition("=")
            reason = c.detail.split(":")[0]
            if kind == "Evicted" and status == "True" and (c.time, reason) not in evictions:
                evictions.append((c.time, reason))
    return entries, evictions
