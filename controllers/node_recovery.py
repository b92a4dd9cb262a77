"""The glue between the quarantine plan (quarantine.py) and what comes after it for a quarantined node
(node_return.py's decision) and before it (suspects.py's straggler suspects): one NodePlan per node and
round, sent by the operator (gpu_health_operator.py) as one guarded node patch.

Pure functions; standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from controllers import node_return, quarantine
from controllers.gpu_health_agent import Diag, Verdict
from controllers.quarantine import NodeEvent, NodePlan


def newest_pod(pods: list[dict]) -> dict | None:
    """The node's newest diagnostic pod not being deleted (as gpu_health_agent.diag_by_node picks it)."""
    live = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
    return max(live, key=lambda p: p.get("metadata", {}).get("creationTimestamp", ""), default=None)


def team_policy(config: dict) -> dict[str, str]:
    """A team namespace -> its `stragglers` setting, as suspects.straggler_suspects takes it (a namespace
    not listed is `alert`)."""
    return {ns: "quarantine" for ns in config.get("stragglers", {}).get("quarantineNamespaces", [])}


def decision_ops(node: dict, decision: node_return.Decision) -> list[dict[str, Any]]:
    """The decision's annotations, taints and cordon as JSON patch ops on `node` (which has annotations:
    only a quarantined node gets a decision)."""
    current = node.get("metadata", {}).get("annotations") or {}
    ops: list[dict[str, Any]] = []
    for key, value in decision.annotations.items():
        path = quarantine.pointer("metadata", "annotations", key)
        if value is None:
            if key in current:
                ops.append({"op": "remove", "path": path})
        elif current.get(key) != value:
            ops.append({"op": "add", "path": path, "value": value})
    if not current and ops:  # no annotations map yet: one op that makes it
        wanted = {k: v for k, v in decision.annotations.items() if v is not None}
        ops = [{"op": "add", "path": "/metadata/annotations", "value": wanted}] if wanted else []
    if decision.taints is not None:
        ops.append({"op": "add", "path": "/spec/taints", "value": decision.taints})
    if (
        decision.unschedulable is not None
        and bool(node.get("spec", {}).get("unschedulable")) != decision.unschedulable
    ):
        ops.append({"op": "add", "path": "/spec/unschedulable", "value": decision.unschedulable})
    return ops


@dataclass(frozen=True)
class Context:
    """What the operator knows about the node's pool and policy this round."""

    container: str  # the diagnostic's init container
    policy: node_return.Policy
    pool: node_return.Replacement
    pool_nodes: int  # how many nodes the pool has now
    evict_gpu_pods: bool
    gpu_pods: int = 0  # pods on the node that hold GPUs, terminating ones too (quarantine.holds_gpus)


def plan(
    node: dict,
    verdict: Verdict,
    ctx: Context,
    *,
    diag: Diag | None,
    diag_pod: dict | None,
    now: float,
    evidence: str = "",
) -> tuple[NodePlan, str | None]:
    """This round's plan for one node and the diagnostic pod to rerun (evict), if any.

    A node not quarantined yet follows quarantine.plan_node. A quarantined one also gets node_return's
    decision with `verdict.reasons` as its live signals: it returns only when that decision says so (a
    diagnostic that passed after the quarantine, no signal left), else it stays quarantined while the
    decision re-diagnoses, holds or hands it to replacement.
    """
    stamp = node_return.rfc3339(now)
    if not quarantine.is_quarantined(node):
        return quarantine.plan_node(
            node, verdict, now=stamp, evict_gpu_pods=ctx.evict_gpu_pods, evidence=evidence
        ), None
    run = node_return.DiagRun.of(diag_pod, ctx.container, diag.result if diag else "absent")
    decision = node_return.decide(
        node,
        diag=run,
        signals=verdict.reasons,
        policy=ctx.policy,
        pool=ctx.pool,
        pool_nodes=ctx.pool_nodes,
        gpu_pods=ctx.gpu_pods,
        now=now,
    )
    events = [NodeEvent(e.reason, e.message, e.type) for e in decision.events]
    if decision.state == "returned":
        cond = decision.condition
        condition = None
        if cond is not None:
            condition = {**cond, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
        return NodePlan(ops=decision_ops(node, decision), condition=condition, events=events), None
    base = quarantine.plan_node(
        node, verdict, now=stamp, release=False, evict_gpu_pods=ctx.evict_gpu_pods, evidence=evidence
    )
    merged = replace(base, ops=base.ops + decision_ops(node, decision), events=base.events + events)
    return merged, decision.delete_diag_pod
