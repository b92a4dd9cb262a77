"""The AWS backend (`cloud: aws`): EKS, managed node groups, FSx for Lustre / EFS, S3, IRSA.

Light on purpose: the registry imports it to validate a stack, and only `build` imports pulumi_aws.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from components.aws import rules
from components.backends import BuildArgs, load_data_file
from components.catalog import MachineShape, catalog

if TYPE_CHECKING:
    import pulumi

    from components.bundle import ClusterBundle
    from components.spec import NodePoolSpec, PlatformSpec, StorageSpec


class AwsBackend:
    name = "aws"
    keys = rules.KEYS
    twins = rules.TWINS
    # A spot instance gets a two-minute interruption notice (EC2 user guide, "Spot Instance interruptions").
    preemption_grace_seconds = 120

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        return rules.check(spec, root)

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        return rules.check_pool(spec, pool, path)

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        return rules.check_storage(spec, storage, path)

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        """The pool's instance type, else the cheapest one carrying its GPUs."""
        if pool.instance_type:
            return catalog().machine("aws", pool.instance_type)
        if pool.gpu and pool.gpus_per_node:
            shapes = catalog().shapes("aws", pool.gpu, pool.gpus_per_node)
            return shapes[0] if shapes else None
        return None

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        from components.aws.cloud import AwsCloud, AwsCloudArgs

        return AwsCloud(name, AwsCloudArgs(spec=args.spec), opts).bundle

    @cache  # noqa: B019 - one instance for the life of the process
    def verify_facts(self) -> Mapping[str, Any]:
        return load_data_file("components.aws", "verify_facts.yaml")


BACKEND = AwsBackend()
