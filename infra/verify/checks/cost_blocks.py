"""observability, cost rules: committed cost outside a block's dates is 0. A Capacity Block exists, and is
paid for, only from its blockStart to its blockEnd (EC2 "Capacity Blocks for ML"); a cost rule that charges
its GPUs as idle at other times inflates every report by the block's whole size (issue 30).

The plan's own idle-rate expression is run by `promtool test rules` at an evaluation time an hour before
the block starts and an hour after it ends, on a cluster of one node of the pool (so the rule's "cluster
seen" guard holds): the pool's idle dollars there must be 0 or absent."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from components.incluster.cost_rules import IDLE_RATE, NODE_POOLS_JOB
from infra.verify.context import Context
from infra.verify.report import CheckResult

RULE = "committed cost outside a block's dates is 0"


def _epoch(value: Any) -> int:
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return int(at.timestamp())


def _charged_at(promtool: str, expr: str, pool: str, at: int) -> str | None:
    """promtool's complaint when `expr` gives `pool` idle dollars above 0 at `at` (Unix s), else None."""
    values = "8 8"  # samples at 0 and at `at`: the series' interval is `at` itself
    series = [
        {"series": 'kube_node_status_allocatable{node="n",resource="nvidia_com_gpu"}', "values": values},
        {"series": f'up{{job="{NODE_POOLS_JOB}",node="n",pool="{pool}"}}', "values": values},
    ]
    only = f'label_replace(vector(1), "pool", "{pool}", "", "")'
    test = {
        "rule_files": [],
        "evaluation_interval": f"{at}s",
        "tests": [
            {
                "interval": f"{at}s",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": f"sum by (pool) (({expr}) * on (pool) group_left () {only}) > 0",
                        "eval_time": f"{at}s",
                        "exp_samples": [],
                    }
                ],
            }
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
        proc = subprocess.run(
            [promtool, "test", "rules", "test.yaml"], cwd=tmp, capture_output=True, text=True, timeout=60
        )
    if proc.returncode == 0:
        return None
    got = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if "got:" in line]
    return got[0] if got else " ".join((proc.stderr or proc.stdout).split())[:300]


def check_block_dates(ctx: Context, res: CheckResult) -> None:
    # The dates are the stack's (the plan's config; a recorded plan without it is not checked here).
    blocks = [
        p
        for p in (ctx.platform.config or {}).get("nodePools") or []
        if p.get("capacity") == "capacity-block" and p.get("blockStart") and p.get("blockEnd")
    ]
    rules = [
        (pr, str(r.get("expr", "")))
        for pr in ctx.platform.objects("PrometheusRule")
        for g in pr.spec.get("groups") or []
        for r in g.get("rules") or []
        if r.get("record") == IDLE_RATE
    ]
    if not blocks or not rules:
        return
    promtool = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    if promtool is None:
        res.note(f"promtool not installed: not checked that {RULE}")
        return
    pr, expr = rules[0]
    for pool in blocks:
        start, end = _epoch(pool["blockStart"]), _epoch(pool["blockEnd"])
        for when, at in (("an hour before its start", start - 3600), ("an hour after its end", end + 3600)):
            got = _charged_at(promtool, expr, str(pool["name"]), at)
            if got is not None:
                res.fail(
                    f"{pr.ref}: {RULE}: {IDLE_RATE} charges Capacity Block pool {pool['name']} (blockStart "
                    f"{pool['blockStart']}, blockEnd {pool['blockEnd']}) {when}: promtool {got}",
                    pr.ref,
                )
        res.examined.append(f"{RULE}: {pool['name']}")
