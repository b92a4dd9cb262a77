"""rack-platform: a platform with rack-scale pools (GB200/GB300 NVL72, NodePoolInfo.rack) can run a job
across its nodes over NVLink (docs/rack-scale.md).

Rules, each failure line naming it:
- whole-rack: a rack pool's minNodes and maxNodes are whole numbers of its NVLink domain (RackDomain.nodes,
  which the backend sets to the unit the cloud sells: e.g. components/aws/ultraserver.py);
- dra-kubernetes: the cluster's Kubernetes is new enough for the DRA driver's ComputeDomains
  (resource.k8s.io/v1, >= 1.34: dra-driver-nvidia-gpu@v0.4.1 docs/prerequisites.md, 1.34.2);
- dra-driver: the dra-driver-nvidia-gpu release exists with computeDomains on and its kubelet plugin
  admitted to every rack pool's nodes (its affinity names the pool);
- never-admitted: Kueue's configuration maps the channel DeviceClass (`resources.deviceClassMappings`),
  without which Kueue >= 0.18 never admits a claim of it (kueue#10504), and, where a rack pool's RDMA NICs
  come from a network DRA driver (RackDomain.nic_device_class: GKE managed DRANET), that class too: every
  job on the pool claims its NICs (components/incluster/compute_domain.py);
- channel-quota: every ClusterQueue admitting a rack flavor covers the channel resource with a quota, and
  (rdma-quota) the RDMA NIC resource where the pool's NICs are claimed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from components.bundle import POOL_LABEL
from components.outputs import NodePoolInfo
from infra.verify.context import Context
from infra.verify.report import CheckResult

DRA_CHART = "dra-driver-nvidia-gpu"
KUEUE_CHART = "kueue"
MIN_MINOR = (1, 34)


def rack_findings(
    pools: Sequence[NodePoolInfo],
    kubernetes_version: str | None,
    dra_values: Mapping[str, Any] | None,
    kueue_config: Mapping[str, Any] | None,
    cluster_queues: Mapping[str, Mapping[str, Any]],
    flavor_labels: Mapping[str, Mapping[str, str]],
) -> Iterable[str]:
    """Every rule's failures over the platform's typed pools and rendered objects (module doc)."""
    racks = [p for p in pools if p.rack is not None]
    if not racks:
        return
    yield from _whole_racks(racks)
    if kubernetes_version and tuple(int(x) for x in kubernetes_version.split(".")[:2]) < MIN_MINOR:
        yield f"dra-kubernetes: Kubernetes {kubernetes_version} is too old for DRA ComputeDomains (>= 1.34.2)"
    yield from _dra_driver(racks, dra_values)
    yield from _never_admitted(racks, kueue_config)
    yield from _channel_quota(racks, cluster_queues, flavor_labels)


def _whole_racks(racks: Sequence[NodePoolInfo]) -> Iterable[str]:
    for p in racks:
        assert p.rack is not None
        for key, n in (("minNodes", p.min_nodes), ("maxNodes", p.max_nodes)):
            if n % p.rack.nodes:
                yield (
                    f"whole-rack: pool {p.name}: {key} {n} is not a whole number of its NVLink domains "
                    f"({p.rack.nodes} nodes, {p.rack.gpus} GPUs each): a rack is bought whole"
                )


def _dra_driver(racks: Sequence[NodePoolInfo], values: Mapping[str, Any] | None) -> Iterable[str]:
    if values is None:
        yield f"dra-driver: no {DRA_CHART} release: rack pools {', '.join(p.name for p in racks)} get no ComputeDomains"
        return
    if not ((values.get("resources") or {}).get("computeDomains") or {}).get("enabled", True):
        yield f"dra-driver: {DRA_CHART} has resources.computeDomains.enabled false"
    admitted = _plugin_pools(values)
    for p in racks:
        if admitted is not None and p.labels.get(POOL_LABEL, p.name) not in admitted:
            yield f"dra-driver: the kubelet plugin's affinity leaves out rack pool {p.name}"


def _never_admitted(racks: Sequence[NodePoolInfo], config: Mapping[str, Any] | None) -> Iterable[str]:
    if config is None:
        return
    mapped = {
        cls
        for m in ((config.get("resources") or {}).get("deviceClassMappings") or [])
        for cls in m.get("deviceClassNames") or []
    }
    for cls in sorted({p.rack.channel_device_class for p in racks if p.rack} - mapped):
        yield (
            f"never-admitted: Kueue's deviceClassMappings lacks {cls}: every job claiming a channel would "
            "never be admitted (kueue#10504)"
        )
    for p in racks:
        nic = p.rack.nic_device_class if p.rack else None
        if nic is not None and nic not in mapped:
            yield (
                f"never-admitted: Kueue's deviceClassMappings lacks {nic}, the RDMA NIC class of rack pool "
                f"{p.name}: every job on it claims its NICs and would never be admitted (kueue#10504)"
            )


def _channel_quota(
    racks: Sequence[NodePoolInfo],
    cluster_queues: Mapping[str, Mapping[str, Any]],
    flavor_labels: Mapping[str, Mapping[str, str]],
) -> Iterable[str]:
    resources = sorted({p.rack.kueue_resource for p in racks if p.rack})
    nics = sorted({p.rack.nic_kueue_resource for p in racks if p.rack and p.rack.nic_device_class})
    # The flavors whose nodes are a rack pool's: their nodeLabels are all among the pool's labels.
    rack_flavors = {
        name
        for name, labels in flavor_labels.items()
        if labels and any(all(p.labels.get(k) == v for k, v in labels.items()) for p in racks)
    }
    for name, spec in sorted(cluster_queues.items()):
        for group in spec.get("resourceGroups") or []:
            covered = group.get("coveredResources") or []
            for f in group.get("flavors") or []:
                if f.get("name") not in rack_flavors:
                    continue
                quota = {r.get("name"): str(r.get("nominalQuota")) for r in f.get("resources") or []}
                for res in resources:
                    if res not in covered or quota.get(res) in (None, "0"):
                        yield (
                            f"channel-quota: ClusterQueue {name} admits rack flavor {f.get('name')} without "
                            f"quota for {res}: its jobs' channel claims never fit"
                        )
                for res in nics:
                    if res not in covered or quota.get(res) in (None, "0"):
                        yield (
                            f"rdma-quota: ClusterQueue {name} admits rack flavor {f.get('name')} without "
                            f"quota for {res}: its jobs' RDMA NIC claims never fit"
                        )


def _plugin_pools(values: Mapping[str, Any]) -> set[str] | None:
    """The pools the kubelet plugin's required node affinity admits by trainplane's pool label; None when
    it does not select by pool (the chart's default: every GPU node)."""
    terms = (
        (((values.get("kubeletPlugin") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    pools: set[str] = set()
    for t in terms:
        for e in t.get("matchExpressions") or []:
            if e.get("key") == POOL_LABEL and e.get("operator") == "In":
                pools |= set(e.get("values") or [])
    return pools if terms else None


def run(ctx: Context) -> CheckResult:
    res = CheckResult("rack-platform")
    plan = ctx.platform
    pools = list(plan.node_pools)
    if not any(p.rack is not None for p in pools):
        res.skipped = "no rack-scale pool"
        return res
    dra = next(iter(plan.releases(DRA_CHART)), None)
    kueue = next(iter(plan.releases(KUEUE_CHART)), None)
    config = None
    if kueue is not None:
        raw = ((kueue.values.get("managerConfig") or {}).get("controllerManagerConfigYaml")) or ""
        config = yaml.safe_load(raw) if isinstance(raw, str) and raw else {}
    queues = {o.name: dict(o.spec) for o in plan.objects("ClusterQueue")}
    flavors = {o.name: dict(o.spec.get("nodeLabels") or {}) for o in plan.objects("ResourceFlavor")}
    res.examined.append(f"{sum(p.rack is not None for p in pools)} rack pools, {len(queues)} ClusterQueues")
    for line in rack_findings(
        pools, plan.kubernetes_version, dra.values if dra else None, config, queues, flavors
    ):
        res.fail(line)
    return res


def fleet_findings(
    manager: str,
    manager_config: Mapping[str, Any] | None,
    workers: Sequence[tuple[str, Sequence[NodePoolInfo], bool]],
) -> Iterable[str]:
    """A fleet whose workers have rack pools (workers: name, pools, whether it runs the DRA driver).

    MultiKueue copies jobs to the workers but syncs no DeviceClasses (../shared/FACTS.md, kueue#10504), so
    each worker with rack pools runs the driver itself (fleet-dra-driver), and the manager, which admits
    the job first against its own quota, must map the channel class too (fleet-never-admitted)."""
    classes: set[str] = set()
    for name, pools, has_driver in workers:
        racks = [p for p in pools if p.rack is not None]
        classes |= {p.rack.channel_device_class for p in racks if p.rack}
        if racks and not has_driver:
            yield f"fleet-dra-driver: worker {name} has rack pools but no {DRA_CHART} release"
    if manager_config is None:
        return
    mapped = {
        cls
        for m in ((manager_config.get("resources") or {}).get("deviceClassMappings") or [])
        for cls in m.get("deviceClassNames") or []
    }
    for cls in sorted(classes - mapped):
        yield (
            f"fleet-never-admitted: manager {manager}'s Kueue does not map {cls}: a rack job is admitted on the "
            "manager first and would never be (kueue#10504)"
        )
