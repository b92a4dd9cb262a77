"""The AWS backend (`cloud: aws`): EKS, managed node groups, FSx for Lustre / EFS, S3, IRSA.

Light on purpose: the registry imports it to validate a stack, and only `build` imports pulumi_aws.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.aws import rules
from components.backends import BuildArgs, CatalogBackend

if TYPE_CHECKING:
    import pulumi

    from components.backends import TeamIdentityCheck
    from components.bundle import ClusterBundle
    from components.spec import NodePoolSpec, PlatformSpec
    from infra.verify.cloud import CloudReport
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, PlanResource
    from infra.verify.report import CheckResult


class AwsBackend(CatalogBackend):
    name = "aws"
    package = "components.aws"
    rules = rules
    keys = rules.KEYS
    twins = rules.TWINS
    # A spot instance gets a two-minute interruption notice (EC2 user guide, "Spot Instance interruptions").
    preemption_grace_seconds = 120

    def machine_type_of(self, pool: NodePoolSpec) -> str | None:
        return pool.instance_type

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        from components.aws.cloud import AwsCloud, AwsCloudArgs

        return AwsCloud(name, AwsCloudArgs(spec=args.spec), opts).bundle

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

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> CloudReport:
        from components.aws.verify_api import verify_cloud_api

        return verify_cloud_api(spec, client)


BACKEND = AwsBackend()
