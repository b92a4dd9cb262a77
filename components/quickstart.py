"""Build a full stack object from the few answers `pulumi new` asks for (stacks/templates/).

A template's stack starts with flat keys (`trainplane:cloud`, `trainplane:gpu`, ...). Once a team needs
more, it replaces them with the full `trainplane:platform` / `trainplane:job` object (docs/configuration.md);
the template programs prefer that object when it is there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Get = Callable[[str], "str | None"]

# The CPU pool that runs the operators, Prometheus and Kueue, per cloud.
SYSTEM_POOL = {
    "aws": {"name": "system", "instanceType": "m6i.xlarge", "minNodes": 2, "maxNodes": 3},
    "gcp": {"name": "system", "machineType": "e2-standard-4", "minNodes": 1, "maxNodes": 3},
}
# Nodes of an existing cluster that a platform engineer labelled for trainplane:
#   kubectl label nodes <gpu nodes> trainplane.dev/pool=gpu
EXISTING_GPU_SELECTOR = {"trainplane.dev/pool": "gpu"}


def _bool(text: str | None, default: bool) -> bool:
    return default if text in (None, "") else str(text).strip().lower() in ("1", "true", "yes", "y")


def _int(get: Get, key: str, default: int) -> int | str:
    text = get(key)
    if text in (None, ""):
        return default
    try:
        return int(str(text))
    except ValueError:
        return str(text)  # left for validation to reject with the key's name


def platform_from_prompts(get: Get) -> dict[str, Any]:
    """`trainplane:platform` from the gpu-platform template's prompts."""
    cloud = get("cloud") or "aws"
    gpus_per_node = _int(get, "gpusPerNode", 8)
    max_nodes = _int(get, "maxGpuNodes", 2)
    gpu_pool: dict[str, Any] = {
        "name": "gpu",
        "gpu": get("gpu") or "H100",
        "gpusPerNode": gpus_per_node,
        "minNodes": 0,
        "maxNodes": max_nodes,
    }
    platform: dict[str, Any] = {
        "cloud": cloud,
        "cluster": {
            "name": get("clusterName") or "ml",
            "kubernetesVersion": get("kubernetesVersion") or "1.33",
        },
        "observability": {"grafana": True, "loki": cloud != "kubernetes"},
    }
    if cloud == "kubernetes":
        gpu_pool.update(selector=dict(EXISTING_GPU_SELECTOR), minNodes=max_nodes)
        if get("context"):
            platform["cluster"]["context"] = get("context")
        platform["nodePools"] = [gpu_pool]
    else:
        gpu_pool["capacity"] = "spot" if _bool(get("spot"), True) else "on-demand"
        platform["region"] = get("region") or ("us-east-1" if cloud == "aws" else "us-central1")
        if cloud == "gcp":
            platform["project"] = get("project") or ""
        platform["nodePools"] = [dict(SYSTEM_POOL.get(cloud, {})), gpu_pool]
    quota = gpus_per_node * max_nodes if isinstance(gpus_per_node, int) and isinstance(max_nodes, int) else 0
    platform["teams"] = [{"name": get("team") or "ml", "gpuQuota": quota}]
    return platform


def job_from_prompts(get: Get) -> dict[str, Any]:
    """`trainplane:job` from the training-job template's prompts."""
    nodes = str(get("nodes") or "1")
    low, _, high = nodes.partition(":")
    node_range: dict[str, Any] = {
        "min": _int(lambda _: low, "min", 1),
        "max": _int(lambda _: high or low, "max", 1),
    }
    job: dict[str, Any] = {
        "platformStack": get("platformStack") or "",
        "name": get("jobName") or "train",
        "team": get("team") or "ml",
        "image": get("image") or "",
        "nodePool": get("nodePool") or "gpu",
        "nodes": node_range,
        "gpusPerNode": _int(get, "gpusPerNode", 8),
        "trainer": {
            "model": get("model") or "gpt-small",
            "globalBatchSize": _int(get, "globalBatchSize", 512),
            "microBatchSize": _int(get, "microBatchSize", 8),
            "steps": _int(get, "steps", 20000),
        },
        "spot": _bool(get("spot"), True),
    }
    if get("checkpointUri"):
        job["checkpoint"] = {
            "uri": get("checkpointUri"),
            "intervalSteps": _int(get, "checkpointIntervalSteps", 500),
        }
    return job
