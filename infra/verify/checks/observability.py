"""observability: every alert rule and dashboard query selects labels the scrape configuration produces.

For each metric a query names, the labels it will carry in Prometheus are worked out from what its
exporter emits (facts.yaml; the trainer's own registry in trainer/metrics.py) and how it is scraped:
the ServiceMonitor/PodMonitor's target labels, its relabelings and honorLabels (Prometheus'
scrape.mutateSampleLabels). A label the query matches, groups or joins on must exist, and must mean what
the exporter meant: with honorLabels false an exporter's `pod` is renamed `exported_pod` and `pod` is the
exporter's own pod; with honorLabels true a label the exporter only sometimes sets (DCGM's pod of an
allocated GPU) is filled from the target when absent. Queries are parsed with promql-parser. Alert rules
also go through `promtool check rules` when promtool is installed.
"""

from __future__ import annotations

from infra.verify import facts as F
from infra.verify.checks.alert_rules import promtool_check, rule_queries
from infra.verify.checks.cost_blocks import check_block_dates
from infra.verify.checks.cost_coverage import check_cost_coverage
from infra.verify.checks.dashboards import dashboard_queries
from infra.verify.checks.promql_labels import Analyzer
from infra.verify.checks.scrape_labels import LabelModel
from infra.verify.context import Context
from infra.verify.report import CheckResult


def run(ctx: Context) -> CheckResult:
    res = CheckResult("observability")
    model = LabelModel(ctx)
    analyzer = Analyzer(model)
    seen: set[str] = set()
    queries = [*rule_queries(ctx), *dashboard_queries(ctx)]
    if ctx.job_only:
        # A job brings only its PodMonitor: judge the platform's queries on the trainer's metrics.
        prefix = F.facts()["exporters"]["trainer"]["metricPrefix"]
        queries = [q for q in queries if prefix in q.expr]
    for q in queries:
        analyzer.notes = []
        for line in analyzer.analyse(q):
            if line not in seen:
                seen.add(line)
                res.fail(line, q.owner)
        for note in dict.fromkeys(analyzer.notes):
            if note not in res.notes:
                res.note(note)
        res.examined.append(q.where)
    if not ctx.job_only:
        promtool_check(ctx, res)
        check_cost_coverage(ctx, model, res)
        check_block_dates(ctx, res)
    return res
