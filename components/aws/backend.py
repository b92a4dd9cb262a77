"""The AWS backend (`cloud: aws`): EKS, managed node groups, FSx for Lustre / EFS, S3, IRSA.

Light on purpose: the registry imports it to validate a stack, and only `build` imports pulumi_aws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from components.aws import rules, spec_keys
from components.backends import BuildArgs, MockAnswers
from components.catalog_backend import CatalogBackend

if TYPE_CHECKING:
    import pulumi

    from components.bundle import ClusterBundle
    from components.spec import PlatformSpec


class AwsBackend(CatalogBackend):
    name = "aws"
    title = "AWS"
    rules = rules
    keys = rules.KEYS
    spec_keys = spec_keys
    twins = rules.TWINS
    # A spot instance gets a two-minute interruption notice (EC2 user guide, "Spot Instance interruptions").
    preemption_grace_seconds = 120
    support_calendar = "eks"
    machine_key = "instanceType"
    object_store = "s3"
    system_pool = {"name": "system", "instanceType": "m6i.xlarge", "minNodes": 2, "maxNodes": 3}
    default_region = "us-east-1"

    def cost_assumptions(self, spec: PlatformSpec) -> list[str]:
        from components.aws.cost import cost_assumptions

        return cost_assumptions(spec)

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


BACKEND = AwsBackend()
