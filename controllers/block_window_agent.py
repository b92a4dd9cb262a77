"""Capacity Block window controller: a Capacity Block's Kueue flavor has GPU quota only while the block runs.

Why: Kueue re-admits a job to the same flavor while that flavor has quota (kueue#2560, "Introduce
ResourceFlavor fallback mechanism": there is no fallback to another flavor when a job cannot start on the
one assigned). Outside its dates a Capacity Block launches no instance, so a job admitted to its flavor
waits for nodes that never come, until waitForPodsReady evicts it and Kueue admits it to the same flavor
again. With the flavor's nominal GPU quota at 0 Kueue finds no room there and takes the next flavor of
the ClusterQueue (on-demand, spot) at once.

Why the dates and not the block's Ready nodes: the block's pool scales from zero for pending pods
(cluster-autoscaler), and a job Kueue has not admitted has no pods; quota taken from Ready nodes would
stay 0 forever. Why not an AdmissionCheck: a check in Retry sends the workload back to the same flavor
(the same kueue#2560). The dates come from the stack (`blockStart`, `blockEnd`) and
`trainplane verify --cloud` can compare them with EC2's.

Each round, per block flavor: the GPUs of its pools whose block runs now (from the start until `drain`
seconds before the end: EC2 starts terminating a block's instances 30 minutes before its end, EC2 user
guide "Capacity Blocks for ML"), split across the teams by the platform's rule (contract/quota.py, which the
plan uses too), written into each team ClusterQueue's nominalQuota and borrowingLimit for
`nvidia.com/gpu` of that flavor. Inside the window that is exactly what the plan set; outside it is 0.
A lower quota evicts no admitted job (Kueue tolerates usage above quota after "capacity was removed",
kueue v0.19.2 pkg/cache/scheduler/resource_node.go `available`), and nothing can preempt its way into a
flavor with no quota; a job whose nodes go at the end is requeued by waitForPodsReady's recovery timeout
and then takes the next flavor. A `pulumi up` that changes a ClusterQueue re-applies the plan's share; the
next round (at most `intervalSeconds` later) closes the flavor again when outside the window.

Run: `trainplane-controller block-window --config /etc/trainplane/config.json [--once]` (controllers/
__main__.py), in the controller image.
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

from kubernetes.client import ApiException

from contract.quota import borrowing_limit, gpu_shares
from controllers.agent_runtime import JSON_PATCH, log, quantity, run
from controllers.kube import Kube

GPU_RESOURCE = "nvidia.com/gpu"
CLUSTER_QUEUES = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"


def open_gpus(pools: list[dict[str, Any]], now: float, drain_s: float) -> int:
    """GPUs of the flavor's pools whose block runs at `now` (start <= now < end - drain)."""
    return sum(int(p["gpus"]) for p in pools if float(p["start"]) <= now < float(p["end"]) - drain_s)


def desired(flavor: dict[str, Any], now: float, drain_s: float) -> dict[str, tuple[int, int]]:
    """ClusterQueue -> (nominalQuota, borrowingLimit) of nvidia.com/gpu on the block's flavor at `now`."""
    capacity = open_gpus(flavor["pools"], now, drain_s)
    teams = flavor["teams"]
    shares = gpu_shares(capacity, [(t["team"], int(t["gpuQuota"])) for t in teams])
    out = {}
    for t in teams:
        share = shares[t["team"]]
        limit = borrowing_limit(share, min(int(t["gpuQuota"]), capacity)) if flavor["borrowing"] else 0
        out[t["clusterQueue"]] = (share, limit)
    return out


def patch_ops(cq: dict[str, Any], flavor: str, nominal: int, limit: int) -> list[dict[str, Any]]:
    """A JSON patch that sets the flavor's GPU quota to (nominal, limit); [] when it already is.

    Guarded by the ClusterQueue's resourceVersion: if Pulumi or anyone changed it since it was read, the
    patch fails and the next round starts from the fresh object.
    """
    ops: list[dict[str, Any]] = []
    for g, group in enumerate(cq.get("spec", {}).get("resourceGroups") or []):
        for f, fl in enumerate(group.get("flavors") or []):
            if fl.get("name") != flavor:
                continue
            for r, res in enumerate(fl.get("resources") or []):
                if res.get("name") != GPU_RESOURCE:
                    continue
                path = f"/spec/resourceGroups/{g}/flavors/{f}/resources/{r}"
                if quantity(res.get("nominalQuota")) != nominal:
                    ops.append({"op": "replace", "path": f"{path}/nominalQuota", "value": str(nominal)})
                if quantity(res.get("borrowingLimit")) != limit:
                    ops.append({"op": "add", "path": f"{path}/borrowingLimit", "value": str(limit)})
    if not ops:
        return []
    version = cq["metadata"]["resourceVersion"]
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *ops]


def reconcile(api: Kube, config: dict[str, Any], now: float | None = None) -> dict[str, dict[str, int]]:
    """One round over every block flavor; returns flavor -> ClusterQueue -> the nominal GPU quota set."""
    now = time.time() if now is None else now
    drain = float(config["drainSeconds"])
    out: dict[str, dict[str, int]] = {}
    for flavor in config["flavors"]:
        name = flavor["name"]
        out[name] = {}
        for cq_name, (nominal, limit) in desired(flavor, now, drain).items():
            out[name][cq_name] = nominal
            path = f"{CLUSTER_QUEUES}/{urllib.parse.quote(cq_name)}"
            try:
                ops = patch_ops(api.request("GET", path), name, nominal, limit)
                if ops:
                    api.request("PATCH", path, ops, JSON_PATCH)
                    log("quota_set", flavor=name, clusterQueue=cq_name, nominal=nominal, borrowingLimit=limit)
            except ApiException as e:
                # 404: the queue is not there yet; 422: it changed meanwhile. Both: next round.
                log("quota_patch_failed", flavor=name, clusterQueue=cq_name, status=e.status)
    return out


def main(argv: list[str] | None = None) -> int:
    return run("block-window", (__doc__ or "").splitlines()[0], argv, reconcile)
