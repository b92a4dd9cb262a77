"""What happens to a quarantined GPU node next: re-diagnose it, return it, hand it to replacement, or say
that a person must act. One pure function, `decide()`, on plain node dicts; the GPU health controller
(gpu_health_agent.py) applies what it returns. Standard library only: the library imports it too (controllers/__init__.py).

The rules, in the order they are checked on every round (each round may repeat them: `decide()` on a node
that already carries the result of the last round asks for nothing more, so it is idempotent):

1. Not quarantined (no QUARANTINE_TAINT, condition not True): nothing.
2. No QUARANTINED_AT_ANNOTATION (a node tainted before the loop existed): stamp it now; the clock starts.
3. Return: the node's diagnostic PASSED in a run that started at or after the quarantine, and no signal is
   active on the node now (the caller passes every reason its detectors see: assess() reasons, a firing
   straggler alert, ...). Then: remove the QUARANTINE_TAINT, uncordon only when CORDONED_BY_ANNOTATION is
   ours (an administrator's cordon stays), the condition False (reason DiagnosticPassed), our annotations
   removed and RETURNED_AT_ANNOTATION set, Event EVENT_RETURNED. A pass from before the quarantine never
   returns a node. `signals` are live detectors only; past evidence (suspects.py's hang exits) is spent by
   the quarantine and does not count here.
4. Replacement, once `replaceAfterMinutes` have passed since the quarantine and rule 3 did not return it,
   by what the node's pool has (`Replacement`, from the pool's NodePoolInfo.replacement, which the cloud
   backend that built the pool fills in):
   - `repair`: a node condition the cloud repairs on its own is False on the node now (EKS node repair:
     AcceleratedHardwareReady False for 10 minutes; GKE auto-repair: Ready False for about 10 minutes).
     Warning EVENT_REPLACING; the cloud replaces the node.
   - `autoscaler`: the cluster autoscaler scales the pool and it has more nodes than its minimum. The
     autoscaler removes an empty node after its unneeded time whatever its taints or cordon
     (kubernetes/autoscaler@cluster-autoscaler-1.33.1: core/static_autoscaler.go takes scale-down
     candidates from all nodes, core/scaledown/eligibility/eligibility.go checks neither taints nor
     spec.unschedulable; processors/nodes/pre_filtering_processor.go skips a node whose group is at its
     min size). Empty: only DaemonSet pods left (with quarantine.evictGpuPods off, once its jobs ended);
     our hold on it (below) is released. Warning EVENT_REPLACING; the job's pending pods scale a fresh
     node up.
   - `needed`: neither. The node stays quarantined; Warning EVENT_REPLACE_NEEDED, once (ALERT_REPLACE_NEEDED
     keeps reminding). A person deletes the instance, or reruns the diagnostic (delete its pod).
   The mode handed to is kept in REPLACEMENT_ANNOTATION: a later round with the same mode does nothing; a
   changed mode (the pool grew past its minimum) is announced again.
   Nothing here deletes an instance: that takes cloud credentials the controller does not hold.
5. Re-diagnose (quarantine.rediagnose) once the node's GPU pods are gone: no pod on it that requests
   `nvidia.com/gpu` and has not ended, those still terminating included (`gpu_pods`, quarantine.holds_gpus).
   An evicted trainer keeps its GPUs through its terminationGracePeriodSeconds (120 s on AWS here); a
   diagnostic started then finds them busy and ends `skipped`. Then: delete the node's diagnostic pod from
   before the quarantine (or evict it: pods/eviction is already the controller's), so its DaemonSet makes a
   new pod whose init container runs `dcgmi diag` again (gpu_health.py's diagnostic reports through that
   init container's termination message). The new pod lands on the cordoned node: the DaemonSet controller
   adds the node.kubernetes.io/unschedulable:NoSchedule toleration to its pods (Kubernetes docs, DaemonSet,
   "Taints and tolerations"), and the diagnostic tolerates our taints. Event EVENT_REDIAGNOSING;
   REDIAGNOSED_AT_ANNOTATION records it, REDIAGNOSE_ATTEMPTS_ANNOTATION counts the runs. A run since the
   quarantine that ends `skipped` (GPUs still busy: a process outlived its pod), or a deletion that did not
   take (the run from before is still there), is retried, again only with no GPU pod on the node,
   `Policy.backoff_s` after the last try and doubling each time, at most `Policy.retries` times; then the
   node waits for rule 4. A run that ends `error` is a signal (diag-error).
6. Hold (autoscaled pools, before rule 4): the autoscaler would remove the emptied node after its unneeded
   time (10 minutes on EKS here, about 10 on GKE), before a level-3 diagnostic (about 15 minutes) ends and
   before `replaceAfterMinutes`. Unless an administrator set it, the node gets the autoscaler's
   `scale-down-disabled` annotation (eligibility.go ScaleDownDisabledKey) and HOLD_ANNOTATION, both removed
   when the node returns or is handed over.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contract.recovery import (
    CONTROLLER_NAME,
    CORDONED_BY_ANNOTATION,
    EVENT_REDIAGNOSING,
    EVENT_REPLACE_NEEDED,
    EVENT_REPLACING,
    EVENT_RETURNED,
    HOLD_ANNOTATION,
    QUARANTINE_CONDITION,
    QUARANTINE_TAINT,
    QUARANTINED_AT_ANNOTATION,
    REDIAGNOSE_ATTEMPTS_ANNOTATION,
    REDIAGNOSED_AT_ANNOTATION,
    REPLACEMENT_ANNOTATION,
    RETURNED_AT_ANNOTATION,
)

# kubernetes/autoscaler@cluster-autoscaler-1.33.1: cluster-autoscaler/core/scaledown/eligibility/eligibility.go
# (HasNoScaleDownAnnotation: the value "true" keeps the node out of scale-down).
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
RETURNED_REASON = "DiagnosticPassed"


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def parse_time(value: Any) -> float | None:
    """An RFC 3339 time as Kubernetes writes it (seconds, `Z`) -> epoch seconds; None when absent or bad."""
    if not isinstance(value, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


@dataclass(frozen=True)
class DiagRun:
    """The node's newest diagnostic pod and its run: `result` as the agent reads it from the init
    container's termination message (pending|pass|fail|error|skipped), or `absent` (no pod on the node)."""

    result: str
    pod: str | None = None
    created_at: float | None = None
    started_at: float | None = None  # the init container's terminated.startedAt

    @classmethod
    def of(cls, pod: Mapping[str, Any] | None, container: str, result: str) -> DiagRun:
        """Build from the diagnostic pod (None: none on the node) and its result read by the agent."""
        if pod is None:
            return cls("absent")
        meta = pod.get("metadata", {})
        started = None
        for status in pod.get("status", {}).get("initContainerStatuses") or []:
            if status.get("name") == container:
                term = (status.get("state") or {}).get("terminated") or {}
                started = parse_time(term.get("startedAt"))
        return cls(result, meta.get("name"), parse_time(meta.get("creationTimestamp")), started)


@dataclass(frozen=True)
class Policy:
    """gpuHealth.quarantine (components/spec/platform.py)."""

    rediagnose: bool = True
    replace_after_minutes: float = 30.0
    # Rule 5: rerun only once the node's GPU pods are gone; retry a skipped run this often, after backoff_s,
    # doubling (60 s, 120 s, 240 s: the last retry starts about 7 minutes after the first run).
    wait_for_gpu_pods: bool = True
    retries: int = 3
    backoff_s: float = 60.0


@dataclass(frozen=True)
class Replacement:
    """How the node's pool is replaced (NodePoolInfo.replacement, components/outputs.py) and its size."""

    # Minutes the cluster autoscaler waits on an unneeded node; None: no autoscaler scales the pool.
    autoscaler_unneeded_minutes: int | None = None
    # Node condition -> minutes it must be False before the cloud repairs the node by itself.
    repair_conditions: Mapping[str, int] = field(default_factory=dict)
    min_nodes: int = 0

    @classmethod
    def from_config(cls, pool: Mapping[str, Any]) -> Replacement:
        """From the controller config's pool entry: {"minNodes": n, "replacement": NodePoolInfo's export}."""
        r = pool.get("replacement") or {}
        return cls(
            autoscaler_unneeded_minutes=r.get("autoscalerUnneededMinutes"),
            repair_conditions=dict(r.get("repairConditions") or {}),
            min_nodes=int(pool.get("minNodes") or 0),
        )


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    """What the controller must do to the node this round; empty when nothing."""

    # metadata.annotations merge patch: a None value removes the key.
    annotations: Mapping[str, str | None] = field(default_factory=dict)
    # The node's new spec.taints (the QUARANTINE_TAINT gone), None: unchanged.
    taints: list[dict[str, Any]] | None = None
    # spec.unschedulable to set, None: unchanged.
    unschedulable: bool | None = None
    # The QUARANTINE_CONDITION to write through nodes/status, None: unchanged.
    condition: dict[str, str] | None = None
    # The diagnostic pod to delete (in the diagnostic's namespace), None: none.
    delete_diag_pod: str | None = None
    events: tuple[Event, ...] = ()
    state: str = "none"  # none|returned|repair|autoscaler|needed|rediagnosing|waiting

    def __bool__(self) -> bool:
        return bool(
            self.annotations
            or self.taints is not None
            or self.unschedulable is not None
            or self.condition is not None
            or self.delete_diag_pod
            or self.events
        )


@dataclass(frozen=True)
class Round:
    """What decide() was told about the node this round (its keyword arguments)."""

    diag: DiagRun
    signals: Sequence[str]
    policy: Policy
    pool: Replacement
    pool_nodes: int
    gpu_pods: int


def is_quarantined(node: Mapping[str, Any]) -> bool:
    taints = node.get("spec", {}).get("taints") or []
    if any(t.get("key") == QUARANTINE_TAINT for t in taints):
        return True
    return any(
        c.get("type") == QUARANTINE_CONDITION and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions") or []
    )


def false_conditions(node: Mapping[str, Any]) -> set[str]:
    return {
        c.get("type", "")
        for c in node.get("status", {}).get("conditions") or []
        if c.get("status") == "False"
    }


def replacement_mode(node: Mapping[str, Any], pool: Replacement, pool_nodes: int) -> tuple[str, str]:
    """(repair|autoscaler|needed, why) for a node that is due for replacement."""
    repairing = sorted(false_conditions(node) & set(pool.repair_conditions))
    if repairing:
        c = repairing[0]
        return "repair", f"{c}=False: the cloud's node repair replaces it after {pool.repair_conditions[c]}m"
    if pool.autoscaler_unneeded_minutes is not None:
        if pool_nodes > pool.min_nodes:
            return "autoscaler", (
                f"released to the cluster autoscaler, which removes it once empty for "
                f"{pool.autoscaler_unneeded_minutes}m; pending pods scale up a fresh node"
            )
        why = f"the pool is at its minimum ({pool_nodes}/{pool.min_nodes} nodes), so the autoscaler keeps it"
    else:
        why = "nothing replaces a node of this pool"
    return "needed", f"{why}: delete the instance, or rerun the diagnostic by deleting its pod"


def _release_hold(ann: Mapping[str, str]) -> dict[str, str | None]:
    if ann.get(HOLD_ANNOTATION) is None:
        return {}
    return {HOLD_ANNOTATION: None, SCALE_DOWN_DISABLED: None}


def _return(node: Mapping[str, Any], ann: Mapping[str, str], now: float) -> Decision:
    taints = [t for t in node.get("spec", {}).get("taints") or [] if t.get("key") != QUARANTINE_TAINT]
    ours = ann.get(CORDONED_BY_ANNOTATION) == CONTROLLER_NAME
    drop = (
        QUARANTINED_AT_ANNOTATION,
        REDIAGNOSED_AT_ANNOTATION,
        REDIAGNOSE_ATTEMPTS_ANNOTATION,
        REPLACEMENT_ANNOTATION,
        CORDONED_BY_ANNOTATION,
    )
    annotations: dict[str, str | None] = {k: None for k in drop if k in ann}
    annotations.update(_release_hold(ann))
    annotations[RETURNED_AT_ANNOTATION] = rfc3339(now)
    kept = (
        "" if ours or not node.get("spec", {}).get("unschedulable") else " (still cordoned by someone else)"
    )
    return Decision(
        annotations=annotations,
        taints=taints,
        unschedulable=False if ours else None,
        condition={
            "type": QUARANTINE_CONDITION,
            "status": "False",
            "reason": RETURNED_REASON,
            "message": f"diagnostic passed after the quarantine and no fault signal remains ({rfc3339(now)})",
        },
        events=(
            Event("Normal", EVENT_RETURNED, f"GPU diagnostic passed, no fault signal left: returned{kept}"),
        ),
        state="returned",
    )


def decide(
    node: Mapping[str, Any],
    *,
    diag: DiagRun,
    signals: Sequence[str],
    policy: Policy,
    pool: Replacement,
    pool_nodes: int,
    gpu_pods: int,
    now: float,
) -> Decision:
    """The next step for one node (see the module docstring). `signals`: the fault reasons active on the node
    now; `pool_nodes`: how many nodes its pool has in the cluster (the autoscaler keeps a pool at its min);
    `gpu_pods`: how many pods on the node still hold GPUs (quarantine.holds_gpus: terminating ones too)."""
    if not is_quarantined(node):
        return Decision()
    ann: dict[str, str] = dict(node.get("metadata", {}).get("annotations") or {})
    since = parse_time(ann.get(QUARANTINED_AT_ANNOTATION))
    run = Round(diag, signals, policy, pool, pool_nodes, gpu_pods)
    if since is None:  # the clock starts now, and this round goes on from there
        d = _decide(node, now, now, run)
        return replace(d, annotations={QUARANTINED_AT_ANNOTATION: rfc3339(now), **d.annotations})
    return _decide(node, since, now, run)


def _decide(
    node: Mapping[str, Any],
    since: float,
    now: float,
    run: Round,
) -> Decision:
    diag, signals, policy, pool = run.diag, run.signals, run.policy, run.pool
    ann: dict[str, str] = dict(node.get("metadata", {}).get("annotations") or {})
    if diag.result == "pass" and diag.started_at is not None and diag.started_at >= since and not signals:
        return _return(node, ann, now)
    if now - since >= policy.replace_after_minutes * 60:
        mode, why = replacement_mode(node, pool, run.pool_nodes)
        if ann.get(REPLACEMENT_ANNOTATION) == mode:
            return Decision(state=mode)
        reason = EVENT_REPLACE_NEEDED if mode == "needed" else EVENT_REPLACING
        still = (
            f"still quarantined after {policy.replace_after_minutes:g}m "
            f"({', '.join(signals) or f'no pass, last run {diag.result}'})"
        )
        annotations: dict[str, str | None] = {REPLACEMENT_ANNOTATION: mode}
        if mode != "needed":
            annotations.update(_release_hold(ann))
        return Decision(
            annotations=annotations, events=(Event("Warning", reason, f"{still}: {why}"),), state=mode
        )
    annotations = {}
    events: list[Event] = []
    delete = None
    state = "waiting"
    attempt = _rerun(ann, since, now, diag, policy, run.gpu_pods)
    if attempt:
        delete = diag.pod
        annotations[REDIAGNOSED_AT_ANNOTATION] = rfc3339(now)
        annotations[REDIAGNOSE_ATTEMPTS_ANNOTATION] = str(attempt)
        why = f", retry {attempt - 1}/{policy.retries}: the last run was skipped (GPUs busy)"
        message = f"rerunning the GPU diagnostic (pod {diag.pod}{why if attempt > 1 else ''})"
        events.append(Event("Normal", EVENT_REDIAGNOSING, message))
        state = "rediagnosing"
    if pool.autoscaler_unneeded_minutes is not None and SCALE_DOWN_DISABLED not in ann:
        # Keep the autoscaler from removing the node before the diagnostic and replaceAfterMinutes decide.
        annotations.update({SCALE_DOWN_DISABLED: "true", HOLD_ANNOTATION: CONTROLLER_NAME})
    return Decision(annotations=annotations, delete_diag_pod=delete, events=tuple(events), state=state)


def _rerun(
    ann: Mapping[str, str], since: float, now: float, diag: DiagRun, policy: Policy, gpu_pods: int
) -> int:
    """Rule 5: the number of the diagnostic run to start now (1: the first of this quarantine), 0: none."""
    if not policy.rediagnose or diag.pod is None or (policy.wait_for_gpu_pods and gpu_pods > 0):
        return 0
    last = parse_time(ann.get(REDIAGNOSED_AT_ANNOTATION))
    # Still the run from before the quarantine: none of ours yet, or our deletion did not take (refused).
    stale = diag.created_at is None or diag.created_at < since
    if last is None or last < since:  # none in this quarantine yet
        return 1 if stale or diag.result == "skipped" else 0
    count = ann.get(REDIAGNOSE_ATTEMPTS_ANNOTATION, "1")
    done = int(count) if count.isdigit() and int(count) > 0 else 1
    due = now >= last + policy.backoff_s * 2 ** (done - 1)
    return done + 1 if (diag.result == "skipped" or stale) and done <= policy.retries and due else 0
