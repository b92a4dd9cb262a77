"""fleet-dispatch: the manager dispatches each team's jobs to the workers, in the fleet's order.

kueue@v0.19.2: an AdmissionCheck whose `controllerName` is `kueue.x-k8s.io/multikueue`
(apis/kueue/v1beta2/multikueue_types.go MultiKueueControllerName) and whose `parameters` name a
MultiKueueConfig (pkg/controller/admissionchecks/multikueue/admissioncheck.go: ConfigFromRef, an inactive
check otherwise); the config's `clusters` are the MultiKueueClusters in the order the Incremental
dispatcher nominates them. The manager's Kueue runs the MultiKueue dispatcher its Configuration names
(the platform's `queueing.fleetDispatcher`, which must be the fleet's `dispatch.dispatcher`), and the
JobSet CRD and controller must be on the manager: its JobSet webhook defaults `spec.managedBy` to
MultiKueue (pkg/controller/jobframework/defaults.go ApplyDefaultForManagedBy), which a manager without
JobSet cannot hold.

The order is the order that happens only if the Incremental dispatcher asks one worker per round: it
nominates `multiKueue.incrementalDispatcherConfig.stepSize` workers at once (default 3:
pkg/controller/workloaddispatcher/incrementaldispatcher.go DefaultStepSize) and the first of them to admit
wins. And the manager must not block admission behind one job (waitForPodsReady.blockAdmission: the
manager's pods run on the workers, so one job no worker admits would hold every team's jobs). And each
worker that must refuse a job refuses it (fleet_refusal.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml

from infra.verify import facts as F
from infra.verify.checks.fleet_refusal import check_refusals
from infra.verify.checks.rack_platform import DRA_CHART, fleet_findings
from infra.verify.context import Context
from infra.verify.fleet_model import MANAGER, FleetPlan
from infra.verify.report import CheckResult

NAME = "fleet-dispatch"
CONTROLLER: str = F.facts()["multiKueue"]["controllerName"]
DEFAULT_STEP: int = F.facts()["multiKueue"]["incrementalStepSize"]
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"


def _check_names(cq_spec: dict) -> list[str]:
    strategy = (cq_spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    return [str(c.get("name")) for c in strategy] + [str(c) for c in cq_spec.get("admissionChecks") or []]


def run(ctx: Context) -> CheckResult:
    result = CheckResult(NAME)
    fleet: FleetPlan = ctx.fleet
    _check_manager(result, fleet)
    check_refusals(result, fleet)
    order = [w.name for w in fleet.workers]
    for cq in fleet.on(MANAGER, "ClusterQueue"):
        result.examined.append(cq.ref)
        checks = [fleet.find(MANAGER, "AdmissionCheck", n) for n in _check_names(dict(cq.spec))]
        mk = [c for c in checks if c is not None and c.spec.get("controllerName") == CONTROLLER]
        if not mk:
            result.fail(
                f"{cq.ref} on the manager has no AdmissionCheck with controllerName {CONTROLLER}: its jobs "
                "would run on the manager, not on a worker",
                cq.ref,
            )
            continue
        params = dict(mk[0].spec.get("parameters") or {})
        if params.get("kind") != "MultiKueueConfig" or params.get("apiGroup") != "kueue.x-k8s.io":
            result.fail(
                f"{mk[0].ref}: parameters {params} do not name a kueue.x-k8s.io MultiKueueConfig", mk[0].ref
            )
            continue
        config = fleet.find(MANAGER, "MultiKueueConfig", str(params.get("name")))
        if config is None:
            result.fail(
                f"{mk[0].ref} names MultiKueueConfig {params.get('name')!r}, which the manager lacks",
                mk[0].ref,
            )
            continue
        _check_config(result, fleet, config, order)
    return result


def _check_config(result: CheckResult, fleet: FleetPlan, config, order: list[str]) -> None:
    if config.ref in result.examined:
        return
    result.examined.append(config.ref)
    clusters = [str(c) for c in config.spec.get("clusters") or []]
    twice = sorted(n for n, k in Counter(clusters).items() if k > 1)
    if twice:
        result.fail(f"{config.ref} lists {', '.join(twice)} more than once", config.ref)
    if clusters != order:
        result.fail(
            f"{config.ref} lists clusters [{', '.join(clusters)}], not every worker once in dispatch order "
            f"[{', '.join(order)}]",
            config.ref,
        )
    for name in dict.fromkeys(clusters):
        if fleet.find(MANAGER, "MultiKueueCluster", name) is None:
            result.fail(f"{config.ref} lists MultiKueueCluster {name}, which the manager lacks", config.ref)


def _check_manager(result: CheckResult, fleet: FleetPlan) -> None:
    manager = fleet.manager
    queueing = dict((manager.config or {}).get("queueing") or {})
    if not queueing.get("fleetManager"):
        result.fail(
            f"manager platform {manager.stack} does not set queueing.fleetManager: its Kueue has no MultiKueue "
            "configuration",
            manager.stack,
        )
    dispatcher = queueing.get("fleetDispatcher", "Incremental")
    if dispatcher != fleet.spec.dispatch.dispatcher:
        result.fail(
            f"manager platform {manager.stack} runs the {dispatcher} dispatcher (queueing.fleetDispatcher), the "
            f"fleet asks for {fleet.spec.dispatch.dispatcher} (dispatch.dispatcher)",
            manager.stack,
        )
    _check_kueue_config(result, fleet)
    # Rack-scale workers: MultiKueue syncs no DeviceClasses (docs/rack-scale.md "A fleet").
    workers = [(w.name, w.plan.node_pools, bool(w.plan.releases(DRA_CHART))) for w in fleet.workers]
    for line in fleet_findings(manager.stack, manager_kueue_config(fleet), workers):
        result.fail(line, manager.stack)
    if not manager.releases("jobset"):
        result.fail(
            f"manager platform {manager.stack} does not run JobSet: the manager holds each job's JobSet",
            manager.stack,
        )


def manager_kueue_config(fleet: FleetPlan) -> dict[str, Any] | None:
    """The manager's Kueue Configuration (chart value managerConfig.controllerManagerConfigYaml); None when
    the manager's plan has no Kueue release (recorded outputs only)."""
    for rel in fleet.manager.releases("kueue"):
        text = F.dig(rel.values, "managerConfig.controllerManagerConfigYaml")
        try:
            config = yaml.safe_load(text) if isinstance(text, str) else {}
        except yaml.YAMLError:
            config = {}
        return config if isinstance(config, dict) else {}
    return None


def _check_kueue_config(result: CheckResult, fleet: FleetPlan) -> None:
    config = manager_kueue_config(fleet)
    if config is None:
        return
    stack = fleet.manager.stack
    mk = dict(config.get("multiKueue") or {})
    order = [w.name for w in fleet.workers]
    if mk.get("dispatcherName") == INCREMENTAL and len(order) > 1:
        step = F.dig(mk, "incrementalDispatcherConfig.stepSize")
        step = DEFAULT_STEP if step is None else int(step)
        if step > 1:
            together = order[:step]
            result.fail(
                f"dispatch order: the manager's Incremental dispatcher asks {step} workers per round "
                f"(multiKueue.incrementalDispatcherConfig.stepSize), so {', '.join(together)} get each job at "
                f"once and the first to admit it wins; the plan's order [{', '.join(order)}] is not the order "
                "that happens (stepSize 1 asks them one at a time)",
                stack,
            )
    if F.dig(config, "waitForPodsReady.blockAdmission") is True:
        result.fail(
            f"manager platform {stack} blocks admission (waitForPodsReady.blockAdmission): the manager's pods run "
            "on the workers, so one job no worker admits holds every team's jobs until its timeout",
            stack,
        )
