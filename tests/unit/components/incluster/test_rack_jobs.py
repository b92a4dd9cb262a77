"""A job on a rack-scale pool (GB200 NVL72): its ComputeDomain, the channel claim of every GPU container,
placement within one NVLink clique (or across cliques at the level above, said in one line) and the
checks of a level that cannot hold the job. Hand-built platform outputs carrying `rack`, no engine run
beyond aws-dev's recorded plan."""

from __future__ import annotations

from typing import Any

import pytest

from components.incluster.compute_domain import (
    CLAIM_NAME,
    claim_template_name,
    compute_domain,
    compute_domain_name,
    rack_note,
)
from components.incluster.placement import REQUIRED_TOPOLOGY, named_levels
from components.outputs import PlatformOutputs
from components.spec import JobSpec
from contract.rack import CLIQUE_LABEL, COMPUTE_DOMAIN_API_VERSION, COMPUTE_DOMAIN_KIND
from tests.unit.components.incluster.test_job_placement import (
    build,
    h100_pool,
    job,
    platform,
    pod_of,
    problems_of,
)

pytestmark = pytest.mark.plans

EKS_LEVELS = [
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    CLIQUE_LABEL,
    "kubernetes.io/hostname",
]


def rack_pool(nodes: int = 36, levels: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A whole-rack GB200 pool (18 nodes of 4 GPUs per NVLink domain), fixed size so Kueue TAS can place."""
    pool = h100_pool("gb200", "capacity-block", minNodes=nodes, maxNodes=nodes, **extra)
    pool.update(
        gpu="GB200",
        gpusPerNode=4,
        machineTypes=["p6e-gb200.36xlarge"],
        topologyLevels=EKS_LEVELS if levels is None else levels,
        rack={"gpus": 72, "nodes": 18},
    )
    return pool


def rack_platform(**kw: Any) -> PlatformOutputs:
    outputs = platform(rack_pool(**kw))
    team = outputs.team("research")
    assert team is not None
    return outputs.model_copy(
        update={"teams": [t.model_copy(update={"gpu_quota": 1000}) for t in outputs.teams]}
    )


def rack_job(nodes: int = 18, **extra: Any) -> dict[str, Any]:
    return job(nodePool="gb200", nodes={"min": nodes, "max": nodes}, gpusPerNode=4, **extra)


def test_named_levels_name_the_clique_by_its_label():
    assert named_levels(EKS_LEVELS) == {
        "block": EKS_LEVELS[0],
        "subblock": EKS_LEVELS[1],
        "host": EKS_LEVELS[2],
        "clique": CLIQUE_LABEL,
    }
    assert named_levels([CLIQUE_LABEL, "kubernetes.io/hostname"]) == {"clique": CLIQUE_LABEL}


def test_one_compute_domain_per_job_names_the_template_the_pods_claim_from():
    cd = compute_domain("gpt-small", "research", {"a": "b"})
    assert cd == {
        "apiVersion": COMPUTE_DOMAIN_API_VERSION,
        "kind": COMPUTE_DOMAIN_KIND,
        "metadata": {"name": "gpt-small-compute-domain", "namespace": "research", "labels": {"a": "b"}},
        "spec": {
            "numNodes": 0,
            "channel": {"resourceClaimTemplate": {"name": "gpt-small-channel"}, "allocationMode": "Single"},
        },
    }
    assert compute_domain_name("x") != compute_domain_name("y")
    assert claim_template_name("x") != claim_template_name("y")


def test_a_rack_job_claims_the_channel_in_every_gpu_container_and_stays_in_one_clique():
    pod = pod_of(build(rack_job(), rack_platform()))
    spec = pod["spec"]
    assert spec["resourceClaims"] == [
        {"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name("gpt-small")}
    ]
    for c in spec["containers"]:
        if c["resources"]["limits"].get("nvidia.com/gpu"):
            assert c["resources"]["claims"] == [{"name": CLAIM_NAME}]
            assert c["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert pod["metadata"]["annotations"][REQUIRED_TOPOLOGY] == CLIQUE_LABEL


def test_a_job_larger_than_a_rack_spans_racks_at_the_level_above_and_says_so():
    outputs = rack_platform()
    pod = pod_of(build(rack_job(36), outputs))
    assert pod["metadata"]["annotations"][REQUIRED_TOPOLOGY] == EKS_LEVELS[2]
    line = rack_note(JobSpec.load(rack_job(36)), outputs)
    assert line is not None and "span 2 NVLink cliques" in line and EKS_LEVELS[2] in line


def test_a_job_within_a_rack_says_so():
    line = rack_note(JobSpec.load(rack_job()), rack_platform())
    assert line is not None and "within one NVLink clique of 18 nodes" in line


def test_a_job_off_rack_pools_has_no_claims():
    pod = pod_of(build(job(nodePool="h100", spot=True), platform()))
    assert "resourceClaims" not in pod["spec"]
    assert all("claims" not in c["resources"] for c in pod["spec"]["containers"])


def test_the_clique_level_cannot_hold_a_job_larger_than_a_rack():
    problems = problems_of(rack_job(36, topology={"level": "clique", "mode": "required"}), rack_platform())
    assert problems == [
        "job.topology.level: clique holds 18 nodes (one NVLink rack of pool gb200); the job asks for up to "
        "36: pick the level above it or fewer nodes"
    ]


def test_a_job_larger_than_a_rack_without_a_level_above_the_clique_is_refused():
    outputs = rack_platform(levels=[CLIQUE_LABEL, "kubernetes.io/hostname"])
    problems = problems_of(rack_job(36), outputs)
    assert problems == [
        "job.nodes.max: 36 nodes do not fit one NVLink rack of pool gb200 (18 nodes), and its topology has "
        "no level above the clique to span racks at"
    ]


def test_the_topology_key_still_picks_a_level_on_a_rack_pool():
    pod = pod_of(build(rack_job(topology={"level": "block", "mode": "required"}), rack_platform()))
    assert pod["metadata"]["annotations"][REQUIRED_TOPOLOGY] == EKS_LEVELS[0]
