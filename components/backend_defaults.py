"""`BackendDefaults`: what a backend answers for a hook it does not implement, which is what a plain
Kubernetes cluster with no cloud features answers (no add-ons, no prices, no cloud API to ask)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from components.catalog import CatalogSection, PriceBasis
    from components.spec import PlatformSpec
    from infra.verify.charts import ChartModel
    from infra.verify.checks.pool_nodes import PoolNodes
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, Plan, PlanResource
    from infra.verify.report import CheckResult, Report


from components.backend_protocol import CapacityKinds, GpuPools, MockAnswers, Prompt

if TYPE_CHECKING:
    from components.backend_protocol import TeamIdentityCheck


# The nodes of a cluster that exists, labelled for trainplane by a platform engineer:
#   kubectl label nodes <gpu nodes> trainplane.dev/pool=gpu
EXISTING_GPU_SELECTOR = {"trainplane.dev/pool": "gpu"}


class BackendDefaults:
    """What a backend answers for a hook it does not implement: what a plain cluster with no cloud
    features answers. Every built-in backend inherits it."""

    name: str
    support_calendar: str | None = None

    # catalog, spec keys, regions, quickstart (b1)
    def catalog_section(self) -> CatalogSection | None:
        return None

    def display_name(self) -> str:
        return self.name

    def regions(self) -> Sequence[str]:
        return ()

    def machine_type_problem(self, name: str, known: Sequence[str]) -> str | None:
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

    # verify: cluster, pool nodes, add-ons, fabric (v1)
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        return None

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        return None

    def adopts_existing_clusters(self) -> bool:
        return False

    def pool_nodes(self, ctx: Context, pool: Mapping[str, Any]) -> PoolNodes | None:
        return None

    def addon_objects(self, plan: Plan, out: ChartModel) -> None:
        return None

    def check_gpu_pools(self, ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
        return None

    def check_fabric(
        self, ctx: Context, res: CheckResult, pool: Mapping[str, Any], facts: Mapping[str, Any]
    ) -> None:
        return None

    # verify: team reach, enforcement, storage path, cloud API rules (v2)
    def verify_network_enforcement(self, ctx: Context, res: CheckResult) -> None:
        res.note(
            "existing cluster: whether it enforces NetworkPolicy is unknown offline; "
            "run verify with --kubeconfig to look for a policy agent (calico, cilium, ...)"
        )

    def verify_team_identity(self) -> TeamIdentityCheck | None:
        return None

    def verify_csi_controller_identity(self, ctx: Context, res: CheckResult, driver: str) -> None:
        return None

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        return None

    def verify_create_rules(self, ctx: Context, res: CheckResult) -> None:
        return None

    def verify_rule_admits_tcp(self, rule: PlanResource, port: int) -> bool:
        return False

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> Report | None:
        return None
