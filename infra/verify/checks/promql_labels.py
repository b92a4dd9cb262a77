"""Which labels a PromQL query uses, against the label model (checks/scrape_labels.py): queries are parsed
with promql-parser, Grafana variables substituted first. One line per label a query matches, groups or
joins on that its series do not carry, or carry with another meaning."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from infra.verify.checks.scrape_labels import NOTE, LabelModel


@dataclass(frozen=True)
class Query:
    where: str  # "PrometheusRule monitoring/trainplane alert GpuIdleButAllocated"
    expr: str
    owner: str


GRAFANA_VARS = re.compile(r"\$\{?__(rate_interval|interval|range)\}?|\[\[\w+\]\]|\$\{\w+(:\w+)?\}|\$\w+")


def grafana_to_promql(expr: str) -> str:
    def sub(m: re.Match) -> str:
        return "5m" if m.group(0).startswith(("$__", "${__")) else "x"

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
        self._depth = 0  # nesting of recording rules being walked

    def _use(
        self, labels: dict[str, str], why: dict[str, str], label: str, context: str, metrics: str
    ) -> None:
        origin = labels.get(label)
        if metrics == "vector()":
            return  # a constant carries the labels label_replace gave it, and joins on nothing else
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
        if str(name) in getattr(self.model, "recorded", {}):
            return self._recorded(str(name), vs)
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

    def _recorded(self, name: str, vs: Any) -> Walked:
        """A recording rule's series: the labels its query outputs (walked on its own, so the rule's own
        problems are reported once, against the rule)."""
        import promql_parser as P

        if self._depth > 4:  # a record reading itself through others: no labels to learn
            return None
        sub = Analyzer(self.model)
        sub._depth = self._depth + 1
        try:
            walked = sub.walk(P.parse(self.model.recorded[name]))
        except Exception:  # its own query is reported as not valid PromQL where it is analysed
            return None
        if walked is None:
            return None
        labels, why, _ = walked
        for m in vs.matchers.matchers:
            if m.name == "__name__" or (m.name not in labels and _matches_empty(str(m.op), m.value)):
                continue
            self._use(labels, why, m.name, f"{m.name}{_op(m.op)}{json.dumps(m.value)}", name)
        return dict(labels), dict(why), name

    def _call(self, node: Any) -> Walked:
        out = None
        for a in node.args:
            r = self.walk(a)
            if r is not None and out is None:
                out = r
        fname = str(getattr(node.func, "name", ""))
        if fname == "vector":
            # vector(s): one series without labels (label_replace then gives it some).
            out = ({}, {}, "vector()")
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
        if matching is not None and str(matching.type).endswith(("On", "Include")):
            for lb in matching.labels:
                self._use(lhs[0], lhs[1], lb, f"on ({lb})", lhs[2])
                self._use(rhs[0], rhs[1], lb, f"on ({lb})", rhs[2])
        # `a or b` holds series of both sides: either side's labels may be on the result.
        copied = {**rhs[0], **lhs[0]} if str(node.op) == "or" else dict(lhs[0])
        for lb in getattr(mod, "group_labels", None) or []:
            self._use(rhs[0], rhs[1], lb, f"group_left/right ({lb})", rhs[2])
            if lb in rhs[0]:
                copied[lb] = rhs[0][lb]  # group_left (lb) copies lb from the one side onto the result
        return copied, lhs[1], lhs[2]

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
