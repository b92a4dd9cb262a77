"""A node and taint model for the fault campaign: nodes with labels, taints and a cordon, the GPU health
controller's quarantine (the names of contract/recovery.py), the node lifecycle
controller's taints on a lost node, and a placer that puts a pod only where the scheduler would.

The placer follows the kube-scheduler's filter plugins (kubernetes pkg/scheduler/framework/plugins; read:
nodeunschedulable/node_unschedulable.go and k8s.io/api core/v1 toleration.go ToleratesTaint; the others
as documented), for the fields the job builder's pod template uses and no further:
- NodeUnschedulable: a cordoned node (spec.unschedulable) takes a pod only if the pod tolerates the
  ``node.kubernetes.io/unschedulable:NoSchedule`` taint;
- TaintToleration: every taint with effect NoSchedule or NoExecute must be tolerated (PreferNoSchedule is
  a score, not a filter); toleration matching as core/v1 Toleration.ToleratesTaint (an empty key with
  operator Exists matches every taint; an empty effect matches every effect; operator Equal compares values);
- NodeAffinity: spec.nodeSelector (every label equal) and requiredDuringSchedulingIgnoredDuringExecution
  nodeSelectorTerms (terms ORed, matchExpressions ANDed: In, NotIn, Exists, DoesNotExist, Gt, Lt);
- InterPodAffinity: required podAntiAffinity terms (no pod matching the labelSelector in the same
  topologyKey domain);
- NodeResourcesFit: extended resources (``nvidia.com/gpu``) requested against what is free on the node.
Among the nodes that pass, the first by name wins (the scheduler scores; the campaign wants determinism).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contract.recovery import (
    CONTROLLER_NAME,
    CORDONED_BY_ANNOTATION,
    EVENT_EVICTED,
    EVENT_QUARANTINED,
    EVENT_STRAGGLER,
    QUARANTINE_CONDITION,
    QUARANTINE_TAINT,
    QUARANTINED_AT_ANNOTATION,
)

GPU = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"
# The node lifecycle controller's taints on a node that stopped reporting (kubernetes
# pkg/controller/nodelifecycle, as documented: a NoSchedule one by condition, a NoExecute one that evicts).
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


class Unschedulable(Exception):
    """No node passes the filters: the pod stays Pending (the message names each node's reason)."""


@dataclass
class Node:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]] = field(default_factory=list)
    gpus: int = 8
    unschedulable: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def quarantined(self) -> bool:
        cond = self.conditions.get(QUARANTINE_CONDITION)
        return any(t["key"] == QUARANTINE_TAINT for t in self.taints) or bool(
            cond and cond["status"] == "True"
        )


@dataclass
class Placed:
    pod: str
    node: str
    labels: dict[str, str]
    gpus: int


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """core/v1 Toleration.ToleratesTaint over a pod's tolerations."""
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint["effect"]:
            continue
        op = tol.get("operator", "Equal")
        if not tol.get("key"):
            if op == "Exists":
                return True
            continue
        if tol["key"] != taint["key"]:
            continue
        if op == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if key not in labels:
        return False
    value, bound = int(labels[key]), int(values[0])
    return value > bound if op == "Gt" else value < bound


def _selector(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression(e, labels) for e in selector.get("matchExpressions") or [])


def _resources(spec: Mapping[str, Any]) -> int:
    return sum(int((c.get("resources") or {}).get("requests", {}).get(GPU, 0)) for c in spec["containers"])


class Cluster:
    """Nodes, the pods placed on them, and the Events the controllers wrote (reason, object, message)."""

    def __init__(self, nodes: Sequence[Node] = ()) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.pods: dict[str, Placed] = {}
        self.events: list[tuple[str, str, str]] = []

    # ---- the scheduler ------------------------------------------------------------------------------
    def why_not(self, spec: Mapping[str, Any], labels: Mapping[str, str], node: Node) -> str | None:
        """The first filter that rejects ``node`` for a pod of this spec, or None when it fits."""
        tolerations = spec.get("tolerations") or []
        if node.unschedulable and not tolerates(tolerations, {"key": UNSCHEDULABLE, "effect": "NoSchedule"}):
            return "unschedulable (cordoned)"
        for taint in node.taints:
            if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                return f"untolerated taint {taint['key']}={taint.get('value', '')}:{taint['effect']}"
        if any(node.labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
            return "nodeSelector does not match"
        why = self._affinity(spec.get("affinity") or {}, node)
        used = sum(p.gpus for p in self.pods.values() if p.node == node.name)
        if why is None and _resources(spec) > node.gpus - used:
            return f"insufficient {GPU}"
        return why

    def _affinity(self, affinity: Mapping[str, Any], node: Node) -> str | None:
        required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        if required and not any(
            all(_expression(e, node.labels) for e in term.get("matchExpressions") or [])
            for term in required["nodeSelectorTerms"]
        ):
            return "node affinity does not match"
        anti = (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        for term in anti or []:
            domain = node.labels.get(term["topologyKey"])
            for other in self.pods.values():
                there = self.nodes.get(other.node)
                if there and domain is not None and there.labels.get(term["topologyKey"]) == domain:
                    if _selector(term["labelSelector"], other.labels):
                        return f"pod anti-affinity with {other.pod}"
        return None

    def place(self, pod: str, spec: Mapping[str, Any], labels: Mapping[str, str]) -> str:
        """Bind ``pod`` to the first node that passes every filter; Unschedulable if none does."""
        reasons = {}
        for name in sorted(self.nodes):
            why = self.why_not(spec, labels, self.nodes[name])
            if why is None:
                self.pods[pod] = Placed(pod, name, dict(labels), _resources(spec))
                return name
            reasons[name] = why
        raise Unschedulable(f"0/{len(self.nodes)} nodes are available for {pod}: {reasons}")

    def remove_pod(self, pod: str) -> None:
        self.pods.pop(pod, None)

    def pods_on(self, node: str) -> list[str]:
        return sorted(p.pod for p in self.pods.values() if p.node == node)

    # ---- the controllers ------------------------------------------------------------------------------
    def add(self, node: Node) -> None:
        self.nodes[node.name] = node

    def quarantine(
        self, node: str, reason: str, message: str, at: dt.datetime, *, evict: bool = True
    ) -> list[str]:
        """The GPU health controller's quarantine (the contract in contract/recovery.py and ISSUE19: taint,
        cordon marked as ours, condition, annotation, Event); returns the GPU pods it evicts."""
        n = self.nodes[node]
        n.taints.append({"key": QUARANTINE_TAINT, "value": reason, "effect": "NoSchedule"})
        n.unschedulable = True
        n.annotations[CORDONED_BY_ANNOTATION] = CONTROLLER_NAME
        n.annotations[QUARANTINED_AT_ANNOTATION] = at.isoformat().replace("+00:00", "Z")
        n.conditions[QUARANTINE_CONDITION] = {"status": "True", "reason": reason, "message": message}
        self.events.append((EVENT_QUARANTINED, f"node/{node}", message))
        evicted = [p for p in self.pods_on(node) if self.pods[p].gpus > 0] if evict else []
        for pod in evicted:
            self.events.append((EVENT_EVICTED, f"pod/{pod}", f"node {node} quarantined: {reason}"))
            self.remove_pod(pod)
        return evicted

    def straggler(self, node: str, message: str) -> None:
        """A team that keeps `stragglers: alert`: an Event on the node, nothing else."""
        self.events.append((EVENT_STRAGGLER, f"node/{node}", message))

    def lose(self, node: str) -> None:
        """The node stopped reporting: the node lifecycle controller's unreachable taints."""
        n = self.nodes[node]
        n.conditions["Ready"] = {"status": "Unknown", "reason": "NodeStatusUnknown", "message": "lost"}
        for effect in ("NoSchedule", "NoExecute"):
            n.taints.append({"key": UNREACHABLE, "value": "", "effect": effect})

    def delete(self, node: str) -> list[str]:
        """The instance is gone (spot reclaim, replacement): the Node object and its pods go too."""
        gone = self.pods_on(node)
        for pod in gone:
            self.remove_pod(pod)
        del self.nodes[node]
        return gone


def pool_node(pool: Mapping[str, Any], name: str, **labels: str) -> Node:
    """A node of a platform node pool (PlatformOutputs.nodePools[]: its labels, taints and GPUs)."""
    taints = [dict(t) for t in pool.get("taints") or []]
    return Node(
        name, {**pool["labels"], **labels, HOSTNAME: name}, taints, gpus=int(pool.get("gpusPerNode") or 0)
    )


def pool_cluster(pools: Sequence[Mapping[str, Any]], gpu_pool: str, size: int) -> Cluster:
    """``size`` nodes of ``gpu_pool`` and one of every other pool, as the platform defines them, plus a
    node the job must avoid: one of the same GPU pool but on-demand (its capacity label differs)."""
    nodes = []
    for pool in pools:
        for i in range(size if pool["name"] == gpu_pool else 1):
            nodes.append(pool_node(pool, f"{pool['name']}-{i}"))
    (gpu,) = [p for p in pools if p["name"] == gpu_pool]
    nodes.append(pool_node(gpu, f"{gpu_pool}-od-0", **{"trainplane.dev/capacity": "on-demand"}))
    return Cluster(nodes)
