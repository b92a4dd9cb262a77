"""The one list of verify's checks: name, one line saying what it checks, the function that runs it on an
offline plan, and the one that runs it on a live cluster (None: judged offline only).

Everything else is derived from it: `CHECKS` (the order of the report and of `--check`), the runners of
`infra.verify.verify` and `infra.verify.live`, `trainplane verify --help`, and the checks table of
docs/verify.md (tests/unit/infra/verify/test_verify_registry.py fails when the page lists other checks). Runners are
named "module:function" and imported when run, so that reading the registry (the CLI's parser) imports
no check.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# (Context) -> CheckResult and (Context, ClusterView) -> CheckResult; left untyped here so that the
# registry imports nothing of verify (report.py takes CHECKS from it).
OfflineRunner = Callable[..., Any]
LiveRunner = Callable[..., Any]


@dataclass(frozen=True)
class Check:
    name: str
    summary: str  # one line, for --help and docs/verify.md
    offline: str  # "module:function" taking a Context
    live: str | None = None  # "module:function" taking (Context, ClusterView); None: offline only
    # What it verifies: one cluster's plan (a platform or a job stack), or a fleet stack (its manager and
    # workers together); each kind of stack runs its own checks by default.
    scope: str = "cluster"

    def offline_runner(self) -> OfflineRunner:
        return _resolve(self.offline)

    def live_runner(self) -> LiveRunner | None:
        return _resolve(self.live) if self.live else None


def _resolve(ref: str) -> Any:
    module, _, function = ref.partition(":")
    return getattr(importlib.import_module(module), function)


_C = "infra.verify.checks."
_LIVE = "infra.verify.checks.live_cluster:"
REGISTRY: tuple[Check, ...] = (
    Check(
        "storage",
        "claims bind to a class whose CSI driver is installed; team volumes mount on their pools",
        _C + "storage:run",
        _LIVE + "storage",
    ),
    Check(
        "network",
        "NetworkPolicy is enforced; training pods' flows are allowed and teams are isolated",
        _C + "network:run",
        _LIVE + "network",
    ),
    Check(
        "scheduling",
        "GPU nodes' DaemonSets and training pods fit the pools, queues and quotas",
        _C + "scheduling:run",
        _LIVE + "scheduling",
    ),
    Check(
        "identity",
        "each team's service account has the cloud identity that trusts exactly it",
        _C + "identity:run",
        _LIVE + "identity",
    ),
    Check(
        "observability",
        "alert rules and dashboards use metrics and labels the scraped series carry",
        _C + "observability:run",
    ),
    Check(
        "fabric",
        "GPUDirect pools have their networks, NICs, DaemonSets and pod wiring",
        _C + "fabric:run",
    ),
    Check(
        "rack-jobs",
        "each job on an NVL72 rack pool has its own ComputeDomain, claims its channel in every GPU container and stays in one clique or says where it spans",
        _C + "rack_jobs:run",
    ),
    Check(
        "admission",
        "pod templates and Kueue/JobSet objects pass Pod Security and the controllers' webhooks",
        _C + "admission:run",
    ),
    Check(
        "recovery",
        "the GPU recovery loop is wired: controller and RBAC, quarantine taints, uncounted evictions, rules, re-diagnosis gate",
        _C + "recovery:run",
    ),
    Check(
        "idle",
        "each team's idle policy has its alert, the series it reads and a controller that may requeue",
        _C + "idle:run",
    ),
    Check(
        "egress",
        "without internet egress, every agent's image is pinned by digest from a private registry and nothing installs at start",
        _C + "egress:run",
    ),
    Check(
        "k8s-support",
        "the cluster's Kubernetes minor is released and supported on its cloud's calendar (warns in or near extended support)",
        _C + "k8s_support:run",
    ),
    Check(
        "rack-platform",
        "rack-scale pools are whole UltraServers, have the DRA driver on their nodes, Kubernetes >= 1.34, and Kueue maps and quotas their channels",
        _C + "rack_platform:run",
    ),
    Check(
        "cloud",
        "create calls the cloud refuses, or makes too early",
        _C + "create_rules:run",
    ),
    Check(
        "fleet-queues",
        "a fleet's teams have the same namespace and LocalQueue on every worker and the manager; manager quota = workers' sum",
        _C + "fleet_queues:run",
        _C + "fleet_live:queues",
        scope="fleet",
    ),
    Check(
        "fleet-dispatch",
        "the manager's queues use the MultiKueue check and config listing every worker in dispatch order",
        _C + "fleet_dispatch:run",
        scope="fleet",
    ),
    Check(
        "fleet-access",
        "each worker's kubeconfig Secret is one MultiKueue accepts, and its RBAC covers what MultiKueue does there",
        _C + "fleet_access:run",
        _C + "fleet_live:access",
        scope="fleet",
    ),
)
CHECKS: tuple[str, ...] = tuple(c.name for c in REGISTRY)


def default_checks(kind: str) -> tuple[str, ...]:
    """The checks a stack of this kind runs when none is named: a fleet's, or one cluster's."""
    scope = "fleet" if kind == "fleet" else "cluster"
    return tuple(c.name for c in REGISTRY if c.scope == scope)


def check(name: str) -> Check:
    for c in REGISTRY:
        if c.name == name:
            return c
    raise KeyError(name)


def help_text() -> str:
    """The checks as `trainplane verify --help` lists them: name, what it checks, where it runs."""
    width = max(len(c.name) for c in REGISTRY)
    lines = ["checks (--check NAME; all by default):"]
    for c in REGISTRY:
        where = "" if c.live else " (offline only)"
        lines.append(f"  {c.name:<{width}}  {c.summary}{where}")
    return "\n".join(lines)


def markdown_table() -> str:
    """The summary table of docs/verify.md ("## What is checked"), exactly."""
    rows = ["| check | what it checks | live (`--kubeconfig`) |", "| --- | --- | --- |"]
    rows += [f"| **{c.name}** | {c.summary} | {'yes' if c.live else 'no'} |" for c in REGISTRY]
    return "\n".join(rows)
