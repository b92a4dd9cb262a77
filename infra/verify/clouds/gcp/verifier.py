"""The GCP verifier (`cloud: gcp`): what `trainplane verify` asks about a GKE platform. The answers live
beside it (nodes.py, fabric.py, network.py, identity.py, storage.py, cloud_api.py), each imported when
verify first asks; the facts in facts.yaml."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from components.backends import load_data_file
from infra.verify.verifier import VerifierDefaults

if TYPE_CHECKING:
    from components.spec import PlatformSpec
    from infra.verify.charts import ChartModel
    from infra.verify.checks.pool_nodes import PoolNodes
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, Plan, PlanResource
    from infra.verify.report import CheckResult, Report
    from infra.verify.verifier import GpuPools, TeamIdentityCheck


class GcpVerifier(VerifierDefaults):
    name = "gcp"

    @cache  # noqa: B019 - one instance for the life of the process
    def verify_facts(self) -> Mapping[str, Any]:
        return load_data_file("infra.verify.clouds.gcp", "facts.yaml")

    # cluster, pool nodes, add-ons, fabric (v1)
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        from infra.verify.clouds.gcp import nodes

        return nodes.plan_cluster(resources)

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        from infra.verify.clouds.gcp import nodes

        return nodes.kubernetes_version(cluster)

    def pool_nodes(self, ctx: Context, pool: Mapping[str, Any]) -> PoolNodes | None:
        from infra.verify.clouds.gcp import nodes

        return nodes.pool_nodes(ctx, pool)

    def addon_objects(self, plan: Plan, out: ChartModel) -> None:
        from infra.verify.clouds.gcp import nodes

        nodes.addon_objects(plan, out)

    def check_gpu_pools(self, ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
        from infra.verify.clouds.gcp import nodes

        nodes.check_gpu_pools(ctx, res, gpu_pools)

    def check_fabric(
        self, ctx: Context, res: CheckResult, pool: Mapping[str, Any], facts: Mapping[str, Any]
    ) -> None:
        from infra.verify.clouds.gcp import fabric

        fabric.check_fabric(ctx, res, pool, facts)

    # team reach, enforcement, storage path, cloud API rules (v2)
    def verify_network_enforcement(self, ctx: Context, res: CheckResult) -> None:
        from infra.verify.clouds.gcp.network import enforcement

        enforcement(ctx, res)

    def verify_team_identity(self) -> TeamIdentityCheck | None:
        from infra.verify.clouds.gcp.identity import check_team

        return check_team

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        from infra.verify.clouds.gcp.storage import node_reachability

        node_reachability(ctx, res, pod, pv, driver)

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> Report:
        from infra.verify.clouds.gcp.cloud_api import verify_cloud_api

        return verify_cloud_api(spec, client)


VERIFIER = GcpVerifier()
