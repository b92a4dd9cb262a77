"""Reading the API objects `trainplane status` gets (pure): times, Events, conditions, what is the job's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class JobState:
    """What the reader got from the cluster for one job (API objects as JSON dicts)."""

    namespace: str
    name: str
    kind: str  # JobSet, or Job (an elastic job)
    object: dict[str, Any]
    workloads: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    """One line of the timeline: when, on what, what happened, why."""

    time: str | None
    source: str
    what: str
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "time", stamp(self.time))


def when(value: str | None) -> float | None:
    """Unix seconds of an RFC 3339 time of the API (None stays None)."""
    return datetime.fromisoformat(value).timestamp() if value else None


def stamp(value: str | None) -> str | None:
    """An API time as the API writes it, `2026-11-20T10:00:00Z`, whichever way it came (custom objects
    keep the API's string; the client's typed models give `+00:00`)."""
    t = when(value)
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_time(e: Mapping[str, Any]) -> str | None:
    """core/v1 Events set lastTimestamp; events.k8s.io ones (Kueue 0.19) eventTime, possibly with a series."""
    series = e.get("series") or {}
    return (
        series.get("lastObservedTime")
        or e.get("lastTimestamp")
        or e.get("eventTime")
        or e.get("firstTimestamp")
        or (e.get("metadata") or {}).get("creationTimestamp")
    )


def occurrences(e: Mapping[str, Any]) -> list[str | None]:
    """The times of each occurrence an Event stands for: the API folds repeats into one (count, or
    series.count) with their first and last time; the times between are not kept."""
    n = int((e.get("series") or {}).get("count") or e.get("count") or 1)
    last = stamp(event_time(e))
    first = stamp(e.get("firstTimestamp") or e.get("eventTime")) or last
    return [last] if n <= 1 else [first, *([None] * (n - 2)), last]


def conditions(obj: Mapping[str, Any], source: str, types: Iterable[str] | None = None) -> list[Entry]:
    return [
        Entry(
            c.get("lastTransitionTime"),
            source,
            f"{c['type']}={c.get('status')}",
            ": ".join(x for x in (c.get("reason"), c.get("message")) if x),
        )
        for c in (obj.get("status") or {}).get("conditions") or []
        if types is None or c.get("type") in types
    ]


def kind_of(e: Mapping[str, Any]) -> tuple[str, str]:
    ref = e.get("involvedObject") or e.get("regarding") or {}
    return str(ref.get("kind", "")), str(ref.get("name", ""))


def related(e: Mapping[str, Any], kind: str, name: str, workloads: Iterable[str] = ()) -> bool:
    """An Event about the job, its Workloads, its pods and child Jobs (also those already deleted: they are
    named after the job, `<job>-workers-0-1-abcde`), or a node (the reader keeps those of the job's nodes)."""
    ref_kind, ref_name = kind_of(e)
    return (
        (ref_kind, ref_name) == (kind, name)
        or (ref_kind == "Workload" and ref_name in workloads)
        or (ref_kind in ("Pod", "Job") and ref_name.startswith(f"{name}-"))
        or ref_kind == "Node"
    )
