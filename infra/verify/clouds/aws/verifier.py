"""The AWS verifier (`cloud: aws`): what `trainplane verify` asks about an EKS platform. The answers live
beside it (nodes.py, network.py, identity.py, cloud_api.py: `FolderVerifier`'s conventions; storage.py and
create_rules.py below), each imported when verify first asks; the facts in facts.yaml."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.verify.verifier import FolderVerifier

if TYPE_CHECKING:
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject, PlanResource
    from infra.verify.report import CheckResult


class AwsVerifier(FolderVerifier):
    name = "aws"

    def verify_csi_controller_identity(self, ctx: Context, res: CheckResult, driver: str) -> None:
        from infra.verify.clouds.aws.storage import controller_identity

        controller_identity(ctx, res, driver)

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        from infra.verify.clouds.aws.storage import storage_path

        storage_path(ctx, res, pod, pv, driver)

    def verify_create_rules(self, ctx: Context, res: CheckResult) -> None:
        from infra.verify.clouds.aws.create_rules import create_rules

        create_rules(ctx, res)

    def verify_rule_admits_tcp(self, rule: PlanResource, port: int) -> bool:
        from infra.verify.clouds.aws.network import covers

        return covers(rule, port)


VERIFIER = AwsVerifier()
