"""One record of a planned resource, whichever way the plan was made.

The offline engine (infra/mockcloud) records one `Resource` per registration; `trainplane plan` and
`render` read them from its `RunResult`, and verify's `Plan` (infra/verify/model.py) holds the same
records, also when read back from a plan dump. Light on purpose: no Pulumi import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def normal(value: Any) -> Any:
    """Undo the mock engine's number encoding (every number arrives as a float)."""
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@dataclass(frozen=True)
class Resource:
    """A resource as the program registers it: what a deploy would send."""

    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    deps: tuple[str, ...]
    # Its inputs, numbers as the program gave them (never the engine's floats: see `normal`).
    inputs: Mapping[str, Any]
    provider: str | None = None
    # Property paths the engine leaves to others (e.g. an autoscaler owning a node group's size).
    ignore_changes: tuple[str, ...] = ()
    # The URNs this resource answers to besides its own (pulumi.Alias, its own or inherited from a parent
    # with aliases), computed as the engine does: a resource whose old URN is among them is not replaced.
    alias_urns: tuple[str, ...] = ()
    # The URN a real engine gives it: the mock monitor keeps only the parent's own type in `urn`, the
    # engine the parent's whole type chain (pulumi.runtime.resource: parent URN up to "::" + "$" + type).
    engine_urn: str = ""
    # The `protect` resource option, and the URNs each input property depends on (an Output of another
    # resource's): what a policy pack sees of a resource besides its inputs (pulumi-policy
    # PolicyResourceOptions.protect, PolicyResource.property_dependencies).
    protect: bool = False
    property_deps: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def is_kubernetes_object(self) -> bool:
        """A Kubernetes object sent as is (not a Helm release, not a provider)."""
        return (
            self.custom
            and self.type.startswith("kubernetes:")
            and self.type != HELM_RELEASE
            and not self.type.startswith("pulumi:providers:")
        )


class Resources:
    """Lookups over a plan's `resources`, shared by the engine's RunResult and verify's Plan."""

    resources: Sequence[Resource]

    def of_type(self, type_: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> Resource:
        found = [r for r in self.resources if r.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} resources named {name!r}")
        return found[0]

    def by_urn(self) -> dict[str, Resource]:
        return {r.urn: r for r in self.resources}

    def children(self, parent: Resource) -> list[Resource]:
        return [r for r in self.resources if r.parent == parent.urn]
