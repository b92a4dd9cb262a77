"""What `verify FLEET` looks at: the fleet stack's own plan (objects on the manager and on each worker),
the manager platform's plan and each worker platform's plan, in the fleet's dispatch order.

A fleet stack's Kubernetes objects are sent through one Kubernetes provider per cluster; which cluster an
object lands on is read from its provider: the provider's kubeconfig input is the manager's or a
worker's `kubeconfig` output (the stack references' values), else the provider's name names the worker
(`...<worker>...`) or the manager.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from components.job_fleet_stack import FleetOutputs
from infra.verify.model import K8sObject, Plan, typed_outputs

MANAGER = "manager"


@dataclass(frozen=True)
class FleetWorkerPlan:
    name: str
    stack: str
    plan: Plan


@dataclass(frozen=True)
class FleetPlan:
    """A fleet: its spec (components.spec.fleet.FleetSpec), its own plan, the manager's and the workers'
    plans (workers in dispatch order)."""

    spec: Any
    plan: Plan
    manager: Plan
    workers: tuple[FleetWorkerPlan, ...]
    # The fleet plan's objects by cluster: MANAGER or a worker's name.
    by_cluster: Mapping[str, tuple[K8sObject, ...]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.spec.name)

    def on(self, cluster: str, kind: str | None = None, namespace: str | None = None) -> list[K8sObject]:
        return [
            o
            for o in self.by_cluster.get(cluster, ())
            if (kind is None or o.kind == kind) and (namespace is None or o.namespace == namespace)
        ]

    def find(self, cluster: str, kind: str, name: str, namespace: str | None = None) -> K8sObject | None:
        return next((o for o in self.on(cluster, kind, namespace) if o.name == name), None)

    def worker(self, name: str) -> FleetWorkerPlan | None:
        return next((w for w in self.workers if w.name == name), None)


def dispatch_order(spec: Any, outputs: FleetOutputs | None) -> list[str]:
    """The workers' names in dispatch order: the fleet stack's `workers` output (name, order), else the
    spec's list."""
    if outputs is not None and outputs.workers:
        return [w.name for w in outputs.dispatch_order()]
    return [w.name for w in spec.workers]


def split_by_cluster(
    plan: Plan, manager: Plan, workers: list[FleetWorkerPlan]
) -> dict[str, tuple[K8sObject, ...]]:
    """The fleet plan's objects by the cluster their provider reaches (module docstring)."""
    providers = {r.urn: r for r in plan.resources if r.type == "pulumi:providers:kubernetes"}
    kubeconfigs = {MANAGER: _kubeconfig(manager)}
    kubeconfigs.update({w.name: _kubeconfig(w.plan) for w in workers})

    def cluster(obj: K8sObject) -> str:
        urn = (obj.resource.provider or "").rsplit("::", 1)[0]
        provider = providers.get(urn)
        if provider is None:
            return MANAGER
        given = provider.inputs.get("kubeconfig")
        for name, kubeconfig in kubeconfigs.items():
            if given is not None and kubeconfig is not None and given == kubeconfig:
                return name
        # Longest first: worker "gpu" must not claim provider "worker-gpu-2".
        for w in sorted(workers, key=lambda w: -len(w.name)):
            if w.name in provider.name and MANAGER not in provider.name:
                return w.name
        return MANAGER

    out: dict[str, list[K8sObject]] = {}
    for o in plan.iter_objects():
        out.setdefault(cluster(o), []).append(o)
    return {k: tuple(v) for k, v in out.items()}


def _kubeconfig(platform: Plan) -> str | None:
    return platform.platform_outputs.kubeconfig if platform.platform_outputs else None


def fleet_plan(spec: Any, plan: Plan, manager: Plan, workers: dict[str, tuple[str, Plan]]) -> Plan:
    """The fleet stack's plan as verify runs it: kind "fleet", its outputs parsed as a fleet's
    (FleetOutputs; PlanError naming the key it refuses), the FleetPlan in `fleet`."""
    outputs = (
        plan.fleet_outputs
        if plan.kind == "fleet"
        else typed_outputs(plan.stack, "fleet", plan.outputs, FleetOutputs, "fleet")
    )
    order = dispatch_order(spec, outputs)
    ws = [FleetWorkerPlan(n, workers[n][0], workers[n][1]) for n in order if n in workers]
    fp = FleetPlan(spec, plan, manager, tuple(ws), split_by_cluster(plan, manager, ws))
    return replace(
        plan,
        kind="fleet",
        cloud=manager.cloud,
        kubernetes_version=manager.kubernetes_version,
        fleet=fp,
        platform_outputs=None,
        fleet_outputs=outputs,
    )


def recorded(stack: str, outputs_or_plan: Any) -> Plan:
    """A platform known only by its recorded outputs (`--ref`), as infra.verify.refs_plan makes it."""
    from infra.verify.model import build

    if isinstance(outputs_or_plan, Plan):
        return outputs_or_plan
    return build(stack, [], dict(outputs_or_plan or {}), source="recorded outputs")


def fleet_from_stack(sf: Any, refs: Mapping[str, Any] | None = None) -> Plan:
    """Plan a fleet stack offline for verify: its manager and workers (recorded outputs in `refs`, else
    their stack files planned offline), then the fleet's own program on their outputs."""
    from components.spec import PlatformSpec
    from components.spec.fleet import FleetSpec
    from infra.stacks import load_stack, run_stack, validated
    from infra.verify.model import from_run

    spec = validated(sf, "trainplane:fleet", FleetSpec)
    refs = dict(refs or {})

    def platform(stack: str) -> Plan:
        short = stack.split("/")[-1]
        if stack in refs or short in refs:
            return recorded(short, refs.get(stack, refs.get(short)))
        psf = load_stack(stack)
        raw = psf.object("trainplane:platform")
        validated(psf, "trainplane:platform", PlatformSpec)
        return from_run(run_stack(psf), raw if isinstance(raw, dict) else None)

    manager = platform(spec.manager.platform_stack)
    workers = {w.name: (w.platform_stack, platform(w.platform_stack)) for w in spec.workers}
    outputs = {spec.manager.platform_stack: dict(manager.outputs)}
    outputs.update({stack: dict(p.outputs) for stack, p in workers.values()})
    raw = sf.object("trainplane:fleet")
    plan = from_run(run_stack(sf, {**refs, **outputs}), raw if isinstance(raw, dict) else None, kind="fleet")
    return fleet_plan(spec, plan, manager, workers)


def fleet_job_plan(sf: Any, job: Any, refs: dict[str, Any]) -> Any:
    """A fleet job's plan for verify: the job run on its fleet, checked against the platform plan of the
    first worker it fits (dispatch order; every fitting worker gives the same pod: components/job_fleet.py)."""
    from components.spec import PlatformSpec
    from infra.stacks import load_stack, plan_fleet_job, run_stack, validated
    from infra.verify.model import from_run

    result, summary = plan_fleet_job(sf, job, refs)
    _, stack, _, _ = next(w for w in summary.workers if w[2])
    short = stack.split("/")[-1]
    if stack in refs or short in refs:
        platform = recorded(short, refs.get(stack, refs.get(short)))
    else:
        psf = load_stack(stack)
        validated(psf, "trainplane:platform", PlatformSpec)
        raw = psf.object("trainplane:platform")
        platform = from_run(run_stack(psf), raw if isinstance(raw, dict) else None)
    raw_job = sf.object("trainplane:job")
    return from_run(result, raw_job if isinstance(raw_job, dict) else None, platform)
