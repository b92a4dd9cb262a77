"""The fleet stack's spec (`trainplane:fleet`): one queue on a manager cluster, dispatching each job to one
of several worker platforms with Kueue's MultiKueue.

The manager is a platform stack that runs Kueue and JobSet but no team queues of its own (a small CPU
cluster, `queueing.fleetManager: true`); the workers are platform stacks, on any cloud or an existing
cluster. Each worker keeps its own team namespaces, LocalQueues and quotas; the fleet mirrors the teams
on the manager and gives each team's manager ClusterQueue the sum of the workers' quotas.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field

from components.spec.base import COST_CENTER, DNS_LABEL, ROTATION, STACK_NAME, Spec, duplicates, load_checked


class FleetManager(Spec):
    # The platform stack Kueue's MultiKueue manager runs on (its platform sets queueing.fleetManager).
    platform_stack: str = Field(pattern=STACK_NAME)


class FleetWorker(Spec):
    # The MultiKueueCluster's name and the worker's name in plan and verify output.
    name: str = Field(pattern=DNS_LABEL, max_length=40)
    platform_stack: str = Field(pattern=STACK_NAME)


class FleetDispatch(Spec):
    # capacity: workers ordered by what their GPU capacity costs idle or scarce first: reservations and
    # capacity blocks, then on-demand, then DWS/flex-start, then spot; ties keep the list order, and the
    # manager's cloud before other clouds. list: the order of `workers` as written.
    order: Literal["capacity", "list"] = "capacity"
    # Kueue's MultiKueue dispatcher: Incremental nominates workers a few at a time in dispatch order;
    # AllAtOnce copies the workload to every worker and keeps the first to admit it.
    dispatcher: Literal["Incremental", "AllAtOnce"] = "Incremental"


class FleetTeam(Spec):
    # A team of every worker platform (same namespace and LocalQueue there); the manager mirrors it.
    name: str = Field(pattern=DNS_LABEL)
    # The cost center of the team's namespace on the manager (trainplane.dev/cost-center); unset: the one
    # the workers export for the team (they must agree).
    cost_center: str | None = Field(default=None, pattern=COST_CENTER)


class FleetTokens(Spec):
    # Bump to issue every worker a new ServiceAccount token (the old token Secret is deleted, the
    # manager's kubeconfig Secrets are rewritten); e.g. the month, "2026-11".
    rotation: str = Field(default="1", pattern=ROTATION, max_length=20)


class FleetSpec(Spec):
    name: str = Field(pattern=DNS_LABEL, max_length=40)
    manager: FleetManager
    workers: list[FleetWorker] = Field(min_length=1, max_length=16)
    teams: list[FleetTeam] = Field(min_length=1)
    dispatch: FleetDispatch = Field(default_factory=FleetDispatch)
    tokens: FleetTokens = Field(default_factory=FleetTokens)

    @classmethod
    def load(cls, raw: Any) -> FleetSpec:
        return load_checked(cls, raw, "fleet", _check_fleet)


def _check_fleet(spec: FleetSpec, root: str) -> Iterable[str]:
    """The rules of a fleet on its own; the checks against the manager and worker platforms' outputs need
    their stacks and live with the fleet component."""
    for name in sorted(duplicates([w.name for w in spec.workers])):
        yield f"{root}.workers: worker name {name!r} appears twice; each names one MultiKueueCluster"
    for stack in sorted(duplicates([w.platform_stack for w in spec.workers])):
        yield f"{root}.workers: platform stack {stack!r} appears twice; list each worker cluster once"
    for i, w in enumerate(spec.workers):
        if w.platform_stack == spec.manager.platform_stack:
            yield (
                f"{root}.workers[{i}].platformStack: {w.platform_stack!r} is the manager; MultiKueue's manager "
                "cannot also be a worker (the same namespaces and LocalQueues would be claimed twice)"
            )
    for name in sorted(duplicates([t.name for t in spec.teams])):
        yield f"{root}.teams: team {name!r} appears twice"
