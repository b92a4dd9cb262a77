"""observability, cost rules: every GPU pool of the platform has a price series in the cost recording
rules (components/incluster/cost_rules.py), and the ServiceMonitor `trainplane-node-pools` copies the node
label the rules join a node to its pool on (`up{job="trainplane-node-pools", pool}`). A pool the price series misses costs $0 in the rules, the "trainplane / Cost"
dashboard and `trainplane cost`, silently."""

from __future__ import annotations

import re

from components.bundle import POOL_LABEL
from components.incluster.cost_rules import NODE_POOLS_JOB, PRICE, node_meta_label
from infra.verify.checks.scrape_labels import LabelModel
from infra.verify.context import Context
from infra.verify.report import CheckResult

# How price_expr labels each pool's constant: label_replace(vector(x), "pool", "<name>", "", "").
_POOL = re.compile(r'"pool",\s*"([^"]+)"')


def check_cost_coverage(ctx: Context, model: LabelModel, res: CheckResult) -> None:
    pools = [p.name for p in ctx.gpu_pools()]
    rules = ctx.platform.objects("PrometheusRule")
    if not pools or not rules:
        return  # no GPU pool to price, or no rules at all (observability.alerts off)
    prices = [
        (pr, str(r.get("expr", "")))
        for pr in rules
        for g in pr.spec.get("groups") or []
        for r in g.get("rules") or []
        if r.get("record") == PRICE
    ]
    owner = rules[0].ref
    if not prices:
        # No pool has a price (a cluster trainplane did not buy and no pricing.overrides): nothing to record.
        res.note(
            f"no recording rule {PRICE}: GPU pools {', '.join(pools)} have no price (set "
            "platform.pricing.overrides), GPU cost is not recorded"
        )
        return
    priced = {name for _, expr in prices for name in _POOL.findall(expr)}
    if not priced:
        # No pool has a price (a cluster trainplane did not buy and no pricing.overrides): nothing to record.
        res.note(
            f"{PRICE} prices no pool: GPU pools {', '.join(pools)} have no price (set "
            "platform.pricing.overrides), GPU cost is not recorded"
        )
        return
    missing = [p for p in pools if p not in priced]
    if missing:
        res.fail(
            f"{prices[0][0].ref}: {PRICE} has no price for GPU pool(s) {', '.join(missing)}: their GPUs cost "
            "$0 in the cost rules and `trainplane cost` (give their machine a price in "
            "platform.pricing.overrides)",
            prices[0][0].ref,
        )
    if not _maps_pools(ctx):
        res.fail(
            f"{owner}: no ServiceMonitor sets job {NODE_POOLS_JOB} and copies the node label {POOL_LABEL} "
            f"({node_meta_label(POOL_LABEL)}) into `pool` with attachMetadata.node: the cost rules find no "
            "node's pool, every GPU costs $0",
            owner,
        )
    res.examined.append(f"cost rules of {len(pools)} GPU pool(s)")


def _maps_pools(ctx: Context) -> bool:
    """A ServiceMonitor of the plan whose targets carry job trainplane-node-pools and the node's pool."""
    for sm in ctx.platform.objects("ServiceMonitor"):
        if not (sm.spec.get("attachMetadata") or {}).get("node"):
            continue  # without node metadata __meta_kubernetes_node_label_* is empty
        for ep in sm.spec.get("endpoints") or []:
            relabel = ep.get("relabelings") or []
            sets_job = any(
                r.get("targetLabel") == "job" and r.get("replacement") == NODE_POOLS_JOB for r in relabel
            )
            copies = any(
                r.get("targetLabel") == "pool"
                and list(r.get("sourceLabels") or []) == [node_meta_label(POOL_LABEL)]
                and str(r.get("action", "replace")).lower() == "replace"
                for r in relabel
            )
            if sets_job and copies:
                return True
    return False
