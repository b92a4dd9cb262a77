"""Nodes and objects of the GPU health tests: what the controller reads from the API, in both tiers."""

from __future__ import annotations

import time

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
