"""Kueue objects of a plan and the capacity pools behind them, for the queueing tests of both tiers."""

from __future__ import annotations

GKE_LEVELS = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "kubernetes.io/hostname",
)


def _pool(name: str, capacity: str, min_nodes: int, max_nodes: int, **extra):
    from components.bundle import NodePoolInfo, TaintInfo

    labels = {"trainplane.dev/pool": name, "trainplane.dev/gpu": "H100", "trainplane.dev/capacity": capacity}
    taints = (TaintInfo(key="nvidia.com/gpu", value="present", effect="NoSchedule"),)
    return NodePoolInfo(
        name=name,
        gpu="H100",
        gpus_per_node=8,
        capacity=capacity,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        labels=labels,
        taints=taints,
        **extra,
    )


def capacity_pools():
    """One H100 pool per capacity kind (a spot pool first, to show the order is not the stack's)."""
    return (
        _pool("h100-spot", "spot", 0, 8, topology_levels=GKE_LEVELS),
        _pool("h100-res", "reservation", 4, 4, topology_levels=GKE_LEVELS),
        _pool("h100-od", "on-demand", 0, 2),
        _pool(
            "h100-q",
            "queued",
            0,
            4,
            topology_levels=GKE_LEVELS,
            provisioning_class="queued-provisioning.gke.io",
        ),
        _pool("h100-flex", "flex-start", 0, 2),
        _pool("h100-block", "capacity-block", 2, 2),
    )


def _kueue_objects(pools, team_quota: int = 16) -> list[dict]:
    from components.incluster.kueue_objects import (
        KUEUE_API,
        admission_check_spec,
        cluster_queue_spec,
        flavors,
        provisioning_check_name,
        provisioning_config_spec,
        topologies,
    )
    from components.spec import QueueingSpec, TeamSpec

    fl = flavors(pools)
    team = TeamSpec(name="research", gpuQuota=team_quota)

    def obj(kind: str, name: str, spec: dict) -> dict:
        return {"apiVersion": KUEUE_API, "kind": kind, "metadata": {"name": name}, "spec": spec}

    out = [obj("ResourceFlavor", f.name, f.spec()) for f in fl]
    out += [obj("Topology", n, s) for n, s in topologies(fl).items()]
    for cls in sorted({c for f in fl for c in f.provisioning_classes}):
        name = provisioning_check_name(cls)
        out += [
            obj("ProvisioningRequestConfig", name, provisioning_config_spec(cls)),
            obj("AdmissionCheck", name, admission_check_spec(cls)),
        ]
    out.append(obj("ClusterQueue", team.name, cluster_queue_spec(QueueingSpec(), pools, team, fl)))
    return out


def _of(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def _topology_cel(levels: list[dict]) -> list[str]:
    """The two CEL rules of topologies.kueue.x-k8s.io that crd_validate.py cannot evaluate, in Python."""
    labels = [lv["nodeLabel"] for lv in levels]
    out = []
    if len(set(labels)) != len(labels):
        out.append("levels must be unique")
    if "kubernetes.io/hostname" in labels and labels[-1] != "kubernetes.io/hostname":
        out.append("kubernetes.io/hostname must be the last level")
    return out
