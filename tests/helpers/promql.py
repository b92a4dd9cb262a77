"""PromQL names: the metrics an expression reads, and every expression of the dashboards and alerts."""

from __future__ import annotations

import re

from components.incluster.alerts import alert_groups
from components.incluster.dashboards import dashboards

PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "sum",
    "avg",
    "max",
    "min",
    "count",
    "rate",
    "increase",
    "irate",
    "delta",
    "changes",
    "avg_over_time",
    "sum_over_time",
    "max_over_time",
    "min_over_time",
    "label_values",
    "time",
    "timestamp",
    "histogram_quantile",
    "quantile",
    "floor",
    "topk",
    "clamp_min",
    "clamp_max",
    "label_replace",
}


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers outside {...} and [...] and not functions or
    keywords or label names in by/on clauses."""
    # Grafana's label_values(metric, label): the second argument is a label name.
    stripped = re.sub(r"label_values\((.*),\s*\w+\)", r"\1", expr)
    stripped = re.sub(r"\{[^}]*\}", "", stripped)
    stripped = re.sub(r"\[[^\]]*\]", "", stripped)
    stripped = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", stripped)
    stripped = re.sub(r'"[^"]*"', "", stripped)
    names = set(re.findall(r"\b[A-Za-z_:][A-Za-z0-9_:]*\b", stripped))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r"\d+[smhd]?", n)}


def all_exprs() -> list[tuple[str, str]]:
    exprs = []
    for file_name, board in dashboards().items():
        for panel in board["panels"]:
            exprs += [(f"{file_name}:{panel['title']}", t["expr"]) for t in panel["targets"]]
        for var in board["templating"]["list"]:
            if var["type"] == "query":
                exprs.append((f"{file_name}:${var['name']}", var["query"]["query"]))
    for group in alert_groups():
        exprs += [
            (f"{'alert' if 'alert' in r else 'record'} {r.get('alert') or r['record']}", r["expr"])
            for r in group["rules"]
        ]
    return exprs
