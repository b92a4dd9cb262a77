"""What `trainplane verify` asks the GCP verifier about a plan: its GKE cluster and version, the nodes a
GKE node pool gives a pool, the DaemonSets of the GKE cluster add-ons it turns on, and the GKE notes
about GPU pools (the grace a spot node's pods get).

Imported by the verifier's hook methods (verifier.py) only when verify asks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from components.catalog import catalog
from infra.verify import facts as F
from infra.verify.charts import DaemonSetModel
from infra.verify.checks.pool_nodes import TAINT_EFFECTS, PoolNodes

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo
    from infra.verify.charts import ChartModel
    from infra.verify.context import Context
    from infra.verify.model import Plan, PlanResource
    from infra.verify.report import CheckResult
    from infra.verify.verifier import GpuPools

GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_POOL = "gcp:container/nodePool:NodePool"


def plan_cluster(resources: Sequence[PlanResource]) -> PlanResource | None:
    return next((r for r in resources if r.type == GKE_CLUSTER), None)


def kubernetes_version(cluster: PlanResource) -> str | None:
    version = cluster.inputs.get("minMasterVersion")
    return str(version) if version else None


# ---- pool nodes -------------------------------------------------------------------------------------


def _gke_capacity_marks(inputs: Mapping[str, Any], labels: dict[str, str], taints: list[dict]) -> None:
    """What GKE itself puts on Dynamic Workload Scheduler nodes: flex-start nodes (also under queued
    provisioning) are labelled `cloud.google.com/gke-flex-start=true` (kubernetes/autoscaler
    cloudprovider/gce FlexStartLabel); queued-provisioning nodes are tainted
    `cloud.google.com/gke-queued=true:NoSchedule` (GKE docs, "flex-start with queued provisioning")."""
    if (inputs.get("nodeConfig") or {}).get("flexStart"):
        labels["cloud.google.com/gke-flex-start"] = "true"
    if (inputs.get("queuedProvisioning") or {}).get("enabled"):
        queued = {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NoSchedule"}
        if queued not in taints:
            taints.append(queued)


def pool_nodes(ctx: Context, pool: NodePoolInfo) -> PoolNodes | None:
    for np in ctx.platform.of_type(GKE_POOL):
        if np.inputs.get("name") != pool.name:
            continue
        cfg = np.inputs.get("nodeConfig") or {}
        labels = dict(cfg.get("labels") or {})
        labels["cloud.google.com/gke-nodepool"] = str(np.inputs.get("name"))
        accels = cfg.get("guestAccelerators") or []
        if accels:
            labels["cloud.google.com/gke-accelerator"] = str(accels[0].get("type"))
        if cfg.get("spot"):
            labels["cloud.google.com/gke-spot"] = "true"
        taints = [
            {
                "key": t["key"],
                "value": t.get("value", ""),
                "effect": TAINT_EFFECTS.get(t["effect"], t["effect"]),
            }
            for t in cfg.get("taints") or []
        ]
        _gke_capacity_marks(np.inputs, labels, taints)
        for t in ctx.pool_taints(pool):
            if t not in taints and accels:
                taints.append(t)
        machine = str(cfg.get("machineType", ""))
        shape = catalog().machine("gcp", machine)
        return PoolNodes(
            name=pool.name,
            labels=labels,
            taints=taints,
            machines=[shape],
            machine_names=[machine],
            gpus=int(accels[0].get("count", 0)) if accels else 0,
            source=f"node pool {np.inputs.get('name')}",
        )
    return None


# ---- GKE cluster add-ons ----------------------------------------------------------------------------


def _snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def addon_objects(plan: Plan, out: ChartModel) -> None:
    """DaemonSets and CSI drivers of the GKE cluster add-ons the plan's cluster turns on."""
    cloud = F.cloud("gcp")
    cluster = plan_cluster(plan.resources)
    addons = (cluster.inputs.get("addonsConfig") or {}) if cluster else {}
    drivers = {k: v for k, v in cloud["csiDrivers"].items() if k not in ("source", "asOf")}
    for key, cfg in addons.items():
        if not (isinstance(cfg, dict) and cfg.get("enabled")):
            continue
        ref = f"GKE add-on {key}"
        ds = cloud["addonDaemonSets"].get(_snake(key))
        if ds:
            out.daemon_sets.append(
                DaemonSetModel(
                    ref,
                    ds["daemonSet"],
                    _snake(key),
                    tuple(ds["tolerations"]),
                    "storage",
                    ds.get("csiDriver"),
                )
            )
        for driver, how in drivers.items():
            if how.get("clusterAddon") == _snake(key):
                out.csi_drivers[driver] = ref


# ---- GPU pools --------------------------------------------------------------------------------------


# GKE needs no handler for spot notices: "When Compute Engine needs to reclaim the resources used by Spot
# VMs, a preemption notice is sent to GKE"; GKE's graceful node shutdown then gives pods 30 s by default,
# "the first 15 seconds to shut down your Pods and then 15 seconds for critical system Pods", extendable
# to 120 s on Standard node pools whose control plane runs GKE 1.35.0-gke.1171000 or later (GKE docs,
# "Spot VMs", Termination and graceful shutdown of Spot VMs; the node pool's kubelet
# shutdownGracePeriodSeconds). A training pod asks more (terminationGracePeriodSeconds >= 60 s,
# components/incluster/job_pod.py): on such a pool its preemption checkpoint may be cut off. That is a
# property of the cluster version, not a wrong plan, so verify says it as a note.
GKE_SPOT_POD_GRACE_S = 15


def note_gke_spot_grace(ctx: Context, res: CheckResult) -> None:
    """A note per training pod that asks more time than GKE gives a spot node's pods by default."""
    spot = {p.name for p in ctx.gpu_pools() if p.capacity == "spot"}
    for pod in ctx.pods:
        grace = int(pod.pod_spec.get("terminationGracePeriodSeconds") or 30)
        if pod.pool in spot and grace > GKE_SPOT_POD_GRACE_S:
            res.note(
                f"GKE spot pool {pod.pool}: at preemption GKE gives non-system pods {GKE_SPOT_POD_GRACE_S} s by "
                f"default, team {pod.team}'s training pods ask {grace} s for their preemption checkpoint; "
                "GKE 1.35.0-gke.1171000+ lets the pool's kubelet shutdownGracePeriodSeconds go up to 120 s"
            )


def check_gpu_pools(ctx: Context, res: CheckResult, gpu_pools: GpuPools) -> None:
    """GKE: a note where a spot pool's training pods ask more grace than GKE gives them."""
    note_gke_spot_grace(ctx, res)
