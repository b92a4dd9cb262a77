"""Rack-scale (GB200 NVL72) job fixtures: aws-dev's recorded outputs with a whole-rack GB200 pool carrying
`rack` (optionally with DRANET's RDMA NIC claim), and the job builder's JobSet on them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.outputs import PlatformOutputs
from components.spec import ConfigError
from contract.rack import CLIQUE_LABEL
from tests.helpers.jobs import build, job_object, platform_outputs

EKS_LEVELS = [
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    CLIQUE_LABEL,
    "kubernetes.io/hostname",
]


# A rack whose RDMA NICs come from a network DRA driver, as GKE managed DRANET's on A4X (components/gcp/rack.py).
DRANET_RACK = {"nicDeviceClass": "mrdma.google.com", "nicsPerNode": 4}


def rack_pool(
    nodes: int = 36, levels: list[str] | None = None, rack: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A whole-rack GB200 pool (18 nodes of 4 GPUs per NVLink domain), fixed size so Kueue TAS can place;
    `rack`: more RackDomain keys (DRANET_RACK: its NICs claimed through DRA)."""
    pool = copy.deepcopy(next(p for p in platform_outputs("aws-dev")["nodePools"] if p["name"] == "h100"))
    pool.update(
        name="gb200",
        capacity="capacity-block",
        minNodes=nodes,
        maxNodes=nodes,
        gpu="GB200",
        gpusPerNode=4,
        machineTypes=["p6e-gb200.36xlarge"],
        topologyLevels=EKS_LEVELS if levels is None else levels,
        rack={"gpus": 72, "nodes": 18, **(rack or {})},
    )
    pool["labels"].update({"trainplane.dev/pool": "gb200", "trainplane.dev/capacity": "capacity-block"})
    return pool


def rack_platform(**kw: Any) -> PlatformOutputs:
    """aws-dev's outputs with the rack pool, and team quotas that admit a multi-rack job."""
    outputs = copy.deepcopy(platform_outputs("aws-dev"))
    outputs["nodePools"].append(rack_pool(**kw))
    for team in outputs["teams"]:
        team["gpuQuota"] = 1000
    return PlatformOutputs.model_validate(outputs)


def rack_job(nodes: int = 18, **extra: Any) -> dict[str, Any]:
    raw = job_object()
    raw.pop("spot")
    raw.update(nodePool="gb200", nodes={"min": nodes, "max": nodes}, gpusPerNode=4, **extra)
    return raw


def problems_of(raw: dict[str, Any], outputs: PlatformOutputs) -> list[str]:
    with pytest.raises(ConfigError) as e:
        build(raw, outputs)
    return e.value.problems
