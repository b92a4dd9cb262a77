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
from tests.helpers.plans import ROOT, config_for, planned


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
