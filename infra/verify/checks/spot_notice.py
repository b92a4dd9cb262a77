"""scheduling, AWS spot pools: something on the node turns EC2's two-minute notice into a SIGTERM.

EC2 gives a spot instance two minutes between its interruption notice and the reclaim. The trainer
writes its preemption checkpoint on SIGTERM; only a handler on the node (aws-node-termination-handler in
IMDS mode, components/aws/spot_notice.py) turns the notice into a drain that sends it within seconds.
The handler is modelled as a chart DaemonSet of scope "spot" (facts.yaml): a spot GPU pool needs one,
and the toleration check of the DaemonSets makes sure it reaches the pool's tainted nodes.

GKE needs no handler: "When Compute Engine needs to reclaim the resources used by Spot VMs, a preemption
notice is sent to GKE"; GKE's graceful node shutdown then gives pods 30 s by default, "the first 15
seconds to shut down your Pods and then 15 seconds for critical system Pods", extendable to 120 s on
Standard node pools whose control plane runs GKE 1.35.0-gke.1171000 or later (GKE docs, "Spot VMs",
Termination and graceful shutdown of Spot VMs; the node pool's kubelet shutdownGracePeriodSeconds). A
training pod asks more (terminationGracePeriodSeconds >= 60 s, components/incluster/job_pod.py): on such
a pool its preemption checkpoint may be cut off. That is a property of the cluster version, not a wrong
plan, so verify says it as a note.
"""

from __future__ import annotations

from typing import Any

from infra.verify.checks.pool_nodes import PoolNodes
from infra.verify.context import Context
from infra.verify.report import CheckResult


def check_spot_notice(ctx: Context, res: CheckResult, gpu_pools: list[tuple[Any, PoolNodes]]) -> None:
    handlers = [d for d in ctx.charts.daemon_sets if d.scope == "spot"]
    for pool, nodes in gpu_pools:
        if pool.get("capacity") == "spot" and not handlers:
            res.fail(
                f"GPU pool {pool['name']} runs on spot but nothing turns EC2's two-minute interruption "
                "notice into a SIGTERM for its pods (no aws-node-termination-handler DaemonSet): a reclaim "
                "kills the trainer without its preemption checkpoint",
                nodes.source,
            )
        elif pool.get("capacity") == "spot":
            res.examined.append(f"spot notice handler for {pool['name']}")


# GKE docs, "Spot VMs" (Termination and graceful shutdown of Spot VMs): non-system pods get the first 15 s.
GKE_SPOT_POD_GRACE_S = 15


def note_gke_spot_grace(ctx: Context, res: CheckResult) -> None:
    """A note per training pod that asks more time than GKE gives a spot node's pods by default."""
    spot = {p["name"] for p in ctx.gpu_pools() if p.get("capacity") == "spot"}
    for pod in ctx.pods:
        grace = int(pod.pod_spec.get("terminationGracePeriodSeconds") or 30)
        if pod.pool in spot and grace > GKE_SPOT_POD_GRACE_S:
            res.note(
                f"GKE spot pool {pod.pool}: at preemption GKE gives non-system pods {GKE_SPOT_POD_GRACE_S} s by "
                f"default, team {pod.team}'s training pods ask {grace} s for their preemption checkpoint; "
                "GKE 1.35.0-gke.1171000+ lets the pool's kubelet shutdownGracePeriodSeconds go up to 120 s"
            )
