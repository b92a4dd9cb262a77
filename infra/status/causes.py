"""Why a training job restarted: one cause per restart, from what the cluster still holds (pure).

The evidence, strongest first: the pods of the failed attempt (the trainer container's exit code, read with
trainer/contract.py; the DisruptionTarget pod condition and its reason), the quarantine the GPU health
controller put on their nodes (contract/recovery.py), Events on the pods, the nodes and the
Kueue Workload in the restart's window, and last the JobSet failure-policy rule that fired (its name is in
the JobSet's `FailurePolicy_<rule>` Event: components/incluster/job_runtime.py names the rules).

A restart has one cause, the first that applies in CAUSES order: a configuration error fails the job
whatever else happened; a node fault or a preemption explains the exits of the ranks that lost a peer
(exit 75) and is named rather than them; a hang or crash on one rank explains its peers' exit 75 as well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from components.incluster.job_pod import CONTAINER
from components.incluster.job_runtime import RULE_CONFIG, RULE_OTHER, RULE_PEER_LOST, RULE_PREEMPTED
from contract.recovery import EVENT_EVICTED, EVENT_QUARANTINED, QUARANTINE_CONDITION
from trainer import contract

# A quarantine stamped this long after a restart is still its cause (the controller writes the node
# condition and evicts; the JobSet restarts when the evicted pods are gone).
SLACK_S = 60.0
CONFIG_ERROR, NODE_FAULT, PREEMPTION = "config error", "node fault", "preemption"
HANG, CRASH, PEER_LOSS = "hang", "crash", "peer loss"
EVICTED, UNKNOWN = "evicted", "unknown"  # Kueue evicted it for another reason (e.g. PodsReadyTimeout)
CAUSES = (CONFIG_ERROR, NODE_FAULT, PREEMPTION, HANG, CRASH, PEER_LOSS, EVICTED, UNKNOWN)

DISRUPTION_TARGET = "DisruptionTarget"
# The reasons Kubernetes gives the DisruptionTarget pod condition (kubernetes.io docs, "Disruptions",
# section "Pod disruption conditions"; k8s.io/api core/v1 PodReasonPreemptionByScheduler,
# PodReasonTerminationByKubelet; the taint manager, eviction API and pod GC set the other three). The
# node went away or became unreachable: a node fault. The scheduler, a drain or the kubelet's graceful
# shutdown (a spot reclaim notice) took the pod away from a node that still works: a preemption.
# (PreemptionByScheduler, EvictionByEvictionAPI, TerminationByKubelet and any reason added later).
NODE_LOST_REASONS = ("DeletionByTaintManager", "DeletionByPodGC")
# Pod Events with the same meaning (kubernetes pkg/controller/tainteviction "TaintManagerEviction"; the
# scheduler's "Preempted" on the victim) and the GPU health controller's own eviction Event.
NODE_FAULT_POD_EVENTS = (EVENT_EVICTED, "TaintManagerEviction")
PREEMPTION_POD_EVENTS = ("Preempted",)
# Kueue's eviction Events on the Workload: reason "Evicted" + "DueTo" + the eviction reason (kueue
# v0.19.2 pkg/workload/patching/patching.go ReasonWithCause, pkg/workload/evict/evict.go; reasons in
# apis/kueue/v1beta2/workload_types.go WorkloadEvictedByPreemption, WorkloadEvictedDueToNodeFailures).
KUEUE_PREEMPTED, KUEUE_NODE_FAILURES = "Preempted", "NodeFailures"
# What each JobSet failure-policy rule of the job means (components/incluster/job_runtime.py).
RULE_CAUSES: Mapping[str, str] = {
    RULE_CONFIG: CONFIG_ERROR,
    RULE_PREEMPTED: PREEMPTION,
    RULE_PEER_LOST: PEER_LOSS,
    RULE_OTHER: CRASH,
}


@dataclass(frozen=True)
class Evidence:
    """What is known about one restart: the failed attempt's pods, their nodes (name -> Node), the Events
    of the restart's window, and the failure-policy rule that fired (None: not known)."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    nodes: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    rule: str | None = None
    kueue_reason: str | None = None  # a Kueue eviction (Preempted, NodeFailures, PodsReadyTimeout, ...)
    # When the restart happened (unix seconds): a node quarantined after it did not cause it.
    at: float | None = None


@dataclass(frozen=True)
class Cause:
    cause: str  # one of CAUSES
    evidence: str  # one line: what says so


def trainer_exit_code(pod: Mapping[str, Any]) -> int | None:
    """The trainer container's exit code, from its current or last terminated state (None: not exited)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != CONTAINER:
            continue
        for key in ("state", "lastState"):
            terminated = (status.get(key) or {}).get("terminated")
            if terminated and terminated.get("exitCode") is not None:
                return int(terminated["exitCode"])
    return None


def disruption_reason(pod: Mapping[str, Any]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == DISRUPTION_TARGET and cond.get("status") == "True":
            return str(cond.get("reason") or "")
    return None


def quarantine(node: Mapping[str, Any] | None, before: float | None = None) -> str | None:
    """The reason of the node's QUARANTINE_CONDITION while True (e.g. Xid79), else None; with `before`,
    only a quarantine that began before then (and a little after: the restart follows the eviction)."""
    for cond in ((node or {}).get("status") or {}).get("conditions") or []:
        since = cond.get("lastTransitionTime")
        if before is not None and since and datetime.fromisoformat(since).timestamp() > before + SLACK_S:
            continue
        if cond.get("type") == QUARANTINE_CONDITION and cond.get("status") == "True":
            message = f": {cond['message']}" if cond.get("message") else ""
            return f"{cond.get('reason') or 'quarantined'}{message}"
    return None


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "?"))


def _events(
    events: Iterable[Mapping[str, Any]], kind: str, reasons: tuple[str, ...]
) -> list[Mapping[str, Any]]:
    return [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("kind") == kind and e.get("reason") in reasons
    ]


def classify(ev: Evidence) -> Cause:
    """The cause of one restart: the first rule of RULES that finds evidence (module docstring)."""
    exits = {_name(p): code for p in ev.pods if (code := trainer_exit_code(p)) is not None}
    for cause, rule in RULES:
        if (found := rule(ev, exits)) is not None:
            return Cause(cause, found)
    # No pod of the attempt is left (a JobSet restart deletes them): the rule that fired says it.
    if ev.rule is not None and ev.rule in RULE_CAUSES:
        return Cause(RULE_CAUSES[ev.rule], f"JobSet rule {ev.rule} (the pods are gone)")
    if ev.kueue_reason:
        return Cause(EVICTED, f"Kueue evicted the workload ({ev.kueue_reason})")
    return Cause(UNKNOWN, "no pod, Event or rule of this restart is left")


def _exited(exits: Mapping[str, int], match: Callable[[int], bool]) -> str | None:
    for pod, code in exits.items():
        if match(code):
            return f"pod {pod} exited {code}: {contract.exit_meaning(code)}"
    return None


def _config_error(ev: Evidence, exits: Mapping[str, int]) -> str | None:
    if found := _exited(exits, lambda c: contract.exit_action(c) == "fail"):
        return found
    return f"JobSet rule {ev.rule}" if RULE_CAUSES.get(ev.rule or "") == CONFIG_ERROR else None


def _hang(ev: Evidence, exits: Mapping[str, int]) -> str | None:
    return _exited(exits, lambda c: c == contract.EXIT_HANG)


def _crash(ev: Evidence, exits: Mapping[str, int]) -> str | None:
    return _exited(exits, lambda c: contract.exit_action(c) == "count")


def _peer_loss(ev: Evidence, exits: Mapping[str, int]) -> str | None:
    return _exited(exits, lambda c: c in contract.RETRY_PEER_LOST)


def _node_fault(ev: Evidence, exits: Mapping[str, int]) -> str | None:
    for pod in ev.pods:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if node and (why := quarantine(ev.nodes.get(node), ev.at)):
            return f"node {node} quarantined ({why}); pod {_name(pod)}"
        if node and _events(
            (e for e in ev.events if (e.get("involvedObject") or {}).get("name") == node),
            "Node",
            (EVENT_QUARANTINED,),
        ):
            return f"node {node} quarantined ({EVENT_QUARANTINED} Event); pod {_name(pod)}"
        if (reason := disruption_reason(pod)) in NODE_LOST_REASONS:
            return f"pod {_name(pod)} {DISRUPTION_TARGET} {reason} on node {node or '?'}"
    for e in _events(ev.events, "Pod", NODE_FAULT_POD_EVENTS):
        message = f" ({e['message']})" if e.get("message") else ""
        return f"pod {e['involvedObject'].get('name')}: {e.get('reason')} Event{message}"
    if ev.kueue_reason == KUEUE_NODE_FAILURES:
        return f"Kueue evicted the workload ({KUEUE_NODE_FAILURES})"
    return None


def _preemption(ev: Evidence, exits: Mapping[str, int]) -> str | None:
    for p in ev.pods:
        if (reason := disruption_reason(p)) is not None:
            return f"pod {_name(p)} {DISRUPTION_TARGET} {reason or '(no reason)'}"
    for pod, code in exits.items():
        if code in contract.RETRY_WITHOUT_COUNTING:
            return f"pod {pod} exited {code}: {contract.exit_meaning(code)}"
    for e in _events(ev.events, "Pod", PREEMPTION_POD_EVENTS):
        return f"pod {e['involvedObject'].get('name')}: Preempted Event"
    if ev.kueue_reason == KUEUE_PREEMPTED:
        return f"Kueue evicted the workload ({KUEUE_PREEMPTED})"
    return None


# In order: the first rule that finds evidence names the cause.
RULES: tuple[tuple[str, Callable[[Evidence, Mapping[str, int]], str | None]], ...] = (
    (CONFIG_ERROR, _config_error),
    (NODE_FAULT, _node_fault),
    (PREEMPTION, _preemption),
    (HANG, _hang),
    (CRASH, _crash),
    (PEER_LOSS, _peer_loss),
)
