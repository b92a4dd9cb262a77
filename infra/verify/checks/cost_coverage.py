"""observability, cost rules: every GPU pool of the platform has a price series in the cost recording
rules (components/incluster/cost_rules.py), and kube-state-metrics exports the node label the rules join
a node to its pool on. A pool the price series misses costs $0 in the rules, the "trainplane / Cost"
dashboard and `trainplane cost`, silently."""

from __future__ import annotations

import re

from components.bundle import POOL_LABEL
from components.incluster.cost_rules import PRICE
from infra.verify.checks.scrape_labels import LabelModel
from infra.verify.context import Context
from infra.verify.report import CheckResult

# How price_expr labels each pool's constant: label_replace(vector(x), "pool", "<name>", "", "").
_POOL = re.compile(r'"pool",\s*"([^"]+)"')


def check_cost_coverage(ctx: Context, model: LabelModel, res: CheckResult) -> None:
    pools = [str(p["name"]) for p in ctx.gpu_pools()]
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
    if POOL_LABEL not in model.allowlist.get("nodes", set()):
        res.fail(
            f"{owner}: kube-state-metrics does not export the node label {POOL_LABEL} (its "
            "metricLabelsAllowlist lacks nodes=[" + POOL_LABEL + "]): the cost rules find no node's pool",
            owner,
        )
    res.examined.append(f"cost rules of {len(pools)} GPU pool(s)")
