"""Nodes and objects of the GPU health tests: what the controller reads from the API, in both tiers."""

from __future__ import annotations

import time
from typing import Any

from components.incluster.gpu_health import DIAG

NOW = time.mktime(time.strptime("2026-11-20T12:00:00", "%Y-%m-%dT%H:%M:%S")) - time.timezone


def node(name="gpu-a", capacity="8", allocatable=None, age_s=3600, taints=None, conditions=(), pool="h100"):
    status = {"conditions": list(conditions)}
    if capacity is not None:
        status["capacity"] = {"nvidia.com/gpu": capacity, "cpu": "192"}
        status["allocatable"] = {"nvidia.com/gpu": allocatable or capacity, "cpu": "191"}
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - age_s))
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "41",
            "creationTimestamp": created,
            "labels": {"trainplane.dev/pool": pool},
        },
        "spec": {"taints": taints or [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": status,
    }


def objects(result, kind: str) -> dict[str, dict]:
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in result.resources
        if r.type == f"kubernetes:{kind}" and "trainplane-gpu" in r.inputs["metadata"]["name"]
    }


def kube_node(name: str = "gpu-a", **kwargs: Any) -> dict:
    """`node` as the API lists it (with its kind)."""
    return {"kind": "Node", **node(name, **kwargs)}


def pod(
    name: str = "p",
    node_name: str = "gpu-a",
    gpus: int | str | None = None,
    namespace: str = "team-a",
    owner: str = "Job",
    phase: str = "Running",
    deleting: bool = False,
    where: str = "limits",
) -> dict:
    """A pod on `node_name` owned by a `owner`, with `gpus` nvidia.com/gpu in its `where` (None: none)."""
    resources = {where: {"nvidia.com/gpu": str(gpus)}} if gpus is not None else {}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "ownerReferences": [{"apiVersion": "v1", "kind": owner, "name": "o", "uid": "u"}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T01:00:00Z"
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


def diag_pod(
    node_name: str = "gpu-a",
    result: str = "pass",
    started: str = "2026-11-20T11:00:00Z",
    name: str | None = None,
) -> dict:
    """The node diagnostic DaemonSet's pod on `node_name`: its dcgm-diag init container ended with the
    result line (components/incluster/gpu_health.py's script); created as that container started."""
    term = {"exitCode": 0, "message": f"result={result} rc=0\n", "startedAt": started}
    return {
        "kind": "Pod",
        "metadata": {
            "name": name or f"diag-{node_name}",
            "namespace": "gpu-operator",
            "labels": {"app": DIAG},
            "creationTimestamp": started,
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "done"}]},
        "status": {
            "phase": "Running",
            "initContainerStatuses": [{"name": "dcgm-diag", "state": {"terminated": term}}],
        },
    }


def hung_pod(name: str, job: str, finished: str, node_name: str = "gpu-a") -> dict:
    """A failed trainer pod of `job` whose watchdog ended it (exit 124) at `finished`."""
    p = pod(name, node_name, gpus=8, phase="Failed")
    p["metadata"]["labels"] = {"trainplane.dev/job": job}
    p["spec"]["containers"][0]["name"] = "trainer"
    term = {"exitCode": 124, "finishedAt": finished}
    p["status"]["containerStatuses"] = [{"name": "trainer", "state": {"terminated": term}}]
    return p


def ago(minutes: float) -> str:
    """RFC 3339 time `minutes` before now (the operator's clock in the integration tests is the real one)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - minutes * 60))
