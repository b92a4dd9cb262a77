"""What quarantining (or returning) one GPU node means, as data: the node patch, the condition, the Events
and whether its GPU pods go. Pure functions of the node and the verdict; the operator
(gpu_health_operator.py) sends them.

It uses the standard library and the contract (contract/recovery.py) only.

Quarantine (issue 19): the QUARANTINE_TAINT (NoSchedule, value = the first reason), the node cordoned
(`spec.unschedulable`, so no pod that tolerates every taint lands either) with CORDONED_BY_ANNOTATION when we
cordoned it, QUARANTINED_AT_ANNOTATION, the QUARANTINE_CONDITION True with the reason and the evidence, a
Warning Event on the Node, and the pods that request GPUs evicted. A return undoes only what we did: an
administrator's cordon (unschedulable without our annotation) is never lifted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from contract.recovery import (
    CONTROLLER_NAME,
    CORDONED_BY_ANNOTATION,
    EVENT_QUARANTINED,
    EVENT_RETURNED,
    QUARANTINE_CONDITION,
    QUARANTINED_AT_ANNOTATION,
)
from controllers.gpu_health_agent import GPU_RESOURCE, Verdict, desired_taints


@dataclass(frozen=True)
class NodeEvent:
    reason: str
    message: str
    type: str = "Normal"


@dataclass(frozen=True)
class NodePlan:
    """What to send for one node; empty when the node is as it should be."""

    # JSON patch ops on the node (after a `test` of its resourceVersion, added by the sender).
    ops: list[dict[str, Any]] = field(default_factory=list)
    # The QUARANTINE_CONDITION to merge into status.conditions (nodes/status), or None.
    condition: dict[str, Any] | None = None
    events: list[NodeEvent] = field(default_factory=list)
    # Evict the node's GPU pods (quarantined and gpuHealth.quarantine.evictGpuPods).
    evict: bool = False


def condition_reason(reason: str) -> str:
    """A verdict reason as a condition reason, CamelCase (`xid-79` -> `Xid79`, `diag-failed` ->
    `DiagFailed`): the form metav1.Condition's reason takes (^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$,
    kubernetes/apimachinery pkg/apis/meta/v1/types.go)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", reason) if w]
    out = "".join(w[:1].upper() + w[1:] for w in words)
    return out if out[:1].isalpha() else f"Gpu{out}"


def holds_gpus(pod: dict) -> bool:
    """A pod that holds GPUs of its node: one of its containers requests or is limited to `nvidia.com/gpu`
    (extended resources: requests default to limits), it is not owned by a DaemonSet (the GPU stack's own
    agents must keep running there) and it has not ended (phase Succeeded or Failed). One being deleted
    still holds them until its containers exit (its termination grace period): a diagnostic started then
    finds them busy (node_return.py rule 5)."""
    if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if any(o.get("kind") == "DaemonSet" for o in pod.get("metadata", {}).get("ownerReferences") or []):
        return False
    spec = pod.get("spec", {})
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if str((res.get(part) or {}).get(GPU_RESOURCE, "0")) not in ("0", ""):
                return True
    return False


def is_gpu_pod(pod: dict) -> bool:
    """A pod to evict from a quarantined node: it holds GPUs and is not being deleted already."""
    return holds_gpus(pod) and not pod.get("metadata", {}).get("deletionTimestamp")


def pointer(*parts: str) -> str:
    # RFC 6901: "~" -> "~0", "/" -> "~1" (annotation keys carry a "/").
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def _condition(node: dict) -> dict | None:
    for cond in node.get("status", {}).get("conditions") or []:
        if cond.get("type") == QUARANTINE_CONDITION:
            return cond
    return None


def is_quarantined(node: dict) -> bool:
    """The node carries our quarantine (annotation or condition True)."""
    annotations = node.get("metadata", {}).get("annotations") or {}
    cond = _condition(node)
    return QUARANTINED_AT_ANNOTATION in annotations or (cond is not None and cond.get("status") == "True")


def plan_node(
    node: dict,
    verdict: Verdict,
    *,
    now: str,
    release: bool = True,
    evict_gpu_pods: bool = True,
    evidence: str = "",
) -> NodePlan:
    """The patch, condition, Events and eviction that bring `node` to what `verdict` asks for.

    `now` is RFC 3339. `release` says whether a quarantined node whose verdict is clean returns; the
    operator always passes False (node_recovery.py: a quarantined node returns by node_return's decision,
    after a diagnostic that passed since) and True is the plain rule "returns once no fault shows".
    `evict_gpu_pods` (gpuHealth.quarantine.evictGpuPods) cordons the node and evicts its GPU pods; without
    it the taint, the condition and the Event only.
    """
    quarantined = is_quarantined(node)
    if not verdict.reasons and quarantined and not release:
        return NodePlan()  # held in quarantine until the return decision says so
    ops: list[dict[str, Any]] = []
    taints = desired_taints(node, verdict)
    if sorted(map(repr, taints)) != sorted(map(repr, node.get("spec", {}).get("taints") or [])):
        ops.append({"op": "add", "path": "/spec/taints", "value": taints})
    if verdict.reasons:
        marked = QUARANTINED_AT_ANNOTATION in (node.get("metadata", {}).get("annotations") or {})
        return _quarantine(node, verdict, ops, now, evict_gpu_pods, evidence, marked)
    if quarantined:
        return _release(node, ops, now)
    return NodePlan(ops=ops)


def _quarantine(
    node: dict, verdict: Verdict, ops: list, now: str, cordon: bool, evidence: str, already: bool
) -> NodePlan:
    annotations = node.get("metadata", {}).get("annotations") or {}
    reason = condition_reason(verdict.reasons[0])
    message = ", ".join(verdict.reasons) + (f": {evidence}" if evidence else "")
    wanted: dict[str, str] = {}
    if QUARANTINED_AT_ANNOTATION not in annotations:
        wanted[QUARANTINED_AT_ANNOTATION] = now
    if cordon and not node.get("spec", {}).get("unschedulable"):
        # Cordoned by us: recorded, so a return lifts only our cordon, never an administrator's.
        ops.append({"op": "add", "path": "/spec/unschedulable", "value": True})
        wanted[CORDONED_BY_ANNOTATION] = CONTROLLER_NAME
    if wanted and not annotations:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": wanted})
    else:
        ops += [
            {"op": "add", "path": pointer("metadata", "annotations", k), "value": v}
            for k, v in wanted.items()
        ]
    cond = _condition(node)
    condition = None
    same = cond is not None and cond.get("status") == "True" and cond.get("reason") == reason
    if not same or (cond or {}).get("message") != message:
        since = (cond or {}).get("lastTransitionTime") if same else None
        condition = _cond("True", reason, message, now, since or now)
    # Announced with the write that marks the node quarantined (one guarded patch wins), so a node
    # event racing our own writes never announces it twice.
    events = [] if already else [NodeEvent(EVENT_QUARANTINED, f"quarantined: {message}", "Warning")]
    return NodePlan(ops=ops, condition=condition, events=events, evict=cordon)


def _release(node: dict, ops: list, now: str) -> NodePlan:
    annotations = node.get("metadata", {}).get("annotations") or {}
    if QUARANTINED_AT_ANNOTATION in annotations:
        ops.append({"op": "remove", "path": pointer("metadata", "annotations", QUARANTINED_AT_ANNOTATION)})
    if annotations.get(CORDONED_BY_ANNOTATION) == CONTROLLER_NAME:
        ops.append({"op": "remove", "path": pointer("metadata", "annotations", CORDONED_BY_ANNOTATION)})
        if node.get("spec", {}).get("unschedulable"):
            ops.append({"op": "remove", "path": "/spec/unschedulable"})
    cond = _condition(node)
    condition = None
    if cond is not None and cond.get("status") != "False":
        condition = _cond("False", "Returned", "the GPU faults cleared", now, now)
    events = []
    if QUARANTINED_AT_ANNOTATION in annotations:  # with the write that unmarks it, as above
        events.append(NodeEvent(EVENT_RETURNED, "returned to service: the GPU faults cleared"))
    return NodePlan(ops=ops, condition=condition, events=events)


def _cond(status: str, reason: str, message: str, now: str, since: str) -> dict[str, Any]:
    return {
        "type": QUARANTINE_CONDITION,
        "status": status,
        "reason": reason,
        "message": message[:1000],
        "lastHeartbeatTime": now,
        "lastTransitionTime": since,
    }
