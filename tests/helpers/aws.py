"""Resource types and lookups the AWS tests share (plans come from plans.py: once per process)."""

from __future__ import annotations

import json

from infra.mockcloud import Resource, RunResult
from tests.helpers.plans import ROOT, one, planned  # noqa: F401 (one: the AWS tests import it from here)

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


plan = planned


def doc(value: str | dict) -> dict:
    """A policy document as AWS will read it (JSON text in the recorded inputs)."""
    return json.loads(value) if isinstance(value, str) else value


def as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def waits_for(result: RunResult, res: Resource) -> set[str]:
    """URNs of every custom resource `res` waits for, directly or transitively.

    A dependency on a component means waiting for everything inside it; a resource is also held back by
    whatever its ancestor components depend on, and by its explicit provider.
    """
    by_urn = result.by_urn()
    children: dict[str, list[str]] = {}
    for r in result.resources:
        if r.parent:
            children.setdefault(r.parent, []).append(r.urn)

    def expand(urn: str) -> set[str]:
        out, todo = set(), [urn]
        while todo:
            u = todo.pop()
            out.add(u)
            todo.extend(children.get(u, []))
        return out

    def direct(r: Resource) -> set[str]:
        deps = set()
        cur: Resource | None = r
        while cur is not None:
            for d in cur.deps:
                deps |= expand(d)
            cur = by_urn.get(cur.parent) if cur.parent else None
        if r.provider:
            deps.add(r.provider.rsplit("::", 1)[0])
        return deps

    seen: set[str] = set()
    todo = list(direct(res))
    while todo:
        u = todo.pop()
        if u in seen or u not in by_urn:
            continue
        seen.add(u)
        todo.extend(direct(by_urn[u]))
    return {u for u in seen if by_urn[u].custom}
