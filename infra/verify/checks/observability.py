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

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.report import CheckResult

EXPORTED = "exported_"
# A reason that labels are unknown, as opposed to wrong: reported as a note, not a failure.
NOTE = "note: "


@dataclass
class MetricLabels:
    """Labels a metric carries after the scrape: name -> origin ("exporter", "target", "shadowed", "mixed")."""

    exporter: str
    labels: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Query:
    where: str  # "PrometheusRule monitoring/trainplane alert GpuIdleButAllocated"
    expr: str
    owner: str


@dataclass
class ScrapeSpec:
    exporter: str
    kind: str
    honor_labels: bool
    relabelings: tuple[Mapping[str, Any], ...]
    owner: str
    # The namespace of the scrape target (the exporter's own pods), when known.
    namespace: str | None = None


@cache
def trainer_metric_labels() -> dict[str, tuple[str, ...]]:
    """Metric name -> label names, read from the trainer's own prometheus_client registry.

    prometheus_client keeps a metric's name and label names in `_name` / `_labelnames` (no public
    accessor for label names of a metric without children); counters are exposed as <name>_total."""
    try:
        from trainer.metrics import Metrics
    except ImportError:  # prometheus_client comes with the trainer extra, not the infra install
        return {}
    out: dict[str, tuple[str, ...]] = {}
    registry = Metrics("verify").registry
    for collector in set(registry._names_to_collectors.values()):
        name, labels = getattr(collector, "_name", None), tuple(getattr(collector, "_labelnames", ()))
        if not name:
            continue
        out[str(name)] = labels
        if getattr(collector, "_type", "") == "counter":
            out[f"{name}_total"] = labels
    return out


def _target_labels(kind: str, relabelings: tuple[Mapping[str, Any], ...]) -> set[str]:
    labels = set(F.facts()["targetLabels"][kind])
    for r in relabelings:
        action = str(r.get("action", "replace")).lower()
        if action == "replace" and r.get("targetLabel"):
            labels.add(str(r["targetLabel"]))
        elif action == "labeldrop":
            labels = {lb for lb in labels if not re.fullmatch(str(r.get("regex", "")), lb)}
        elif action == "labelkeep":
            labels = {lb for lb in labels if re.fullmatch(str(r.get("regex", "")), lb)}
    return labels


def scraped_labels(scrape: ScrapeSpec, emitted: set[str], sometimes: set[str]) -> MetricLabels:
    """Prometheus' merge of exposed and target labels (scrape.mutateSampleLabels)."""
    target = _target_labels(scrape.kind, scrape.relabelings)
    out = MetricLabels(scrape.exporter)
    for lb in target:
        out.labels[lb] = "target"
    for lb in emitted | sometimes:
        if lb not in target:
            out.labels[lb] = "exporter"
        elif scrape.honor_labels:
            if lb in sometimes:
                out.labels[lb] = "mixed"
                out.why[lb] = (
                    f"{scrape.exporter} sets {lb} only sometimes (a GPU allocated to a pod); with honorLabels "
                    f"true Prometheus fills in the scrape target's own {lb} otherwise ({scrape.owner}); drop "
                    f"the target's {lb} with a labeldrop relabeling or exclude namespace "
                    f"{scrape.namespace or 'of the exporter'} in the selector"
                )
            else:
                out.labels[lb] = "exporter"
        else:
            out.labels[lb] = "shadowed"
            out.labels[EXPORTED + lb] = "exporter"
            out.why[lb] = (
                f"{scrape.owner} scrapes with honorLabels false: {lb} is the scrape target's, {scrape.exporter}'s "
                f"own {lb} is in {EXPORTED}{lb}"
            )
    return out


class LabelModel:
    """Which labels each metric carries, for this platform's scrape configuration."""

    def __init__(self, ctx: Context):
        self.scrapes: dict[str, ScrapeSpec] = {}
        for s in ctx.charts.scrapes:
            self.scrapes[s.exporter] = ScrapeSpec(
                s.exporter, s.kind, s.honor_labels, s.relabelings, s.owner, s.namespace
            )
        for pod in ctx.pods[:1]:
            for pm in pod.plan.objects("PodMonitor"):
                for ep in pm.spec.get("podMetricsEndpoints") or []:
                    self.scrapes["trainer"] = ScrapeSpec(
                        "trainer",
                        "PodMonitor",
                        bool(ep.get("honorLabels", False)),
                        tuple(ep.get("relabelings") or ()),
                        pm.ref,
                    )
        self.exporters = F.facts()["exporters"]

    def exporter_of(self, metric: str) -> str | None:
        for name, ex in self.exporters.items():
            if metric.startswith(ex["metricPrefix"]):
                return name
        return None

    def labels(self, metric: str) -> MetricLabels | str:
        """The metric's labels, or a reason why they are unknown / the metric does not exist."""
        name = self.exporter_of(metric)
        if name is None:
            return f"metric {metric} comes from no exporter verify knows (facts.yaml exporters)"
        ex = self.exporters[name]
        scrape = self.scrapes.get(name)
        if scrape is None:
            return f"metric {metric}: nothing in the plan scrapes {name}"
        if name == "trainer":
            known = trainer_metric_labels()
            if not known:
                return (
                    NOTE
                    + "the trainer's metrics are unknown here (install the trainer extra: prometheus-client)"
                )
            if metric not in known:
                return f"metric {metric} is not exported by the trainer (trainer/metrics.py)"
            emitted, sometimes = set(known[metric]), set[str]()
        elif "families" in ex:
            if metric not in ex["families"]:
                return (
                    NOTE + f"metric {metric}: its labels are not in facts.yaml ({name} families); not checked"
                )
            emitted, sometimes = set(ex["families"][metric]), set()
        else:
            emitted, sometimes = set(ex.get("labels") or ()), set(ex.get("workloadLabels") or ())
        return scraped_labels(scrape, emitted, sometimes)


# ---- PromQL ------------------------------------------------------------------------------------------


GRAFANA_VARS = re.compile(r"\$__(rate_interval|interval|range)|\[\[\w+\]\]|\$\{\w+(:\w+)?\}|\$\w+")


def grafana_to_promql(expr: str) -> str:
    def sub(m: re.Match) -> str:
        return "5m" if m.group(0).startswith("$__") else "x"

    return GRAFANA_VARS.sub(sub, expr)


def _matches_empty(op: str, value: str) -> bool:
    if op in ("MatchOp.Equal",):
        return value == ""
    if op in ("MatchOp.NotEqual",):
        return value != ""
    if op == "MatchOp.Re":
        return re.fullmatch(value, "") is not None
    if op == "MatchOp.NotRe":
        return re.fullmatch(value, "") is None
    return False


# What walking a query node gives: its output labels (name -> origin), the reasons of shadowed or mixed
# ones, and the metrics they come from; None for scalars.
Walked = tuple[dict[str, str], dict[str, str], str] | None


class Analyzer:
    def __init__(self, model: LabelModel):
        self.model = model
        self.problems: dict[str, list[str]] = {}
        self.unknown: list[str] = []
        self.notes: list[str] = []

    def _use(
        self, labels: dict[str, str], why: dict[str, str], label: str, context: str, metrics: str
    ) -> None:
        origin = labels.get(label)
        if origin is None:
            key = f"label {label!r}, which {metrics} does not carry"
        elif origin in ("shadowed", "mixed"):
            key = f"label {label!r} of {metrics}: {why.get(label, origin)}"
        else:
            return
        # One line per label and reason; the places in the query that use it are listed together.
        places = self.problems.setdefault(key, [])
        if context not in places:
            places.append(context)

    def walk(self, node: Any) -> Walked:
        """Output labels (name -> origin), reasons, and the metrics they come from; None for scalars."""
        import promql_parser as P

        if isinstance(node, P.VectorSelector | P.MatrixSelector):
            return self._selector(node.vector_selector if isinstance(node, P.MatrixSelector) else node)
        if isinstance(node, P.ParenExpr | P.UnaryExpr | P.SubqueryExpr):
            return self.walk(node.expr)
        if isinstance(node, P.Call):
            return self._call(node)
        if isinstance(node, P.AggregateExpr):
            return self._aggregate(node)
        if isinstance(node, P.BinaryExpr):
            return self._binary(node)
        return None

    def _selector(self, vs: Any) -> Walked:
        name = vs.name or next((m.value for m in vs.matchers.matchers if m.name == "__name__"), None)
        if not name:
            return {}, {}, "a selector without a metric name"
        got = self.model.labels(str(name))
        if isinstance(got, str):
            (self.notes if got.startswith(NOTE) else self.unknown).append(got.removeprefix(NOTE))
            return None
        scrape = self.model.scrapes.get(got.exporter)
        if (
            scrape is not None
            and scrape.namespace
            and _excludes(vs.matchers.matchers, "namespace", scrape.namespace)
        ):
            # Series of the exporter's own namespace are filtered out: what is left of a "mixed" label
            # is the exporter's (the workload's), never the target's.
            got.labels = {k: ("exporter" if v == "mixed" else v) for k, v in got.labels.items()}
        for m in vs.matchers.matchers:
            if m.name == "__name__" or (m.name not in got.labels and _matches_empty(str(m.op), m.value)):
                continue
            self._use(got.labels, got.why, m.name, f"{m.name}{_op(m.op)}{json.dumps(m.value)}", name)
        return dict(got.labels), dict(got.why), str(name)

    def _call(self, node: Any) -> Walked:
        out = None
        for a in node.args:
            r = self.walk(a)
            if r is not None and out is None:
                out = r
        fname = str(getattr(node.func, "name", ""))
        if out is not None and fname in ("label_replace", "label_join") and len(node.args) > 1:
            dst = getattr(node.args[1], "val", None)
            if dst:
                out[0][str(dst)] = "query"
        return out

    def _aggregate(self, node: Any) -> Walked:
        inner = self.walk(node.expr)
        if inner is None:
            return None
        labels, why, metrics = inner
        mod = node.modifier
        if mod is None:
            return {}, {}, metrics
        names = list(mod.labels)
        by = "By" in str(mod.type)
        for lb in names:
            self._use(labels, why, lb, f"{'by' if by else 'without'} ({lb})", metrics)
        return {k: v for k, v in labels.items() if (k in names) == by}, why, metrics

    def _binary(self, node: Any) -> Walked:
        lhs, rhs = self.walk(node.lhs), self.walk(node.rhs)
        if lhs is None or rhs is None:
            return lhs or rhs
        mod = node.modifier
        matching = getattr(mod, "matching", None) if mod is not None else None
        if matching is not None and "On" in str(matching.type):
            for lb in matching.labels:
                self._use(lhs[0], lhs[1], lb, f"on ({lb})", lhs[2])
                self._use(rhs[0], rhs[1], lb, f"on ({lb})", rhs[2])
        for lb in getattr(mod, "group_labels", None) or []:
            self._use(rhs[0], rhs[1], lb, f"group_left/right ({lb})", rhs[2])
        return lhs

    def analyse(self, query: Query) -> list[str]:
        import promql_parser as P

        self.problems, self.unknown = {}, []
        try:
            tree = P.parse(grafana_to_promql(query.expr))
        except Exception as e:  # promql-parser raises ValueError with the parser's message
            return [f"{query.where}: not valid PromQL ({str(e).splitlines()[0]}): {query.expr}"]
        self.walk(tree)
        lines = [f"{query.where}: {', '.join(ctx)} use {key}" for key, ctx in self.problems.items()]
        return lines + [f"{query.where}: {u}" for u in dict.fromkeys(self.unknown)]


def _excludes(matchers: Any, label: str, value: str) -> bool:
    """Whether a selector's matchers drop every series whose `label` is `value`."""
    for m in matchers:
        if m.name != label:
            continue
        op = str(m.op)
        if op == "MatchOp.NotEqual" and m.value == value:
            return True
        if op == "MatchOp.NotRe" and re.fullmatch(m.value, value):
            return True
        if op == "MatchOp.Equal" and m.value != value:
            return True
        if op == "MatchOp.Re" and not re.fullmatch(m.value, value):
            return True
    return False


def _op(op: Any) -> str:
    return {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}.get(
        str(op), "?"
    )


# ---- where the queries are ------------------------------------------------------------------------------


def rule_queries(ctx: Context) -> Iterator[Query]:
    for pr in ctx.platform.objects("PrometheusRule"):
        for g in pr.spec.get("groups") or []:
            for r in g.get("rules") or []:
                name = r.get("alert") or r.get("record")
                yield Query(f"{pr.ref} rule {name}", str(r.get("expr", "")), pr.ref)


def _panels(panels: list[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for p in panels or []:
        yield p
        yield from _panels(p.get("panels") or [])


LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$")


def dashboard_queries(ctx: Context) -> Iterator[Query]:
    for cm in ctx.platform.objects("ConfigMap"):
        if cm.labels.get("grafana_dashboard") is None:
            continue
        for file_name, text in (cm.body.get("data") or {}).items():
            try:
                board = json.loads(text)
            except (TypeError, json.JSONDecodeError):
                continue
            title = board.get("title", file_name)
            for p in _panels(board.get("panels") or []):
                for t in p.get("targets") or []:
                    if t.get("expr"):
                        yield Query(f"dashboard {title!r} panel {p.get('title')!r}", str(t["expr"]), cm.ref)
            for v in (board.get("templating") or {}).get("list") or []:
                q = v.get("query")
                q = q.get("query") if isinstance(q, dict) else q
                m = LABEL_VALUES.match(str(q or ""))
                if m:
                    # label_values(sel, label): the label must exist on the selector's series.
                    yield Query(
                        f"dashboard {title!r} variable {v.get('name')!r}",
                        f"count by ({m.group(2)}) ({m.group(1)})",
                        cm.ref,
                    )


def promtool_check(ctx: Context, res: CheckResult) -> None:
    promtool = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    rules = ctx.platform.objects("PrometheusRule")
    if not rules:
        return
    if promtool is None:
        res.note("promtool not installed: alert rules not run through `promtool check rules`")
        return
    for pr in rules:
        with tempfile.NamedTemporaryFile("w", suffix=".rules.yaml", delete=False) as f:
            yaml.safe_dump({"groups": list(pr.spec.get("groups") or [])}, f)
            path = f.name
        try:
            proc = subprocess.run(
                [promtool, "check", "rules", path], capture_output=True, text=True, timeout=60
            )
        finally:
            Path(path).unlink(missing_ok=True)
        if proc.returncode != 0:
            detail = " ".join((proc.stderr or proc.stdout).split())[:300]
            res.fail(f"{pr.ref}: promtool check rules failed: {detail}", pr.ref)
        else:
            res.examined.append(f"promtool check rules {pr.ref}")


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
    return res
