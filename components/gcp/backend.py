"""The GCP backend (`cloud: gcp`): GKE, node pools, Filestore / Managed Lustre, GCS, Workload Identity.

Light on purpose: the registry imports it to validate a stack, and only `build` imports pulumi_gcp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.backends import BuildArgs, CatalogBackend
from components.gcp import rules

if TYPE_CHECKING:
    import pulumi

    from components.backends import TeamIdentityCheck
    from components.bundle import ClusterBundle
    from components.spec import NodePoolSpec, PlatformSpec
    from infra.verify.cloud import CloudReport
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject
    from infra.verify.report import CheckResult


class GcpBackend(CatalogBackend):
    name = "gcp"
    package = "components.gcp"
    rules = rules
    keys = rules.KEYS
    twins = rules.TWINS
    # GKE gives non-system pods of a spot VM about 15-30 s by default (GKE docs, "Spot VMs").
    preemption_grace_seconds = 30

    def machine_type_of(self, pool: NodePoolSpec) -> str | None:
        return pool.machine_type

    def build(self, name: str, args: BuildArgs, opts: pulumi.ResourceOptions) -> ClusterBundle:
        from components.gcp.cloud import GcpCloud, GcpCloudArgs

        return GcpCloud(name, GcpCloudArgs(spec=args.spec), opts).bundle

    # verify: team reach, enforcement, storage path, cloud API rules (v2)
    def verify_network_enforcement(self, ctx: Context, res: CheckResult) -> None:
        from components.gcp.verify_network import enforcement

        enforcement(ctx, res)

    def verify_team_identity(self) -> TeamIdentityCheck | None:
        from components.gcp.verify_identity import check_team

        return check_team

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        from components.gcp.verify_storage import node_reachability

        node_reachability(ctx, res, pod, pv, driver)

    def verify_cloud_api(self, spec: PlatformSpec, client: Any = None) -> CloudReport:
        from components.gcp.verify_api import verify_cloud_api

        return verify_cloud_api(spec, client)


BACKEND = GcpBackend()
