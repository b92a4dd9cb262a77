"""The critical path of a plan: the longest chain of resources that wait for each other, weighted by
how long each typically takes to create. Only to estimate how long a first deploy takes.

Creation times come from the backends (CloudBackend.create_seconds: each cloud's resource types); the
in-cluster layer's Kubernetes and Helm objects are timed here, the same on every cloud.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infra.resources import HELM_RELEASE, Resource

# The in-cluster layer's resources, from deploy logs: a Helm release waits for its pods (`atomic`), a
# Kubernetes provider for nothing but its cluster's kubeconfig. Other providers take no time.
INCLUSTER_CREATE_SECONDS: dict[str, float] = {
    "kubernetes:storage.k8s.io/v1:StorageClass": 1,
    HELM_RELEASE: 120,
    "pulumi:providers:kubernetes": 1,
}
DEFAULT_CREATE_SECONDS = 3.0
# Helm releases that roll out DaemonSets on every GPU node take much longer than the default.
SLOW_RELEASES = {"gpu-operator": 420, "kube-prometheus-stack": 240}


def known_create_seconds() -> dict[str, float]:
    """Creation times per resource type: the in-cluster layer's and every registered backend's (a type
    token names its provider, so the tables never disagree)."""
    from components.backends import backends

    known = dict(INCLUSTER_CREATE_SECONDS)
    for b in backends():
        known.update(b.create_seconds())
    return known


def create_seconds(r: Resource, known: Mapping[str, float] | None = None) -> float:
    """How long `r` typically takes to create; `known` as known_create_seconds() gives it."""
    known = known_create_seconds() if known is None else known
    if not r.custom:
        return 0.0
    if r.type.startswith("pulumi:providers:"):
        return known.get(r.type, 0.0)
    if r.type == HELM_RELEASE:
        chart = str(r.inputs.get("chart", "")).rsplit("/", 1)[-1]
        return SLOW_RELEASES.get(chart, known[r.type])
    return known.get(r.type, DEFAULT_CREATE_SECONDS)


@dataclass(frozen=True)
class PathStep:
    name: str
    type: str
    seconds: float


class _DependencyGraph:
    """What each resource waits for, as the engine sees it, and the longest path to each."""

    def __init__(self, resources: list[Resource]) -> None:
        self.known = known_create_seconds()
        self.by_urn = {r.urn: r for r in resources}
        self.children: dict[str, list[str]] = {}
        for r in resources:
            if r.parent:
                self.children.setdefault(r.parent, []).append(r.urn)
        self.best: dict[str, tuple[float, str | None]] = {}
        self._leaves: dict[str, tuple[str, ...]] = {}

    def leaves(self, urn: str) -> tuple[str, ...]:
        """The custom resources a dependency on `urn` waits for (a component: everything inside it)."""
        if urn not in self._leaves:
            r = self.by_urn.get(urn)
            if r is None:
                found: tuple[str, ...] = ()
            elif r.custom:
                found = (urn,)
            else:
                found = tuple(leaf for c in self.children.get(urn, []) for leaf in self.leaves(c))
            self._leaves[urn] = found
        return self._leaves[urn]

    def waits_for(self, r: Resource) -> set[str]:
        deps = {leaf for d in r.deps for leaf in self.leaves(d)}
        if r.provider:
            # A provider reference is "<urn>::<id>".
            provider_urn = r.provider.rsplit("::", 1)[0]
            if provider_urn in self.by_urn:
                deps.add(provider_urn)
        deps.discard(r.urn)
        return deps

    def finish(self, urn: str, stack: frozenset[str] = frozenset()) -> float:
        """When `urn` is created at the earliest, remembering the dependency that decides it."""
        if urn in self.best:
            return self.best[urn][0]
        r = self.by_urn[urn]
        before, via = 0.0, None
        # In URN order, taking the first of equally late dependencies: the same path in every run (a set's
        # order changes with each process's string hashing).
        for d in sorted(self.waits_for(r)):
            if d in stack:  # a cycle cannot be deployed; the engine would refuse it too
                continue
            t = self.finish(d, stack | {urn})
            if t > before:
                before, via = t, d
        self.best[urn] = (before + create_seconds(r, self.known), via)
        return self.best[urn][0]


def critical_path(resources: list[Resource]) -> list[PathStep]:
    """The longest chain of dependent resources, weighted by typical creation time.

    A dependency on a component means waiting for everything inside it, as the engine does; a resource
    also waits for its explicit provider (a Kubernetes provider waits for its cluster's kubeconfig).
    """
    graph = _DependencyGraph(resources)
    customs = [r.urn for r in resources if r.custom]
    if not customs:
        return []
    end = max(sorted(customs), key=graph.finish)  # ties: the first URN, not the first registered
    chain: list[PathStep] = []
    cursor: str | None = end
    while cursor is not None:
        r = graph.by_urn[cursor]
        chain.append(PathStep(r.name, r.type, create_seconds(r, graph.known)))
        cursor = graph.best[cursor][1]
    return list(reversed(chain))
