"""scheduling, Kueue's side: flavors per capacity kind in the fallback order, ProvisioningRequest admission
checks on the flavors of queued-provisioning pools only, and training pods' topology requests.

- Every GPU pool has a flavor in every team ClusterQueue, and a queue lists its flavors in the platform's
  fallback order (reserved, on-demand, DWS, spot): Kueue takes the first flavor with room, in list order.
- A pool with a ProvisioningRequest class has, on its flavor, an AdmissionCheck of Kueue's
  ProvisioningRequest controller whose config names that class; no other pool's flavor has one.
- A training pod's Kueue TAS annotation (`podset-required-topology` / `podset-preferred-topology`) names a
  level of the Topology its pool's flavor has, and a label the pool's nodes carry (its topologyLevels).
- GKE queued provisioning's config pins a workload's pods to the nodes of its own request (podSetUpdates).
- A training pod's ClusterQueue covers every resource it requests, has a flavor of its pool, and can hold
  the job there: its nominal quota plus what it may borrow from the cohort.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from components.incluster.kueue_objects import PROVISIONING_NODE_LABELS
from components.incluster.placement import (
    CAPACITY_ORDER,
    PREFERRED_TOPOLOGY,
    REQUIRED_TOPOLOGY,
    capacity_rank,
)
from components.outputs import NodePoolInfo
from infra.verify import facts as F
from infra.verify.checks.pool_nodes import PoolNodes, pool_nodes, quantity, shown
from infra.verify.context import Context
from infra.verify.jobs import TrainingPod
from infra.verify.report import CheckResult

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def kueue_configs(ctx: Context) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Each Kueue release of the platform with its manager Configuration (chart value
    managerConfig.controllerManagerConfigYaml; {} when absent or not YAML)."""
    for rel in ctx.platform.releases("kueue"):
        text = F.dig(rel.values, "managerConfig.controllerManagerConfigYaml")
        try:
            config = yaml.safe_load(text) if isinstance(text, str) else {}
        except yaml.YAMLError:
            config = {}
        yield rel, config if isinstance(config, dict) else {}


def check_kueue_pod_integration(ctx: Context, res: CheckResult) -> None:
    for rel, config in kueue_configs(ctx):
        frameworks = F.dig(config, "integrations.frameworks") or []
        if "pod" in frameworks:
            res.fail(
                f"{rel.ref} enables Kueue's `pod` integration: its webhook (failurePolicy Fail) gates every pod "
                "outside kube-system and kueue-system, so a Kueue outage stops GPU-operator DaemonSets and "
                "monitoring (kueue 0.19.2 charts/kueue/templates/webhook/manifests.yaml)",
                rel.ref,
            )


def _quota(cq: Any, flavor: str, resource: str) -> Mapping[str, Any]:
    for g in cq.spec.get("resourceGroups") or []:
        for fl in g.get("flavors") or []:
            if fl.get("name") == flavor:
                for r in fl.get("resources") or []:
                    if r.get("name") == resource:
                        return dict(r)
    return {}


def reachable_quota(ctx: Context, cq: Any, flavor: str, resource: str) -> tuple[float, float]:
    """(nominal, the most the queue can hold) of `resource` on `flavor`: its nominalQuota plus what it may
    borrow from the unused quota of the other ClusterQueues of its cohort, up to its borrowingLimit
    (kueue v0.19.2 pkg/cache/scheduler/resource_node.go `available`; lendingLimit caps what each lends)."""
    own = _quota(cq, flavor, resource)
    nominal = quantity(own.get("nominalQuota", 0))
    cohort = cq.spec.get("cohortName")
    if not cohort:
        return nominal, nominal
    lent = 0.0
    for other in ctx.platform.objects("ClusterQueue"):
        if other.ref == cq.ref or other.spec.get("cohortName") != cohort:
            continue
        theirs = _quota(other, flavor, resource)
        have = quantity(theirs.get("nominalQuota", 0))
        lent += min(have, quantity(theirs["lendingLimit"])) if "lendingLimit" in theirs else have
    if "borrowingLimit" in own:
        lent = min(lent, quantity(own["borrowingLimit"]))
    return nominal, nominal + lent


def pod_lands_on(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether nodes with `labels` satisfy the pod's nodeSelector and required node-affinity terms."""
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(all(_expr(e, labels) for e in t.get("matchExpressions") or []) for t in terms)


def _expr(e: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    op, key, values = e.get("operator"), str(e.get("key")), e.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def _flavors_of(ctx: Context, cq: Any) -> list[tuple[str, dict[str, str], Mapping[str, Any]]]:
    """(name, nodeLabels, spec) of the queue's flavors, in its order."""
    out = []
    for g in cq.spec.get("resourceGroups") or []:
        for fl in g.get("flavors") or []:
            flavor = ctx.object("ResourceFlavor", None, str(fl.get("name")))
            spec = flavor.spec if flavor else {}
            out.append((str(fl.get("name")), dict(spec.get("nodeLabels") or {}), spec))
    return out


def _pool_flavor(ctx: Context, cq: Any, pool: NodePoolInfo) -> tuple[str, Mapping[str, Any]] | None:
    labels = pool_nodes(ctx, pool).labels
    for name, node_labels, spec in _flavors_of(ctx, cq):
        if all(labels.get(k) == v for k, v in node_labels.items()):
            return name, spec
    return None


def check_queues(ctx: Context, res: CheckResult) -> None:
    for cq in ctx.platform.objects("ClusterQueue"):
        ranks: list[tuple[int, str]] = []
        for pool in ctx.gpu_pools():
            found = _pool_flavor(ctx, cq, pool)
            if found is None:
                res.fail(
                    f"GPU pool {pool.name} has no flavor in {cq.ref}: Kueue never admits jobs there",
                    cq.ref,
                )
                continue
            ranks.append((capacity_rank(pool.capacity), found[0]))
            _check_provisioning(ctx, res, cq, pool, found[0])
        order = [name for name, _, _ in _flavors_of(ctx, cq)]
        by_flavor = {name: rank for rank, name in ranks}
        listed = [(by_flavor[n], n) for n in order if n in by_flavor]
        if listed != sorted(listed):
            res.fail(
                f"{cq.ref} lists its flavors {[n for _, n in listed]} out of the fallback order "
                f"({', '.join(CAPACITY_ORDER)}): Kueue takes the first flavor with room, so jobs use the "
                "later capacity kinds first",
                cq.ref,
            )
        res.examined.append(cq.ref)


def _provisioning_classes(ctx: Context, cq: Any, flavor: str) -> list[str | None]:
    """The ProvisioningRequest classes of the queue's admission checks on `flavor` (None: a check that is
    not a ProvisioningRequest check or whose config is missing)."""
    out: list[str | None] = []
    strategy = cq.spec.get("admissionChecksStrategy") or {}
    for rule in strategy.get("admissionChecks") or []:
        on = rule.get("onFlavors") or []
        if on and flavor not in on:
            continue
        ac = ctx.object("AdmissionCheck", None, str(rule.get("name")))
        if ac is None or ac.spec.get("controllerName") != PROVISIONING_CONTROLLER:
            out.append(None)
            continue
        params = ac.spec.get("parameters") or {}
        config = ctx.object("ProvisioningRequestConfig", None, str(params.get("name")))
        out.append(str(config.spec.get("provisioningClassName")) if config else None)
    return out


def _check_provisioning(ctx: Context, res: CheckResult, cq: Any, pool: NodePoolInfo, flavor: str) -> None:
    wanted = pool.provisioning_class
    classes = _provisioning_classes(ctx, cq, flavor)
    if wanted and wanted not in classes:
        res.fail(
            f"pool {pool.name} is provisioned through ProvisioningRequest class {wanted}, but {cq.ref} has no "
            f"{PROVISIONING_CONTROLLER} admission check with that class on flavor {flavor}: its nodes are "
            "never requested and jobs there wait forever",
            cq.ref,
        )
    if wanted in PROVISIONING_NODE_LABELS:
        _check_node_isolation(ctx, res, cq, pool, flavor, str(wanted))
    if not wanted and classes:
        res.fail(
            f"{cq.ref} puts a ProvisioningRequest admission check on flavor {flavor} of pool {pool.name}, "
            "which has no ProvisioningRequest class: jobs there wait for a request its nodes never answer",
            cq.ref,
        )


def _check_node_isolation(
    ctx: Context, res: CheckResult, cq: Any, pool: NodePoolInfo, flavor: str, cls: str
) -> None:
    """The class's per-request node label reaches the pods (podSetUpdates), so one workload's pods cannot
    land on the nodes provisioned for another (kueue v0.19.2 admissionchecks/provisioning/controller.go)."""
    label, detail = PROVISIONING_NODE_LABELS[cls]
    for config in ctx.platform.objects("ProvisioningRequestConfig"):
        if config.spec.get("provisioningClassName") != cls:
            continue
        selectors = (config.spec.get("podSetUpdates") or {}).get("nodeSelector") or []
        if {"key": label, "valueFromProvisioningClassDetail": detail} not in selectors:
            res.fail(
                f"{config.ref} (class {cls}, flavor {flavor} of {cq.ref}, pool {pool.name}) has no podSetUpdates "
                f"nodeSelector {label} from {detail}: one workload's pods can land on the nodes provisioned for "
                "another",
                config.ref,
            )


def check_pod_topology(ctx: Context, res: CheckResult, pod: TrainingPod, cq: Any) -> None:
    annotations = dict((pod.template.get("metadata") or {}).get("annotations") or {})
    for key in (REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY):
        label = annotations.get(key)
        if not label:
            continue
        pool = ctx.pool(pod.pool)
        levels = list(pool.topology_levels) if pool else []
        if label not in levels:
            res.fail(
                f"{pod.ref} asks for topology level {label} ({key}); nodes of pool {pod.pool} carry "
                f"{levels or 'no topology labels'}",
                pod.ref,
            )
        found = _pool_flavor(ctx, cq, pool) if cq is not None and pool else None
        if found is None:
            continue
        name, spec = found
        topology = (
            ctx.object("Topology", None, str(spec.get("topologyName"))) if spec.get("topologyName") else None
        )
        levels = [lv.get("nodeLabel") for lv in (topology.spec.get("levels") or [])] if topology else []
        if label not in levels:
            res.fail(
                f"{pod.ref} asks for topology level {label} ({key}), but flavor {name} has "
                f"{'Topology ' + str(spec.get('topologyName')) + ' with levels ' + str(levels) if topology else 'no Topology'}: "
                "Kueue never admits it there",
                pod.ref,
            )


def check_cluster_queue(
    ctx: Context,
    res: CheckResult,
    pod: TrainingPod,
    nodes: PoolNodes,
    cq: Any,
    req: dict[str, float],
    total: dict[str, float],
) -> None:
    """The team's ClusterQueue covers every requested resource, with a flavor of the pool, in quota."""
    n = pod.min_pods
    groups = cq.spec.get("resourceGroups") or []
    covered = {r for g in groups for r in g.get("coveredResources") or []}
    for name in sorted(req):
        if name not in covered:
            res.fail(
                f"{pod.ref} requests {name}, which {cq.ref} does not cover: Kueue never admits the job",
                pod.ref,
                cq.ref,
            )
    selector = dict(pod.pod_spec.get("nodeSelector") or {})
    fitting = []
    for g in groups:
        for fl in g.get("flavors") or []:
            flavor = ctx.object("ResourceFlavor", None, str(fl.get("name")))
            labels = dict((flavor.spec.get("nodeLabels") if flavor else {}) or {})
            if all(selector.get(k, v) == v for k, v in labels.items()) and all(
                nodes.labels.get(k) == v for k, v in labels.items()
            ):
                fitting.append((g, fl))
    if not fitting:
        res.fail(f"{pod.ref}: no flavor of {cq.ref} matches the nodes of pool {pod.pool}", pod.ref, cq.ref)
    for g, fl in fitting:
        for name in g.get("coveredResources") or []:
            if name not in total:
                continue
            nominal, reach = reachable_quota(ctx, cq, str(fl.get("name")), name)
            if total[name] > reach:
                res.fail(
                    f"{pod.ref} needs {shown(name, total[name])} {name} for {n} pods; flavor {fl.get('name')} "
                    f"of {cq.ref} has a nominal quota of {shown(name, nominal)} and can borrow up to "
                    f"{shown(name, reach)} in all",
                    pod.ref,
                    cq.ref,
                )
