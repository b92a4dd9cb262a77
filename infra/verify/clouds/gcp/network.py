"""verify on GKE: whether the cluster enforces NetworkPolicy (GcpVerifier.verify_network_enforcement)."""

from __future__ import annotations

from typing import Any

from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.report import CheckResult


def enforcement(ctx: Context, res: CheckResult) -> None:
    """Dataplane V2 (facts `networkPolicy.datapathProvider`) or the legacy network policy add-on."""
    plan = ctx.platform
    facts: Any = F.cloud(plan.cloud).get("networkPolicy")
    cluster = plan.cluster_resource()
    inputs = cluster.inputs if cluster else {}
    dpv2 = inputs.get("datapathProvider") == facts["datapathProvider"]
    legacy = bool((inputs.get("networkPolicy") or {}).get("enabled"))
    if not (dpv2 or legacy):
        res.fail(
            "GKE cluster has neither Dataplane V2 (datapathProvider ADVANCED_DATAPATH) nor the network "
            "policy add-on: NetworkPolicies are not enforced",
            cluster.name if cluster else "GKE cluster",
        )
