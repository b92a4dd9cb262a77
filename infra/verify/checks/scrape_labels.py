"""Which labels each metric carries in Prometheus (the observability check's label model).

Worked out from what its exporter emits (facts.yaml `exporters`; the trainer's own registry in
trainer/metrics.py) and how it is scraped: the ServiceMonitor/PodMonitor's target labels, its relabelings
and honorLabels (Prometheus' scrape.mutateSampleLabels).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from contract.recovery import CONTROLLER_NAME
from infra.verify import facts as F
from infra.verify.context import Context

EXPORTED = "exported_"
# A reason that labels are unknown, as opposed to wrong: reported as a note, not a failure.
NOTE = "note: "


@dataclass
class MetricLabels:
    """Labels a metric carries after the scrape: name -> origin ("exporter", "target", "shadowed", "mixed")."""

    exporter: str
    labels: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


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
        # A platform without teams (a fleet's MultiKueue manager) runs no training pod, so no job's
        # PodMonitor exists to read the trainer's scrape from.
        self.has_pods = bool(ctx.pods)
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
        self._controller_scrape(getattr(ctx, "platform", None))
        self.exporters = F.facts()["exporters"]
        # `up` (and scrape_*): Prometheus' own series of every target, with that target's labels only.
        # The chart's scrapes give the standard target labels; the plan's own ServiceMonitors (the cost
        # rules' node -> pool map, components/incluster/cost_rules.py) add what their relabelings set.
        self.target_labels: set[str] = set(F.facts()["targetLabels"]["ServiceMonitor"])
        platform = getattr(ctx, "platform", None)
        for sm in platform.objects("ServiceMonitor") if platform is not None else ():
            for ep in sm.spec.get("endpoints") or []:
                self.target_labels |= _target_labels("ServiceMonitor", tuple(ep.get("relabelings") or ()))
        # Series the platform's recording rules produce (record name -> expr): their labels are the
        # output labels of the rule's query (promql_labels.Analyzer walks it).
        self.recorded: dict[str, str] = {}
        for pr in platform.objects("PrometheusRule") if platform is not None else ():
            for g in pr.spec.get("groups") or []:
                for r in g.get("rules") or []:
                    if r.get("record"):
                        self.recorded.setdefault(str(r["record"]), str(r.get("expr", "")))

    def _controller_scrape(self, platform: Any) -> None:
        """The GPU health controller's own PodMonitor (idle reclaim's exemption series): honorLabels keeps
        the exempt job's namespace and job over the controller pod's."""
        for pm in platform.objects("PodMonitor") if platform is not None else ():
            if pm.name != CONTROLLER_NAME:
                continue
            for ep in pm.spec.get("podMetricsEndpoints") or []:
                self.scrapes["gpu-health-controller"] = ScrapeSpec(
                    "gpu-health-controller",
                    "PodMonitor",
                    bool(ep.get("honorLabels", False)),
                    tuple(ep.get("relabelings") or ()),
                    pm.ref,
                )

    def exporter_of(self, metric: str) -> str | None:
        for name, ex in self.exporters.items():
            if metric.startswith(ex["metricPrefix"]):
                return name
        return None

    def labels(self, metric: str) -> MetricLabels | str:
        """The metric's labels, or a reason why they are unknown / the metric does not exist."""
        if metric == "up":
            return MetricLabels(
                "Prometheus (a scrape target's up)", dict.fromkeys(self.target_labels, "target")
            )
        return self._exporter_labels(metric)

    def _exporter_labels(self, metric: str) -> MetricLabels | str:
        name = self.exporter_of(metric)
        if name is None:
            return f"metric {metric} comes from no exporter verify knows (facts.yaml exporters)"
        ex = self.exporters[name]
        scrape = self.scrapes.get(name)
        if scrape is None:
            return (
                NOTE + "trainer metrics: no training pod on this platform (no team); not checked"
                if name == "trainer" and not self.has_pods
                else f"metric {metric}: nothing in the plan scrapes {name}"
            )
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
