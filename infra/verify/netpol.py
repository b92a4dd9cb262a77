"""A small NetworkPolicy evaluator: does a set of policies let one connection through?

Peers are pods (namespace + labels) or, with namespace None, addresses outside the pod network. The
semantics follow the Kubernetes NetworkPolicy API: a pod is isolated for a direction once any policy of
its namespace selects it with that policy type; then a connection passes only when some rule of some
selecting policy allows it (peer and port). Both ends must allow: egress of the source, ingress of the
destination. ipBlock peers never match pods here (pod IPs are not in the platforms' ipBlocks).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Peer:
    """A pod (namespace + labels) or, with namespace None, an address outside the cluster."""

    namespace: str | None
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    ip: str | None = None

    def describe(self) -> str:
        if self.namespace is None:
            return str(self.ip)
        for key in ("trainplane.dev/job", "k8s-app", "app.kubernetes.io/name"):
            if key in self.labels:
                return f"{self.namespace}/{key}={self.labels[key]}"
        return f"{self.namespace}/{{{','.join(f'{k}={v}' for k, v in sorted(self.labels.items()))}}}"


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        has, val = e["key"] in labels, labels.get(e["key"])
        ok = {
            "In": has and val in e.get("values", []),
            "NotIn": not has or val not in e.get("values", []),
            "Exists": has,
            "DoesNotExist": not has,
        }[e["operator"]]
        if not ok:
            return False
    return True


def peer_matches(rule_peer: Mapping[str, Any], peer: Peer, policy_ns: str) -> bool:
    if "ipBlock" in rule_peer:
        return _block_matches(rule_peer["ipBlock"], peer)
    if peer.namespace is None:
        return False
    ns_sel = rule_peer.get("namespaceSelector")
    if ns_sel is None:
        same_ns = peer.namespace == policy_ns
    else:
        same_ns = selects(ns_sel, {NAMESPACE_LABEL: peer.namespace})
    pod_sel = rule_peer.get("podSelector")
    return same_ns and (pod_sel is None or selects(pod_sel, peer.labels))


def _block_matches(block: Mapping[str, Any], peer: Peer) -> bool:
    """An ipBlock matches only peers outside the cluster, by address (a pod peer has a namespace)."""
    if peer.namespace is not None or peer.ip is None:
        return False
    addr = ipaddress.ip_address(peer.ip)
    return addr in ipaddress.ip_network(block["cidr"]) and not any(
        addr in ipaddress.ip_network(x) for x in block.get("except", [])
    )


def port_matches(ports: list | None, port: int, proto: str) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != proto:
            continue
        if p.get("port") is None:
            return True
        # Numbers may arrive as floats from the mock engine; a named port (a string) matches no number.
        raw = p["port"]
        lo = int(raw) if isinstance(raw, int | float) or str(raw).isdigit() else None
        hi = int(p.get("endPort") or lo or 0)
        if lo is not None and lo <= port <= hi:
            return True
    return False


def direction_allows(
    policies: Sequence[Mapping[str, Any]], subject: Peer, other: Peer, port: int, proto: str, kind: str
) -> bool:
    """Whether the policies in subject's namespace let traffic of `kind` (Ingress/Egress) through."""
    applying = [
        p
        for p in policies
        if p["metadata"]["namespace"] == subject.namespace
        and kind in p["spec"].get("policyTypes", [])
        and selects(p["spec"].get("podSelector") or {}, subject.labels)
    ]
    if not applying:
        return True
    key, peers_key = ("egress", "to") if kind == "Egress" else ("ingress", "from")
    for p in applying:
        for rule in p["spec"].get(key) or []:
            peers = rule.get(peers_key)
            if (
                not peers or any(peer_matches(x, other, subject.namespace or "") for x in peers)
            ) and port_matches(rule.get("ports"), port, proto):
                return True
    return False


def allowed(
    policies: Sequence[Mapping[str, Any]], src: Peer, dst: Peer, port: int, proto: str = "TCP"
) -> bool:
    egress = src.namespace is None or direction_allows(policies, src, dst, port, proto, "Egress")
    ingress = dst.namespace is None or direction_allows(policies, dst, src, port, proto, "Ingress")
    return egress and ingress
