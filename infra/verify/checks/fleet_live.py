"""The fleet checks' live runners (`verify FLEET --kubeconfig MANAGER`; infra/verify/fleet_live.py reads
the manager, and each worker with its MultiKueueCluster's kubeconfig Secret as MultiKueue does)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from components.incluster.names import KUEUE_NAMESPACE
from infra.verify.checks.fleet_access import KEY, kubeconfig_problems
from infra.verify.checks.fleet_queues import GPU, held, nominal, team_queue
from infra.verify.context import Context
from infra.verify.fleet_live import secret_text
from infra.verify.fleet_model import FleetPlan
from infra.verify.report import CheckResult


def _named(objs: list[dict[str, Any]], name: str, namespace: str | None = None) -> dict[str, Any] | None:
    for o in objs:
        meta = o.get("metadata") or {}
        if meta.get("name") == name and (namespace is None or meta.get("namespace") == namespace):
            return o
    return None


def access(ctx: Context, view: Any) -> CheckResult:
    """Secrets present on the manager, each worker reachable with its token."""
    result = CheckResult("fleet-access")
    fleet: FleetPlan = ctx.fleet
    state = view.state
    for w in fleet.workers:
        cluster = state.cluster(w.name)
        result.examined.append(f"worker {w.name}")
        if cluster is None:
            result.fail(f"the manager has no MultiKueueCluster {w.name} (worker {w.stack})", w.stack)
            continue
        location = (
            ((cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig", {}).get("location")
        )
        secret = state.secret(str(location))
        if secret is None:
            result.fail(
                f"MultiKueueCluster {w.name} reads Secret {KUEUE_NAMESPACE}/{location}, which the manager lacks"
            )
            continue
        text = secret_text(secret)
        if text is None:
            result.fail(
                f"Secret {KUEUE_NAMESPACE}/{location} on the manager has no key {KEY!r}, which MultiKueue reads"
            )
            continue
        problems = kubeconfig_problems(text)
        if problems:
            result.fail(
                f"Secret {KUEUE_NAMESPACE}/{location}: Kueue refuses its kubeconfig: {'; '.join(problems)}"
            )
            continue
        worker = state.workers.get(w.name)
        if worker is not None and worker.error:
            result.fail(
                f"worker {w.name} is unreachable with the kubeconfig of Secret {KUEUE_NAMESPACE}/{location}: {worker.error}"
            )
    return result


def queues(ctx: Context, view: Any) -> CheckResult:
    """Team queues mirrored on every reachable worker; the manager's quota is the workers' live sum."""
    result = CheckResult("fleet-queues")
    fleet: FleetPlan = ctx.fleet
    state = view.state
    for team in (t.name for t in fleet.spec.teams):
        q = next((q for w in fleet.workers if (q := team_queue(w.plan, team))), None)
        if q is None:
            continue
        ns, lq = q
        result.examined.append(f"team {team}")
        manager_lq = _named(state.local_queues, lq, ns)
        if manager_lq is None:
            result.fail(f"team {team}: the manager has no LocalQueue {ns}/{lq}")
            continue
        sums: dict[str, Decimal] = {}
        parts = []
        complete = True
        for w in fleet.workers:
            worker = state.workers.get(w.name)
            if worker is None or worker.error:
                result.note(f"worker {w.name} not read (fleet-access says why): its queues are not compared")
                complete = False
                continue
            wlq = _named(worker.local_queues, lq, ns)
            if wlq is None:
                result.fail(
                    f"team {team}: worker {w.name} has no LocalQueue {ns}/{lq}, which MultiKueue creates the job's Workload in"
                )
                complete = False
                continue
            rq = next(
                (
                    q
                    for q in worker.resource_quotas
                    if (q.get("metadata") or {}).get("namespace") == ns
                    and f"requests.{GPU}" in ((q.get("spec") or {}).get("hard") or {})
                ),
                None,
            )
            quota = held(_named(worker.cluster_queues, str((wlq.get("spec") or {}).get("clusterQueue"))), rq)
            for r, v in quota.items():
                sums[r] = sums.get(r, Decimal(0)) + v
            parts.append((w.name, quota))
        cq_name = str((manager_lq.get("spec") or {}).get("clusterQueue"))
        have = nominal(_named(state.cluster_queues, cq_name))
        if not complete:
            continue  # a sum over only some workers would not be the fleet's
        for r in sorted(set(sums) | set(have)):
            if have.get(r, Decimal(0)) != sums.get(r, Decimal(0)):
                each = ", ".join(f"{n} {q.get(r, Decimal(0)).normalize():f}" for n, q in parts)
                result.fail(
                    f"ClusterQueue {cq_name} on the manager: {r} quota {have.get(r, Decimal(0)).normalize():f} is not "
                    f"{sums.get(r, Decimal(0)).normalize():f}, the sum of what the team holds on the workers' live "
                    f"ClusterQueues and ResourceQuotas ({each})"
                )
    return result
