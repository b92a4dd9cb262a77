"""`BackendDefaults`: what a backend answers for a hook it does not implement, which is what a plain
Kubernetes cluster with no cloud features answers (no catalog, no prices, no mock answers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from components.catalog import CatalogSection, PriceBasis
    from components.spec import NodePoolSpec, PlatformSpec


from components.backend_protocol import CapacityKinds, MockAnswers, Prompt

# The nodes of a cluster that exists, labelled for trainplane by a platform engineer:
#   kubectl label nodes <gpu nodes> trainplane.dev/pool=gpu
EXISTING_GPU_SELECTOR = {"trainplane.dev/pool": "gpu"}


class BackendDefaults:
    """What a backend answers for a hook it does not implement: what a plain cluster with no cloud
    features answers. Every built-in backend inherits it."""

    name: str
    support_calendar: str | None = None
    # Seconds between SIGTERM and SIGKILL for training pods when a job names none: 120, the longest notice a
    # built-in cloud gives (EC2 Spot's two minutes), so a preemption checkpoint fits on a cloud that does not
    # say; a backend whose cloud gives less or more sets its own.
    preemption_grace_seconds: int = 120
    # The cloud's section of the platform spec (its keys as pydantic models, components/spec/sections.py).
    # An installed backend's is found beside its module (<package>.spec_keys), before any backend is
    # imported; a backend a program registers brings it here, and PlatformSpec.load composes it on top.
    spec_keys: Any = None

    # catalog, spec keys, regions, quickstart (b1)
    def catalog_section(self) -> CatalogSection | None:
        return None

    def support_section(self) -> Mapping[str, Any] | None:
        """The cloud's section of the Kubernetes support calendar (`support_calendar` names it)."""
        return None

    def support_file(self) -> str | None:
        """Where that section is kept, for error lines (a path in the source tree)."""
        return None

    def display_name(self) -> str:
        return self.name

    def regions(self) -> Sequence[str]:
        return ()

    def machine_type_problem(self, name: str, known: Sequence[str]) -> str | None:
        return None

    def machine_type_of(self, pool: NodePoolSpec) -> str | None:
        """The machine type a pool names (its cloud's key for it); none: the pool names no machine."""
        return None

    def capacity_kinds(self) -> CapacityKinds:
        return CapacityKinds(offered=("on-demand",))

    def object_store_scheme(self) -> str | None:
        return None

    def quickstart(self, get: Prompt, gpu_pool: dict[str, Any]) -> dict[str, Any]:
        """Nodes that exist, selected by label; no object store for Loki's chunks."""
        cluster = {"context": context} if (context := get("context")) else {}
        pool = {**gpu_pool, "selector": dict(EXISTING_GPU_SELECTOR), "minNodes": gpu_pool["maxNodes"]}
        return {"cluster": cluster, "observability": {"loki": False}, "nodePools": [pool]}

    # plan, cost and the offline engine (b2)
    def create_seconds(self) -> Mapping[str, float]:
        return {}

    def price_basis(self) -> PriceBasis | None:
        return None

    def control_plane_hourly(self, spec: PlatformSpec) -> float:
        return 0.0

    def cost_assumptions(self, spec: PlatformSpec) -> list[str]:
        return []

    def mock_answers(self) -> MockAnswers:
        return MockAnswers()
