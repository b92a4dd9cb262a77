"""`trainplane verify STACK --kubeconfig F | --context C`: the same questions asked of a running cluster.

Read-only, with the official `kubernetes` client (list calls only). The offline plan says what should be
there; the cluster says what is:
- storage: the classes the platform's claims use exist (a default one for claims without a class) and
  each class's provisioner has its CSIDriver; the platform's claims are Bound.
- network: something enforces NetworkPolicy (the VPC CNI's network policy agent turned on, GKE's anetd,
  Calico, Cilium, Antrea, kube-router).
- scheduling: nodes of each GPU pool carry the pool's labels and taints, and every DaemonSet that must
  run on GPU nodes has a pod on each of them.
- identity: each team's service account carries the identity annotation the plan sets.
Observability is judged offline only (it needs the rule and dashboard sources, not the cluster).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.verify import facts as F
from infra.verify.context import Context
from infra.verify.model import Plan
from infra.verify.report import CHECKS, CheckResult, Report

DEFAULT_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
# DaemonSets (kube-system) whose presence shows a NetworkPolicy implementation, and how to tell it is on.
ENFORCERS = {
    "aws-node": "EKS VPC CNI network policy agent (container aws-network-policy-agent, --enable-network-policy=true)",
    "anetd": "GKE Dataplane V2",
    "calico-node": "Calico",
    "cilium": "Cilium",
    "antrea-agent": "Antrea",
    "kube-router": "kube-router",
}


@dataclass
class ClusterState:
    """What verify reads from a cluster: plain dicts, as the API serves them."""

    storage_classes: list[dict[str, Any]] = field(default_factory=list)
    csi_drivers: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    daemon_sets: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    service_accounts: list[dict[str, Any]] = field(default_factory=list)


class LiveError(Exception):
    """The cluster cannot be read (bad kubeconfig, unreachable API, no permission): one line."""


def read_cluster(kubeconfig: str | None = None, context: str | None = None) -> ClusterState:
    """List what the live checks need, read-only; LiveError says why the cluster cannot be read."""
    try:
        return _read(kubeconfig, context)
    except LiveError:
        raise
    except Exception as e:  # kubernetes' ConfigException, ApiException, urllib3 connection errors
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise LiveError(
            f"cannot read the cluster ({kubeconfig or 'default kubeconfig'}): {type(e).__name__}: {first}"
        ) from None


def _read(kubeconfig: str | None, context: str | None) -> ClusterState:
    from kubernetes import client, config

    if kubeconfig is not None:
        from pathlib import Path

        if not Path(kubeconfig).is_file():
            raise LiveError(f"--kubeconfig {kubeconfig}: no such file")
    api = config.new_client_from_config(config_file=kubeconfig, context=context)
    core, storage, apps = client.CoreV1Api(api), client.StorageV1Api(api), client.AppsV1Api(api)

    def items(resp: Any) -> list[dict[str, Any]]:
        return [api.sanitize_for_serialization(i) for i in resp.items]

    return ClusterState(
        storage_classes=items(storage.list_storage_class()),
        csi_drivers=items(storage.list_csi_driver()),
        nodes=items(core.list_node()),
        pvcs=items(core.list_persistent_volume_claim_for_all_namespaces()),
        daemon_sets=items(apps.list_daemon_set_for_all_namespaces()),
        pods=items(core.list_pod_for_all_namespaces()),
        service_accounts=items(core.list_service_account_for_all_namespaces()),
    )


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def live_storage(ctx: Context, state: ClusterState) -> CheckResult:
    res = CheckResult("storage")
    classes = {_meta(c)["name"]: c for c in state.storage_classes}
    defaults = [
        n
        for n, c in classes.items()
        if any(str(_meta(c).get("annotations", {}).get(a)) == "true" for a in DEFAULT_ANNOTATIONS)
    ]
    drivers = {_meta(d)["name"] for d in state.csi_drivers}
    migrated = F.cloud(ctx.platform.cloud).get("csiMigration") or {}
    pvcs = {(_meta(p).get("namespace"), _meta(p)["name"]): p for p in state.pvcs}
    for claim in ctx.charts.claims:
        where = f"PVC {claim.namespace}/{claim.name} ({claim.owner})"
        if claim.storage_class == "":
            name = None
        elif claim.storage_class is None:
            if not defaults:
                res.fail(f"{where} names no StorageClass and the cluster has no default class", where)
                continue
            name = defaults[-1]
        else:
            name = claim.storage_class
            if name not in classes:
                res.fail(
                    f"{where} asks for StorageClass {name!r}; the cluster has {', '.join(sorted(classes)) or 'none'}",
                    where,
                )
                continue
        if name is not None:
            provisioner = str(classes[name].get("provisioner"))
            driver = migrated.get(provisioner, provisioner)
            if not provisioner.startswith("kubernetes.io/") or provisioner in migrated:
                if driver not in drivers:
                    res.fail(
                        f"StorageClass {name}: provisioner {provisioner} has no CSIDriver {driver} in the cluster",
                        f"StorageClass {name}",
                    )
        live = pvcs.get((claim.namespace, claim.name))
        if live is None:
            res.note(f"{where} is not in the cluster yet (not deployed?)")
        elif (live.get("status") or {}).get("phase") != "Bound":
            res.fail(f"{where} is {(live.get('status') or {}).get('phase', 'unknown')}, not Bound", where)
        res.examined.append(f"{claim.namespace}/{claim.name}")
    return res


def live_network(ctx: Context, state: ClusterState) -> CheckResult:
    res = CheckResult("network")
    found = []
    for ds in state.daemon_sets:
        name = _meta(ds)["name"]
        if _meta(ds).get("namespace") != "kube-system" or name not in ENFORCERS:
            continue
        if name == "aws-node":
            containers = ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get(
                "containers"
            ) or []
            agent = [c for c in containers if c.get("name") == "aws-network-policy-agent"]
            if not any("--enable-network-policy=true" in (c.get("args") or []) for c in agent):
                continue
        found.append(ENFORCERS[name])
    if found:
        res.examined.extend(found)
    else:
        res.fail(
            "no NetworkPolicy enforcement in the cluster (no network policy agent turned on in aws-node, no anetd, "
            "calico-node, cilium, antrea-agent or kube-router in kube-system): team isolation is not enforced",
            "kube-system",
        )
    return res


def _tolerated(pool_taint: dict[str, Any], node_taints: list[dict[str, Any]]) -> bool:
    return any(
        t.get("key") == pool_taint["key"] and t.get("effect") == pool_taint["effect"] for t in node_taints
    )


def live_scheduling(ctx: Context, state: ClusterState) -> CheckResult:
    res = CheckResult("scheduling")
    pods_by_owner: dict[tuple[str, str], set[str]] = {}
    for p in state.pods:
        for ref in _meta(p).get("ownerReferences") or []:
            if ref.get("kind") == "DaemonSet":
                key = (str(_meta(p).get("namespace")), str(ref.get("name")))
                pods_by_owner.setdefault(key, set()).add((p.get("spec") or {}).get("nodeName") or "")
    existing = {(_meta(d).get("namespace"), _meta(d)["name"]) for d in state.daemon_sets}
    must_run = [d for d in ctx.charts.daemon_sets if d.scope in ("gpu", "storage", "efa")]
    topologies = _flavor_topologies(ctx)
    for pool in ctx.gpu_pools():
        labels = dict(pool.get("labels") or {})
        nodes = [
            n
            for n in state.nodes
            if all((_meta(n).get("labels") or {}).get(k) == v for k, v in labels.items())
        ]
        if not nodes:
            res.note(f"GPU pool {pool['name']}: no node carries {labels} (scaled to zero?)")
            continue
        for node in nodes:
            node_name = _meta(node)["name"]
            _check_gpu_node(ctx, res, pool, node, must_run, existing, pods_by_owner)
            _check_topology_labels(res, pool, node, topologies[pool["name"]])
            res.examined.append(node_name)
    return res


def _flavor_topologies(ctx: Context) -> dict[str, tuple[str, ...]]:
    """Per GPU pool, the levels of the Topology its Kueue flavor names: () where the flavor has none (an
    autoscaling pool without a ProvisioningRequest class; TAS cannot place there, labels do not matter)."""
    from components.incluster.placement import levels_of_pool_flavor
    from components.outputs import NodePoolInfo

    pools = [NodePoolInfo.model_validate(p) for p in ctx.platform.node_pools]
    return {p.name: levels_of_pool_flavor(p, pools) for p in pools if p.gpu}


def _check_topology_labels(
    res: CheckResult, pool: dict[str, Any], node: dict[str, Any], levels: tuple[str, ...]
) -> None:
    """Kueue TAS counts a node only with every level label of its flavor's Topology."""
    node_name = _meta(node)["name"]
    node_labels = _meta(node).get("labels") or {}
    for level in levels:
        if level not in node_labels:
            res.fail(
                f"node {node_name} of GPU pool {pool['name']} lacks topology label {level}: Kueue "
                "topology-aware scheduling never places jobs on it",
                f"node {node_name}",
            )


def _check_gpu_node(
    ctx: Context,
    res: CheckResult,
    pool: dict[str, Any],
    node: dict[str, Any],
    must_run: list[Any],
    existing: set[tuple[Any, Any]],
    pods_by_owner: dict[tuple[str, str], set[str]],
) -> None:
    """One node of a GPU pool: the pool's taints and a pod of every DaemonSet it needs."""
    node_name = _meta(node)["name"]
    taints = (node.get("spec") or {}).get("taints") or []
    for t in ctx.pool_taints(pool):
        if not _tolerated(t, taints):
            res.fail(
                f"node {node_name} of GPU pool {pool['name']} lacks taint {t['key']}:{t['effect']}",
                f"node {node_name}",
            )
    for d in must_run:
        ns, _, name = d.name.partition("/")
        if (ns, name) not in existing:
            continue
        if node_name not in pods_by_owner.get((ns, name), set()):
            res.fail(
                f"DaemonSet {d.name} ({d.role}) has no pod on GPU node {node_name} (pool {pool['name']})",
                d.name,
                f"node {node_name}",
            )


def live_identity(ctx: Context, state: ClusterState) -> CheckResult:
    res = CheckResult("identity")
    accounts = {(_meta(s).get("namespace"), _meta(s)["name"]): s for s in state.service_accounts}
    for team in ctx.platform.teams:
        key = (team.get("namespace"), team.get("serviceAccount"))
        planned = ctx.object("ServiceAccount", key[0], str(key[1]))
        want = planned.annotations if planned else {}
        live = accounts.get(key)
        if live is None:
            res.fail(
                f"team {team.get('name')}: ServiceAccount {key[0]}/{key[1]} is not in the cluster",
                f"team {team.get('name')}",
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


LIVE = {
    "storage": live_storage,
    "network": live_network,
    "scheduling": live_scheduling,
    "identity": live_identity,
}


def verify_state(
    plan: Plan, state: ClusterState, checks: Sequence[str] | None = None, source: str = "cluster"
) -> Report:
    ctx = Context(plan)
    report = Report(plan.stack, plan.cloud, plan.kubernetes_version, "live", source)
    for name in checks or CHECKS:
        if name in LIVE:
            report.checks.append(LIVE[name](ctx, state))
        else:
            report.checks.append(CheckResult(name, skipped="offline only: run verify without --kubeconfig"))
    return report


def verify_live(
    plan: Plan, kubeconfig: str | None = None, context: str | None = None, checks: Sequence[str] | None = None
) -> Report:
    state = read_cluster(kubeconfig, context)
    where = f"kubeconfig {kubeconfig or '(default)'}" + (f", context {context}" if context else "")
    return verify_state(plan, state, checks, where)
