"""scheduling, AWS spot pools: something on the node turns EC2's two-minute notice into a SIGTERM.

EC2 gives a spot instance two minutes between its interruption notice and the reclaim. The trainer
writes its preemption checkpoint on SIGTERM; only a handler on the node (aws-node-termination-handler in
IMDS mode, components/aws/spot_notice.py) turns the notice into a drain that sends it within seconds.
The handler is modelled as a chart DaemonSet of scope "spot" (facts.yaml): a spot GPU pool needs one,
and the toleration check of the DaemonSets makes sure it reaches the pool's tainted nodes.
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
