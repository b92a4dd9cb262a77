"""A training job's timeline, built from what was read (pure: plain dicts in, dataclasses out).

`build(state, series)`: the admissions (the Kueue Workload's conditions and Events), the job's own
conditions, and its restarts, each with its cause (infra/status/causes.py), whether it counted against
`maxRestarts`, and from Prometheus the steps and GPU-hours it lost (infra/status/goodput.py).

Restarts of a JobSet come from the JobSet controller's Events (jobset v0.12.0
pkg/controllers/failure_policy.go: one Warning Event per restart, reason
RestartJobSetFailurePolicyAction when it counts against maxRestarts,
RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction when not; plus an Event whose reason is the Restarting
condition's, `FailurePolicy_<rule name>`), numbered against `status.restarts`; Events expire (the API
server keeps them an hour by default), so older restarts show as such. The pods of a restart's failed
attempt carry `jobset.sigs.k8s.io/restart-attempt` (pkg/constants/constants.go RestartsKey) = the restart's
number - 1. A Kueue eviction (the JobSet suspended and re-admitted, no JobSet restart) is a restart too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.status.admissions import admissions
from infra.status.api import (
    Entry,
    JobState,
    conditions,
    event_time,
    kind_of,
    occurrences,
    related,
    stamp,
    when,
)
from infra.status.causes import Evidence, classify
from infra.status.goodput import Loss, Series, restart_loss

# JobSet v0.12.0 pkg/constants/constants.go.
RESTART_COUNTED = "RestartJobSetFailurePolicyAction"
RESTART_UNCOUNTED = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
RULE_EVENT_PREFIX = "FailurePolicy_"  # RestartingJobSetReasonFailurePolicyFormat "FailurePolicy_%s"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
# Events of the failed attempt can be stamped a little after the restart that they caused.
SLACK_S = 5.0
# A Kueue eviction's evidence: the Events of the minutes before it (the Workload is evicted after its pods
# failed or its node did).
EVICTION_WINDOW_S = 300.0


@dataclass(frozen=True)
class Restart:
    number: int | None  # the JobSet's restart number (1 = the first); None for a Kueue eviction
    time: str | None
    via: str  # "JobSet", "Kueue", "pod" (an elastic job's pod replaced)
    cause: str
    counted: bool | None  # against maxRestarts; None when not known
    evidence: str
    loss: Loss

    def __post_init__(self) -> None:
        object.__setattr__(self, "time", stamp(self.time))


@dataclass(frozen=True)
class Timeline:
    namespace: str
    name: str
    kind: str
    state: str
    gpus: int
    restarts: int  # status.restarts (a JobSet), else the restarts listed
    counted: int | None  # status.restartsCountTowardsMax
    max_restarts: int | None
    entries: list[Entry]
    restart_list: list[Restart]
    prometheus: str | None  # why there are no Prometheus figures; None when there are

    @property
    def steps_lost(self) -> int | None:
        values = [r.loss.steps for r in self.restart_list if r.loss.steps is not None]
        return sum(values) if values else None

    @property
    def gpu_hours_lost(self) -> float | None:
        values = [h for r in self.restart_list if (h := r.loss.gpu_hours(self.gpus)) is not None]
        return round(sum(values), 2) if values else None


def job_gpus(obj: Mapping[str, Any], kind: str) -> int:
    """GPUs of the whole job: replicas x pods x the GPUs each pod's containers request."""
    jobs = (
        [((r.get("replicas") or 1), r.get("template") or {}) for r in obj["spec"].get("replicatedJobs") or []]
        if kind == "JobSet"
        else [(1, obj)]
    )
    total = 0
    for replicas, job in jobs:
        spec = job.get("spec") or {}
        pods = spec.get("parallelism") or spec.get("completions") or 1
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        per_pod = sum(
            int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0)) for c in containers
        )
        total += replicas * pods * per_pod
    return total


def _state(state: JobState) -> str:
    conds = {c.get("type"): c for c in (state.object.get("status") or {}).get("conditions") or []}
    for kind in ("Completed", "Complete", "Failed", "Suspended"):
        c = conds.get(kind)
        if c and c.get("status") == "True":
            return f"{kind} ({c['reason']})" if kind == "Failed" and c.get("reason") else kind
    return "Running" if state.pods else "Pending"


def _in_window(state: JobState, start: float | None, end: float | None) -> list[dict[str, Any]]:
    """The job's Events after `start` up to `end` (and a little after: SLACK_S)."""
    workloads = [w["metadata"]["name"] for w in state.workloads]
    out = []
    for e in state.events:
        t = when(event_time(e))
        if t is None or (start is not None and t <= start) or (end is not None and t > end + SLACK_S):
            continue
        if related(e, state.kind, state.name, workloads):
            out.append(e)
    return out


def _attempt_pods(state: JobState, attempt: int) -> list[dict[str, Any]]:
    return [
        p
        for p in state.pods
        if ((p.get("metadata") or {}).get("labels") or {}).get(RESTART_ATTEMPT_LABEL) == str(attempt)
    ]


def _jobset_restarts(state: JobState, series: Series | None) -> list[Restart]:
    status = state.object.get("status") or {}
    total = int(status.get("restarts") or 0)
    # An earlier JobSet of the same name (deleted, created again) left Events too: not this one's.
    uid = (state.object.get("metadata") or {}).get("uid")
    own = [
        e
        for e in state.events
        if kind_of(e) == ("JobSet", state.name) and (e.get("involvedObject") or {}).get("uid") in (None, uid)
    ]
    actions: list[tuple[float, str | None, bool]] = []
    for e in own:
        if e.get("reason") not in (RESTART_COUNTED, RESTART_UNCOUNTED):
            continue
        times = occurrences(e)
        first = when(times[0]) or 0.0
        for k, t in enumerate(times):
            # An occurrence between a folded Event's first and last has no time: kept after the first.
            at = when(t)
            actions.append((at if at is not None else first + k * 1e-3, t, e["reason"] == RESTART_COUNTED))
    actions.sort(key=lambda a: a[0])
    kept = actions[-total:] if total else []
    known: list[tuple[float, str | None, bool] | None] = [None] * (total - len(kept))
    known += kept
    rules = [
        (when(event_time(e)), e["reason"][len(RULE_EVENT_PREFIX) :])
        for e in own
        if str(e.get("reason", "")).startswith(RULE_EVENT_PREFIX)
    ]
    for c in status.get("conditions") or []:
        if c.get("type") == "RestartingJobSet" and str(c.get("reason", "")).startswith(RULE_EVENT_PREFIX):
            rules.append((when(c.get("lastTransitionTime")), c["reason"][len(RULE_EVENT_PREFIX) :]))
    out: list[Restart] = []
    previous: float | None = None
    for i, action in enumerate(known, start=1):
        pods = _attempt_pods(state, i - 1)
        if action is None:
            cause = classify(Evidence(pods=pods, nodes=state.nodes))
            out.append(
                Restart(
                    i,
                    None,
                    "JobSet",
                    cause.cause,
                    None,
                    f"{cause.evidence} (its Events expired)",
                    Loss(note="no restart time"),
                )
            )
            continue
        _, t, counted = action
        ts = when(t)
        rule = next(
            (r for rt, r in rules if rt is not None and ts is not None and abs(rt - ts) <= SLACK_S), None
        )
        window = _in_window(state, previous, ts) if ts is not None else []
        cause = classify(Evidence(pods=pods, nodes=state.nodes, events=window, rule=rule, at=ts))
        out.append(
            Restart(
                i,
                t,
                "JobSet",
                cause.cause,
                counted,
                cause.evidence if t else f"{cause.evidence} (its time is not kept: one Event for several)",
                restart_loss(series, ts, _next_time(known, i)),
            )
        )
        previous = ts
    return out


def _next_time(known: list[Any], i: int) -> float | None:
    return next((when(a[1]) for a in known[i:] if a is not None and a[1]), None)


def _pod_restarts(state: JobState, series: Series | None) -> list[Restart]:
    """An elastic job (batch/v1 Job): each failed trainer pod still listed is a restart of its rank."""
    from infra.status.causes import trainer_exit_code
    from trainer import contract

    out = []
    for pod in state.pods:
        if (pod.get("status") or {}).get("phase") != "Failed":
            continue
        code = trainer_exit_code(pod)
        cause = classify(
            Evidence(
                pods=[pod],
                nodes=state.nodes,
                events=[e for e in state.events if kind_of(e)[1] == pod["metadata"]["name"]],
            )
        )
        disrupted = any(
            c.get("type") == "DisruptionTarget" and c.get("status") == "True"
            for c in pod["status"].get("conditions") or []
        )
        counted = None if code is None else not disrupted and contract.exit_action(code) == "count"
        t = pod["metadata"].get("deletionTimestamp") or _finished(pod)
        out.append(
            Restart(None, t, "pod", cause.cause, counted, cause.evidence, restart_loss(series, when(t), None))
        )
    return out


def _finished(pod: Mapping[str, Any]) -> str | None:
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        if t := ((s.get("state") or {}).get("terminated") or {}).get("finishedAt"):
            return str(t)
    return None


def build(state: JobState, series: Series | None = None, prometheus_note: str | None = None) -> Timeline:
    """The timeline of `state`; `series` from Prometheus, or None with `prometheus_note` saying why."""
    entries, evictions = admissions(state)
    jobset = state.kind == "JobSet"
    restarts = _jobset_restarts(state, series) if jobset else _pod_restarts(state, series)
    for t, reason in evictions:
        # Kueue says why it evicted; the pod and node Events of the minutes before may say more.
        ts = when(t)
        window = _in_window(state, ts - EVICTION_WINDOW_S, ts) if ts is not None else []
        cause = classify(Evidence(events=window, kueue_reason=reason))
        restarts.append(
            Restart(None, t, "Kueue", cause.cause, False, cause.evidence, restart_loss(series, when(t), None))
        )
    restarts = _in_order(restarts)
    entries += conditions(state.object, f"{state.kind} {state.name}")
    # A Kueue eviction is on the timeline already (the Workload's Evicted condition or Event).
    entries += [
        Entry(r.time, f"{state.kind} {state.name}", _restart_what(r), r.evidence)
        for r in restarts
        if r.via != "Kueue"
    ]
    entries.sort(key=lambda e: (when(e.time) is None, when(e.time) or 0.0, e.source, e.what))
    status = state.object.get("status") or {}
    policy = (state.object.get("spec") or {}).get("failurePolicy") or {}
    return Timeline(
        namespace=state.namespace,
        name=state.name,
        kind=state.kind,
        state=_state(state),
        gpus=job_gpus(state.object, state.kind),
        restarts=int(status.get("restarts") or 0) if jobset else len(restarts),
        counted=int(status.get("restartsCountTowardsMax") or 0) if jobset else None,
        max_restarts=policy.get("maxRestarts")
        if jobset
        else (state.object.get("spec") or {}).get("backoffLimit"),
        entries=entries,
        restart_list=restarts,
        prometheus=prometheus_note if series is None else None,
    )


def _in_order(restarts: list[Restart]) -> list[Restart]:
    """By time. A JobSet restart without one sits where its number puts it: after the numbered restart
    before it (Events expired: before all)."""
    keys: dict[int, float] = {}
    last = -math.inf
    for i, r in enumerate(restarts):
        t = when(r.time)
        if r.number is not None:
            last = t if t is not None else last + 1e-3
        keys[i] = t if t is not None else last if r.number is not None else math.inf
    order = sorted(range(len(restarts)), key=lambda i: (keys[i], restarts[i].number or 0))
    return [restarts[i] for i in order]


def _restart_what(r: Restart) -> str:
    counted = {True: "counted", False: "not counted", None: "counted?"}[r.counted]
    return f"restart {r.number}: {r.cause} ({counted})" if r.number else f"pod restart: {r.cause} ({counted})"
