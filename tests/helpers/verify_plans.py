"""Plans of the reference stacks for the verify tests, made once per test process, and helpers that
turn them into deliberately broken platforms (the plan model's `replaced`)."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from infra import stackfile
from infra.mockcloud import run_program
from infra.verify import Report, verify
from infra.verify.model import Plan, PlanResource, from_run
from tests.helpers.plans import JOB_STACKS, ROOT, config_for, planned


@functools.cache
def plan(stack: str) -> Plan:
    """The offline plan of a reference stack (platforms only), as `trainplane verify STACK` makes it."""
    raw = stackfile.load(stack, ROOT).object("trainplane:platform")
    return from_run(planned(stack), raw)


def plan_of(platform: dict[str, Any], stack: str = "test") -> Plan:
    """The plan of a platform object given inline (a mutated copy of a reference stack)."""
    return from_run(run_program(config_for(platform), stack), platform)


def edit(plan_: Plan, match: Callable[[PlanResource], bool], change: Callable[[dict], Any]) -> Plan:
    """A copy of `plan_` where `change` edits (in place) a deep copy of the inputs of matching resources."""

    def apply(r: PlanResource) -> Mapping[str, Any] | None:
        if not match(r):
            return None
        inputs = copy.deepcopy(dict(r.inputs))
        result = change(inputs)
        return result if isinstance(result, dict) else inputs

    return plan_.replaced(apply)


def kind(k: str, name: str | None = None) -> Callable[[PlanResource], bool]:
    return lambda r: r.inputs.get("kind") == k and (name is None or r.inputs["metadata"].get("name") == name)


def release(chart: str) -> Callable[[PlanResource], bool]:
    return lambda r: (
        r.type == "kubernetes:helm.sh/v3:Release" and str(r.inputs.get("chart", "")).endswith(chart)
    )


def run(plan_: Plan, check: str) -> Report:
    return verify(plan_, [check])


def lines(report: Report) -> list[str]:
    return [f.line() for f in report.findings]


def dumps(obj: Any) -> str:
    return json.dumps(obj)


def plus(plan_: Plan, *objects: dict[str, Any], type_: str | None = None, deps: tuple[str, ...] = ()) -> Plan:
    """A copy of `plan_` that also sends `objects` (Kubernetes objects, or cloud resources with type_),
    each depending on `deps` (URNs)."""
    from infra.verify.model import build

    extra = []
    for i, obj in enumerate(objects):
        t = type_ or f"kubernetes:test/v1:{obj.get('kind', 'Object')}"
        extra.append(
            PlanResource(
                urn=f"urn:test::{t}::extra-{i}",
                type=t,
                name=f"extra-{i}",
                parent=None,
                custom=True,
                deps=deps,
                inputs=obj,
            )
        )
    return build(
        plan_.stack, (*plan_.resources, *extra), plan_.outputs, plan_.config, plan_.platform, plan_.source
    )


def prometheus_class(name: str | None):
    """Edit a kube-prometheus-stack release: its Prometheus volume names `name` (None: no class)."""

    def change(inputs: dict) -> None:
        spec = inputs["values"]["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
        if name is None:
            spec.pop("storageClassName", None)
        else:
            spec["storageClassName"] = name

    return change


def _rule(expr: str, name: str = "VerifyProbe", **extra):
    def change(inputs: dict) -> None:
        inputs["spec"]["groups"][0]["rules"] = [{"alert": name, "expr": expr, "for": "5m", **extra}]

    return change


def _honor(value: bool):
    """The DCGM ServiceMonitor with `honorLabels: value` and none of the platform's relabelings (the
    chart's own settings, apart from honorLabels)."""

    def change(inputs: dict) -> None:
        monitor = inputs["values"].setdefault("dcgmExporter", {}).setdefault("serviceMonitor", {})
        monitor["honorLabels"] = value
        monitor["relabelings"] = []

    return change


def _only_rules(p):
    # Dashboards out of the way: these tests look at one rule at a time.
    return p.replaced(
        lambda r: {"__drop__": True} if kind("ConfigMap")(r) and "dashboard" in r.name else None
    )


def probe(expr: str, honor: bool | None = None, **extra) -> list[str]:
    p = _only_rules(edit(plan("aws-dev"), kind("PrometheusRule"), _rule(expr, **extra)))
    if honor is not None:
        p = edit(p, release("gpu-operator"), _honor(honor))
    # The probe's own lines: the platform's other rules stay (recorded series the probe may read), and
    # with a changed scrape they may have findings of their own. promtool's verdict is on the whole rule
    # file, the probe included, so its line stays too.
    where = f"rule {extra.get('name', 'VerifyProbe')}:"
    return [
        line for line in lines(run(p, "observability")) if where in line or "promtool check rules" in line
    ]


@functools.cache
def stack_plan(stack: str) -> Plan:
    """The plan `trainplane verify STACK` checks: a platform's, or a job's on its platform's plan."""
    if stack not in JOB_STACKS:
        return plan(stack)
    job = stackfile.load(stack, ROOT).object("trainplane:job")
    assert isinstance(job, dict)
    return from_run(planned(stack), job, plan(JOB_STACKS[stack]))


@functools.cache
def stack_report(stack: str) -> Report:
    return verify(stack_plan(stack))


def outcome(report: Report) -> list[tuple[Any, ...]]:
    """A report check by check, without where the plan came from (stack or dump file)."""
    return [
        (c.name, c.status, sorted(f.line() for f in c.findings), sorted(c.notes), sorted(c.examined))
        for c in report.checks
    ]
