"""The reference fleet (stacks/Pulumi.fleet-research.yaml) as verify sees it, built from the shared
offline plans of its stacks; `edit` plants a defect in its objects (by cluster: "manager" or a worker's
name) before the checks split them again."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import yaml

from components.spec.fleet import FleetSpec
from infra import stackfile
from infra.resources import normal
from infra.verify.fleet_model import fleet_plan
from infra.verify.model import Plan, build, from_run
from tests.helpers.plans import ROOT, planned

STACK = "fleet-research"
Objects = dict[str, list[dict[str, Any]]]


def kubeconfig(server: str = "https://10.0.0.1:443", **user: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "w", "cluster": {"server": server, "certificate-authority-data": "Q0E="}}],
            "users": [{"name": "mk", "user": {"token": "t0ken", **user}}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "mk"}}],
            "current-context": "w",
        }
    )


def spec_object() -> dict[str, Any]:
    raw = stackfile.load(STACK, ROOT).object("trainplane:fleet")
    assert isinstance(raw, dict)
    return copy.deepcopy(raw)


def fleet(
    edit: Callable[[Objects], None] | None = None,
    spec: dict[str, Any] | None = None,
    manager_config: dict[str, Any] | None = None,
    manager_kueue: Callable[[dict[str, Any]], None] | None = None,
    worker_plans: dict[str, Plan] | None = None,
) -> Plan:
    """The reference fleet's plan for verify; `spec`/`manager_config` replace the fleet spec and the
    manager platform's config object the checks read; `manager_kueue` edits the manager's Kueue
    Configuration (its Helm release's managerConfig.controllerManagerConfigYaml); `worker_plans` replace
    workers' platform plans by name."""
    fspec = FleetSpec.load(spec or spec_object())
    manager_raw = stackfile.load("aws-fleet-manager", ROOT).object("trainplane:platform")
    manager = from_run(
        planned("aws-fleet-manager"), manager_config if manager_config is not None else manager_raw
    )
    if manager_kueue is not None:
        manager = _edit_kueue(manager, manager_kueue)
    workers = {
        w.name: (w.platform_stack, (worker_plans or {}).get(w.name) or from_run(planned(w.platform_stack)))
        for w in FleetSpec.load(spec_object()).workers
    }
    plan = from_run(planned(STACK))
    if edit is not None:
        split = fleet_plan(fspec, plan, manager, workers).fleet
        owner: dict[int, Any] = {}
        objects: Objects = {}
        for cluster, objs in split.by_cluster.items():
            for o in objs:
                body = copy.deepcopy(dict(o.body))
                owner[id(body)] = o.resource
                objects.setdefault(cluster, []).append(body)
        edit(objects)
        kept = {id(r): body for bodies in objects.values() for body in bodies for r in [owner[id(body)]]}
        resources = []
        for r in plan.resources:
            if not (r.is_kubernetes_object and r.inputs.get("kind")):
                resources.append(r)
            elif id(r) in kept:
                resources.append(replace(r, inputs=normal(kept[id(r)])))
        plan = build(plan.stack, tuple(resources), plan.outputs, plan.config)
    return fleet_plan(fspec, plan, manager, workers)


def _edit_kueue(manager: Plan, edit: Callable[[dict[str, Any]], None]) -> Plan:
    resources = []
    for r in manager.resources:
        if r.type == "kubernetes:helm.sh/v3:Release" and str(r.inputs.get("chart", "")).endswith("/kueue"):
            inputs = copy.deepcopy(dict(r.inputs))
            mc = inputs["values"]["managerConfig"]
            config = yaml.safe_load(mc["controllerManagerConfigYaml"])
            edit(config)
            mc["controllerManagerConfigYaml"] = yaml.safe_dump(config, sort_keys=False)
            r = replace(r, inputs=normal(inputs))
        resources.append(r)
    return build(manager.stack, tuple(resources), manager.outputs, manager.config)
