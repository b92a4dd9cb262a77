"""Which GPU nodes the training jobs themselves point at: node suspects from stragglers and from hangs.

Pure functions on plain dicts (Prometheus query results, pods); the GPU health controller
(gpu_health_agent.py) quarantines or reports what they return. Standard library only.

Rules and thresholds:

(a) Stragglers. A row of ALERTS{alertname=ALERT_STRAGGLER, alertstate="firing"} names a rank whose step time
    stayed above `gpuHealth.stragglers.factor` x its job's median for `forMinutes` (the alert's own `for`),
    with labels namespace, job, rank and node. Its node is a suspect; what follows is its team's choice
    (`teams[].stragglers`, keyed by the team's namespace): `quarantine` -> quarantine with reason
    STRAGGLER_REASON; `alert` (the default, also for a namespace that is no team's) -> Warning Event
    EVENT_STRAGGLER on the node only. A node named by several rows is quarantined when any of their teams
    opted in. Pending alerts (`for` not yet elapsed) and rows without a node are ignored.
(b) Hangs. A trainer container that terminated with trainer/contract.py's EXIT_HANG (124: the watchdog saw
    no step in time) is a hang on its pod's node. A hung rank stalls its peers' collectives too, so every
    node of a gang usually exits 124 together: one incident says nothing about which node it was. So a
    node becomes a suspect only after hangs in HANG_INCIDENTS (2) distinct incidents within HANG_WINDOW_S
    (6 hours); exits of the same job on the same node within INCIDENT_SPAN_S (10 minutes) are one incident.
    Exits at or before the node's last quarantine or return (QUARANTINED_AT / RETURNED_AT) are spent: they
    brought the node to its diagnostic once and never again. A job that restarts onto other nodes leaves the common node as the only one with two incidents; a job
    that hangs twice on the same nodes makes them all suspects, and the node diagnostic then decides
    (quarantine with reason HANG_REASON; quarantine.rediagnose returns the healthy ones).
    EXIT_PEER_LOST (75: another node of the job vanished) is no evidence against the pod's own node: it is
    the knock-on of someone else's loss, and is never counted. Nor is any other exit code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contract.exits import EXIT_HANG as EXIT_HANG
from contract.recovery import (
    ALERT_STRAGGLER,
    EVENT_STRAGGLER,
    QUARANTINED_AT_ANNOTATION,
    RETURNED_AT_ANNOTATION,
)
from controllers.node_return import parse_time

# The instant query the controller runs against Prometheus for (a).
STRAGGLER_QUERY = f'ALERTS{{alertname="{ALERT_STRAGGLER}",alertstate="firing"}}'
STRAGGLER_REASON = "Straggler"
HANG_REASON = "TrainerHang"
HANG_INCIDENTS = 2
HANG_WINDOW_S = 6 * 3600.0
INCIDENT_SPAN_S = 600.0
TEAM_POLICIES = ("alert", "quarantine")


@dataclass(frozen=True)
class Suspect:
    node: str
    reason: str  # STRAGGLER_REASON | HANG_REASON: the quarantine reason (the condition's, the taint value)
    action: str  # quarantine | event
    message: str
    # What the Event is, when action is "event" (Warning EVENT_STRAGGLER).
    event_reason: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """For the caller's memory of what it already did (an Event once per suspect, not every round)."""
        return (self.node, self.reason, self.message)


def straggler_suspects(alerts: Iterable[Mapping[str, Any]], team_policy: Mapping[str, str]) -> list[Suspect]:
    """Rows of a Prometheus instant query of ALERTS (each {"metric": {labels}, ...}) -> a suspect per node.

    `team_policy`: a team's namespace -> its `stragglers` setting (alert|quarantine).
    """
    by_node: dict[str, list[Mapping[str, str]]] = {}
    for row in alerts:
        labels = row.get("metric") or row.get("labels") or {}
        if labels.get("alertname") != ALERT_STRAGGLER or labels.get("alertstate", "firing") != "firing":
            continue
        if labels.get("node"):
            by_node.setdefault(labels["node"], []).append(labels)
    out = []
    for node, rows in sorted(by_node.items()):
        rows.sort(key=lambda r: (r.get("namespace", ""), r.get("job", ""), r.get("rank", "")))
        ranks = ", ".join(
            f"{r.get('namespace', '?')}/{r.get('job', '?')} rank {r.get('rank', '?')}" for r in rows
        )
        opted = [r for r in rows if team_policy.get(r.get("namespace", "")) == "quarantine"]
        message = f"straggling: {ranks} slower than its job's median for the alert's duration"
        if opted:
            out.append(Suspect(node, STRAGGLER_REASON, "quarantine", message))
        else:
            out.append(Suspect(node, STRAGGLER_REASON, "event", message, EVENT_STRAGGLER))
    return out


@dataclass(frozen=True, order=True)
class HangExit:
    """One trainer container that ended with EXIT_HANG on a node."""

    finished_at: float
    node: str
    namespace: str
    job: str
    pod: str


def hang_exits(pod: Mapping[str, Any], *, container: str, job_label: str) -> list[HangExit]:
    """The hang exits a pod shows (its trainer container's current or last termination). `container`: the
    trainer container's name (components/incluster/job_pod.py CONTAINER); `job_label`: the label naming the
    training job (components/incluster/names.py JOB_LABEL)."""
    meta, spec = pod.get("metadata", {}), pod.get("spec", {})
    node = spec.get("nodeName")
    if not node:
        return []
    found = set()
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") != container:
            continue
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            term = state.get("terminated") or {}
            finished = parse_time(term.get("finishedAt"))
            if term.get("exitCode") == EXIT_HANG and finished is not None:
                job = (meta.get("labels") or {}).get(job_label, meta.get("name", ""))
                found.add(HangExit(finished, node, meta.get("namespace", ""), job, meta.get("name", "")))
    return sorted(found)


def incidents(exits: Sequence[HangExit]) -> list[list[HangExit]]:
    """Group one node's hang exits: the same job within INCIDENT_SPAN_S of the incident's first exit."""
    groups: list[list[HangExit]] = []
    for e in sorted(set(exits)):
        for g in groups:
            if (g[0].namespace, g[0].job) == (e.namespace, e.job) and e.finished_at - g[
                0
            ].finished_at <= INCIDENT_SPAN_S:
                g.append(e)
                break
        else:
            groups.append([e])
    return groups


def spent_until(node: Mapping[str, Any]) -> float | None:
    """The node's last quarantine or return: hang exits up to then are spent."""
    ann = node.get("metadata", {}).get("annotations") or {}
    times = [t for k in (QUARANTINED_AT_ANNOTATION, RETURNED_AT_ANNOTATION) if (t := parse_time(ann.get(k)))]
    return max(times) if times else None


def hang_suspects(
    exits: Iterable[HangExit], now: float, spent: Mapping[str, float | None] | None = None
) -> list[Suspect]:
    """The nodes with hangs in at least HANG_INCIDENTS incidents within HANG_WINDOW_S before `now`.

    `exits`: every hang exit the caller has seen (pods are deleted on restart, so it remembers them);
    `spent`: node -> spent_until(node)."""
    spent = spent or {}
    by_node: dict[str, list[HangExit]] = {}
    for e in exits:
        gone = spent.get(e.node)
        if now - e.finished_at <= HANG_WINDOW_S and (gone is None or e.finished_at > gone):
            by_node.setdefault(e.node, []).append(e)
    out = []
    for node, mine in sorted(by_node.items()):
        groups = incidents(mine)
        if len(groups) >= HANG_INCIDENTS:
            jobs = ", ".join(f"{g[0].namespace}/{g[0].job}" for g in groups)
            message = (
                f"{len(groups)} trainer hangs (exit {EXIT_HANG}) within {HANG_WINDOW_S / 3600:g}h: {jobs}"
            )
            out.append(Suspect(node, HANG_REASON, "quarantine", message))
    return out
