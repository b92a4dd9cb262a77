"""The GCP verifier (`cloud: gcp`): what `trainplane verify` asks about a GKE platform. The answers live
beside it (nodes.py, network.py, identity.py, cloud_api.py: `FolderVerifier`'s conventions; fabric.py and
storage.py below), each imported when verify first asks; the facts in facts.yaml."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infra.verify.verifier import FolderVerifier

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo
    from infra.verify.context import Context
    from infra.verify.jobs import TrainingPod
    from infra.verify.model import K8sObject
    from infra.verify.report import CheckResult


class GcpVerifier(FolderVerifier):
    name = "gcp"

    def check_fabric(
        self, ctx: Context, res: CheckResult, pool: NodePoolInfo, facts: Mapping[str, Any]
    ) -> None:
        from infra.verify.clouds.gcp import fabric

        fabric.check_fabric(ctx, res, pool, facts)

    def verify_storage_path(
        self, ctx: Context, res: CheckResult, pod: TrainingPod, pv: K8sObject, driver: str | None
    ) -> None:
        from infra.verify.clouds.gcp.storage import node_reachability

        node_reachability(ctx, res, pod, pv, driver)


VERIFIER = GcpVerifier()
