"""The live twins of storage, network, scheduling and identity: the same questions asked of a running
cluster (`trainplane verify STACK --kubeconfig F`), through a live `ClusterView` (infra/verify/view.py).

- storage: each claim of the platform goes through the offline check's `check_claim` (its class exists, a
  default one for claims without a class, its provisioner's CSI driver is there), then must be Bound.
- network: something enforces NetworkPolicy: a DaemonSet of facts `networkPolicyAgents` (the clouds'
  own and the cloud-neutral ones), with its agent turned on where the facts name an argument.
- scheduling: nodes of each GPU pool carry the pool's labels, taints and topology labels, and every
  DaemonSet that must run on GPU nodes has a pod on each of them.
- identity: each team's service account carries the identity annotations the plan sets.
The other checks are judged offline only (the registry, infra/verify/registry.py, says which).
"""

from __future__ import annotations

from typing import Any

from components.outputs import NodePoolInfo
from infra.verify import facts as F
from infra.verify.checks.storage import check_claim
from infra.verify.context import Context
from infra.verify.report import CheckResult
from infra.verify.view import ClusterView


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def storage(ctx: Context, view: ClusterView) -> CheckResult:
    res = CheckResult("storage")
    live = view.claims()
    for claim in ctx.charts.claims:
        check_claim(ctx, res, claim, view)
        where = f"PVC {claim.namespace}/{claim.name} ({claim.owner})"
        pvc = None if live is None else live.get((claim.namespace, claim.name))
        if live is None:
            pass  # offline: nothing is bound yet
        elif pvc is None:
            res.note(f"{where} is not in the cluster yet (not deployed?)")
        elif (pvc.get("status") or {}).get("phase") != "Bound":
            res.fail(
                f"{where} is {(pvc.get('status') or {}).get('phase', 'unknown')}, not Bound", claim.owner
            )
        res.examined.append(f"{claim.namespace}/{claim.name}")
    return res


def _enforces(agent: dict[str, Any], ds: dict[str, Any]) -> bool:
    """An agent whose facts name a container and an argument enforces only with that argument."""
    if not agent.get("container"):
        return True
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if c.get("name") == agent["container"]]
    return any(agent["arg"] in (c.get("args") or []) for c in containers)


def network(ctx: Context, view: ClusterView) -> CheckResult:
    res = CheckResult("network")
    agents = F.network_policy_agents()
    daemon_sets = view.daemon_sets()
    found = [
        a["what"]
        for a in agents
        if ("kube-system", a["daemonSet"]) in daemon_sets
        and _enforces(a, daemon_sets[("kube-system", a["daemonSet"])])
    ]
    if found:
        res.examined.extend(found)
    else:
        names = ", ".join(a["daemonSet"] for a in agents)
        res.fail(
            f"no NetworkPolicy enforcement in the cluster (none of {names} runs in kube-system with its "
            "agent turned on): team isolation is not enforced",
            "kube-system",
        )
    return res


def _tolerated(pool_taint: dict[str, Any], node_taints: list[dict[str, Any]]) -> bool:
    return any(
        t.get("key") == pool_taint["key"] and t.get("effect") == pool_taint["effect"] for t in node_taints
    )


def scheduling(ctx: Context, view: ClusterView) -> CheckResult:
    res = CheckResult("scheduling")
    nodes_seen = view.nodes()
    if nodes_seen is None:
        res.skipped = "no nodes in an offline plan"
        return res
    pods_by_owner: dict[tuple[str, str], set[str]] = {}
    for p in view.pods() or []:
        for ref in _meta(p).get("ownerReferences") or []:
            if ref.get("kind") == "DaemonSet":
                key = (str(_meta(p).get("namespace")), str(ref.get("name")))
                pods_by_owner.setdefault(key, set()).add((p.get("spec") or {}).get("nodeName") or "")
    existing = set(view.daemon_sets())
    must_run = [d for d in ctx.charts.daemon_sets if d.scope in ("gpu", "storage", "efa")]
    topologies = _flavor_topologies(ctx)
    for pool in ctx.gpu_pools():
        labels = dict(pool.labels)
        nodes = [
            n
            for n in nodes_seen
            if all((_meta(n).get("labels") or {}).get(k) == v for k, v in labels.items())
        ]
        if not nodes:
            res.note(f"GPU pool {pool.name}: no node carries {labels} (scaled to zero?)")
            continue
        for node in nodes:
            _check_gpu_node(ctx, res, pool, node, must_run, existing, pods_by_owner)
            _check_topology_labels(res, pool, node, topologies[pool.name])
            res.examined.append(_meta(node)["name"])
    from infra.verify.checks.scheduling import note_placeholder_image

    note_placeholder_image(ctx, res)
    return res


def _flavor_topologies(ctx: Context) -> dict[str, tuple[str, ...]]:
    """Per GPU pool, the levels of the Topology its Kueue flavor names: () where the flavor has none (an
    autoscaling pool without a ProvisioningRequest class; TAS cannot place there, labels do not matter)."""
    from components.incluster.placement import levels_of_pool_flavor

    pools = ctx.platform.node_pools
    return {p.name: levels_of_pool_flavor(p, pools) for p in pools if p.gpu}


def _check_topology_labels(
    res: CheckResult, pool: NodePoolInfo, node: dict[str, Any], levels: tuple[str, ...]
) -> None:
    """Kueue TAS counts a node only with every level label of its flavor's Topology."""
    node_name = _meta(node)["name"]
    node_labels = _meta(node).get("labels") or {}
    for level in levels:
        if level not in node_labels:
            res.fail(
                f"node {node_name} of GPU pool {pool.name} lacks topology label {level}: Kueue "
                "topology-aware scheduling never places jobs on it",
                f"node {node_name}",
            )


def _check_gpu_node(
    ctx: Context,
    res: CheckResult,
    pool: NodePoolInfo,
    node: dict[str, Any],
    must_run: list[Any],
    existing: set[tuple[str, str]],
    pods_by_owner: dict[tuple[str, str], set[str]],
) -> None:
    """One node of a GPU pool: the pool's taints and a pod of every DaemonSet it needs."""
    node_name = _meta(node)["name"]
    taints = (node.get("spec") or {}).get("taints") or []
    for t in ctx.pool_taints(pool):
        if not _tolerated(t, taints):
            res.fail(
                f"node {node_name} of GPU pool {pool.name} lacks taint {t['key']}:{t['effect']}",
                f"node {node_name}",
            )
    for d in must_run:
        ns, _, name = d.name.partition("/")
        if (ns, name) not in existing:
            continue
        if node_name not in pods_by_owner.get((ns, name), set()):
            res.fail(
                f"DaemonSet {d.name} ({d.role}) has no pod on GPU node {node_name} (pool {pool.name})",
                d.name,
                f"node {node_name}",
            )


def identity(ctx: Context, view: ClusterView) -> CheckResult:
    res = CheckResult("identity")
    accounts = view.service_accounts()
    for team in ctx.platform.teams:
        key = (team.namespace, team.service_account)
        planned = ctx.object("ServiceAccount", key[0], key[1])
        want = planned.annotations if planned else {}
        live = accounts.get(key)
        if live is None:
            res.fail(
                f"team {team.name}: ServiceAccount {key[0]}/{key[1]} is not in {view.place}",
                f"team {team.name}",
            )
            continue
        have = _meta(live).get("annotations") or {}
        for k, v in want.items():
            if have.get(k) != v:
                res.fail(
                    f"ServiceAccount {key[0]}/{key[1]} has {k}={have.get(k)!r}, the platform sets {v!r}",
                    f"ServiceAccount {key[0]}/{key[1]}",
                )
        res.examined.append(f"{key[0]}/{key[1]}")
    return res
