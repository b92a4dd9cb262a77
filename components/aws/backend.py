"""The AWS backend (`cloud: aws`): EKS, managed node groups, FSx for Lustre / EFS, S3, IRSA.

Light on purpose: the registry imports it to validate a stack, and only `build` imports pulumi_aws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from components.aws import rules
from components.backends import BuildArgs, MockAnswers
from components.catalog_backend import CatalogBackend

if TYPE_CHECKING:
    import pulumi

    from components.backends import GpuPools, TeamIdentityCheck
    from components.bundle import ClusterBundle
    from components.spec import PlatformSpec
    from infra.verify.charts import ChartModel
    from infra.verify.checks.pool_nodes import PoolNodes
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, Plan, PlanResource
    from infra.verify.report import CheckResult, Report


class AwsBackend(CatalogBackend):
    name = "aws"
    title = "AWS"
    package = "components.aws"
    rules = rules
    keys = rules.KEYS
    twins = rules.TWINS
    # A spot instance gets a two-minute interruption notice (EC2 user guide, "Spot Instance interruptions").
    preemption_grace_seconds = 120
    support_calendar = "eks"
    machine_key = "instanceType"
    object_store = "s3"
    system_pool = {"name": "system", "instanceType": "m6i.xlarge", "minNodes": 2, "maxNodes": 3}
    default_region = "us-east-1"

    def machine_type_problem(self, name: str, known: Sequence[str]) -> str | None:
        from components.aws.regions import instance_type_problem

        return instance_type_problem(name, known)

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        from components.aws.cloud import AwsCloud, AwsCloudArgs

        return AwsCloud(name, AwsCloudArgs(spec=args.spec), opts).bundle

    def create_seconds(self) -> Mapping[str, float]:
        from components.aws.cost import CREATE_SECONDS

        return CREATE_SECONDS

    def control_plane_hourly(self, spec: PlatformSpec) -> float:
        from components.aws.cost import CONTROL_PLANE_HOURLY

        return CONTROL_PLANE_HOURLY

    def mock_answers(self) -> MockAnswers:
        from components.aws.mock import ANSWERS

        return ANSWERS

    # verify: cluster, pool nodes, add-ons, fabric (v1); the answers live in components/aws/verify_*.py
    def plan_cluster(self, resources: Sequence[PlanResource]) -> PlanResource | None:
        from components.aws import verify_nodes

        return verify_nodes.plan_cluster(resources)

    def plan_kubernetes_version(self, cluster: PlanResource) -> str | None:
        from components.aws import verify_nodes

        return verify_nodes.kubernetes_version(cluster)

    def pool_nodes(self, ctx: Context, pool: Mapping[str, Any]) -> PoolNodes | None:
        from components.aws import verify_nodes

        return verify_nodes.pool_nodes(ctx, pool)

    def addon_objects(self, plan: Plan, out: ChartModel) -> None:
        from components.aws import verify_nodes

        verify_nodes.addon_objects(plan, out)

    def check_gpu_pools(self, ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
        from components.aws import verify_nodes

        verify_nodes.check_gpu_pools(ctx, res, gpu_pools)

    # verify: team reach, enforcement, storage path, cloud API rules (v2)
    def verify_network_enforcement(self, ctx: Context, res: CheckResult) -> None:
        from components.aws.verify_network import enforcement

        enforcement(ctx, res)

    def verify_team_identity(self) -> TeamIdentityCheck | None:
        from components.aws.verify_identity import check_team

        return check_team

    def verify_csi_controller_identity(self, ctx: Context, res: CheckResult, driver: str) -> None:
        from components.aws.verify_storage import controller_identity

        controller_identity(ctx, res, driver)

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        from components.aws.verify_storage import storage_path

        storage_path(ctx, res, pod, pv, driver)

    def verify_create_rules(self, ctx: Context, res: CheckResult) -> None:
        from components.aws.verify_create import create_rules

        create_rules(ctx, res)

    def verify_rule_admits_tcp(self, rule: PlanResource, port: int) -> bool:
        from components.aws.verify_network import covers

        return covers(rule, port)

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> Report:
        from components.aws.verify_api import verify_cloud_api

        return verify_cloud_api(spec, client)


BACKEND = AwsBackend()
