"""cloud, creation order: what must exist before another resource is created, on the plan's dependency
graph.

The rules are data, per cloud (`createOrder` in infra/verify/clouds/<cloud>/facts.yaml): a `waiter`
resource waits, directly or through others, for every resource `waitsFor` selects; the engine creates a
resource only after everything it waits for. "Waits for" is the engine's: a resource's own dependencies, those of
its ancestor components, its explicit provider, and a dependency on a component means every resource
inside it.

Example (the shape of a rule; the AWS verifier's facts hold real ones, e.g. the Kubernetes provider waits
for the deployer's access policy association):
    >>> rule = {"name": "provider-after-access", "waiter": {"type": "pulumi:providers:kubernetes"},
    ...         "waitsFor": {"type": "<cloud>:<module>/<resource>:<Resource>"}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.verify import facts as F
from infra.verify.model import Plan, PlanResource
from infra.verify.report import CheckResult
from infra.verify.verifiers import verifier


class Graph:
    """The plan's dependency graph, with the engine's notion of waiting (module doc)."""

    def __init__(self, plan: Plan):
        self.by_urn = plan.by_urn()
        self.children: dict[str, list[str]] = {}
        for r in plan.resources:
            if r.parent:
                self.children.setdefault(r.parent, []).append(r.urn)
        self._cache: dict[str, frozenset[str]] = {}

    def _expand(self, urn: str) -> set[str]:
        out, todo = set(), [urn]
        while todo:
            u = todo.pop()
            if u not in out:
                out.add(u)
                todo.extend(self.children.get(u, []))
        return out

    def _direct(self, r: PlanResource) -> set[str]:
        deps: set[str] = set()
        cur: PlanResource | None = r
        while cur is not None:
            for d in cur.deps:
                deps |= self._expand(d)
            cur = self.by_urn.get(cur.parent) if cur.parent else None
        if r.provider:
            deps.add(r.provider.rsplit("::", 1)[0])
        return deps

    def waits_for(self, r: PlanResource) -> frozenset[str]:
        """URNs of every custom resource `r` waits for, directly or transitively."""
        if r.urn not in self._cache:
            seen: set[str] = set()
            todo = list(self._direct(r))
            while todo:
                u = todo.pop()
                if u in seen or u not in self.by_urn:
                    continue
                seen.add(u)
                todo.extend(self._direct(self.by_urn[u]))
            self._cache[r.urn] = frozenset(u for u in seen if self.by_urn[u].custom)
        return self._cache[r.urn]

    def direct_of_type(self, r: PlanResource, type_: str) -> set[str]:
        return {d for d in r.deps if d in self.by_urn and self.by_urn[d].type == type_}


def _covers_any(plan: Plan, r: PlanResource, ports: list[int]) -> bool:
    """Whether an ingress rule of the plan's cloud admits one of the TCP `ports` (its verifier reads the
    rule: CloudVerifier.verify_rule_admits_tcp)."""
    cloud = verifier(plan.cloud)
    return any(cloud.verify_rule_admits_tcp(r, int(p)) for p in ports)


def select(graph: Graph, plan: Plan, sel: Mapping[str, Any], waiter: PlanResource) -> list[PlanResource]:
    """The resources a `waitsFor` selector picks for one waiter (facts `createOrder`)."""
    out = []
    for r in plan.of_type(str(sel["type"])):
        if sel.get("attachedTo") and not graph.direct_of_type(r, str(sel["attachedTo"])):
            continue
        if sel.get("sharesGroupWith"):
            group = str(sel["sharesGroupWith"])
            if not graph.direct_of_type(r, group) & graph.direct_of_type(waiter, group):
                continue
        if sel.get("tcpPorts") and not _covers_any(plan, r, list(sel["tcpPorts"])):
            continue
        out.append(r)
    return out


def check_order(plan: Plan, res: CheckResult) -> None:
    """Every `createOrder` rule of the plan's cloud, on every waiter the plan has."""
    rules = F.cloud(plan.cloud).get("createOrder") or []
    graph = Graph(plan)
    waiters = 0
    for rule in rules:
        for waiter in plan.of_type(str(rule["waiter"]["type"])):
            waiters += 1
            waits = graph.waits_for(waiter)
            late = [r for r in select(graph, plan, rule["waitsFor"], waiter) if r.urn not in waits]
            if late:
                names = ", ".join(sorted(r.name for r in late))
                res.fail(
                    f"{rule['name']}: {waiter.name} ({waiter.type}) does not wait for {late[0].type} {names}: "
                    f"{rule['why']} "
                    f"({rule['source']})",
                    waiter.urn,
                    *(r.urn for r in late),
                )
    res.examined.append(f"{len(rules)} order rules on {waiters} resources")
