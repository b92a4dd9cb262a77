"""A job on a rack-scale pool (GB200 NVL72): its ComputeDomain, the channel claim of every GPU container,
placement within one NVLink clique (or across cliques at the level above, said in one line) and the
checks of a level that cannot hold the job. Hand-built platform outputs carrying `rack`, no engine run
beyond aws-dev's recorded plan."""

from __future__ import annotations

import pytest

from components.incluster.compute_domain import (
    CLAIM_NAME,
    NIC_CLAIM_NAME,
    claim_template_name,
    compute_domain,
    compute_domain_name,
    nic_claim_template,
    nic_claim_template_name,
    rack_note,
)
from components.incluster.placement import REQUIRED_TOPOLOGY, named_levels
from components.outputs import PlatformOutputs
from components.spec import JobSpec
from contract.rack import CLIQUE_LABEL, COMPUTE_DOMAIN_API_VERSION, COMPUTE_DOMAIN_KIND
from tests.helpers.jobs import build, job_object, platform_outputs, pod_of
from tests.helpers.rack_jobs import DRANET_RACK, EKS_LEVELS, problems_of, rack_job, rack_platform

pytestmark = pytest.mark.plans


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
    raw = job_object()
    outputs = PlatformOutputs.model_validate(platform_outputs("aws-dev"))
    pod = pod_of(build(raw, outputs))
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


def test_a_pool_of_one_rack_needs_no_topology_level_and_plan_says_so():
    # A pool that scales from 0 gets no Kueue Topology (placement.tas_blocker), but at 18 nodes it is one rack.
    outputs = rack_platform(nodes=18)
    pool = next(p for p in outputs.node_pools if p.name == "gb200")
    outputs = outputs.model_copy(
        update={
            "node_pools": [
                p.model_copy(update={"min_nodes": 0}) if p.name == "gb200" else p for p in outputs.node_pools
            ]
        }
    )
    assert pool.rack is not None
    pod = pod_of(build(rack_job(), outputs))
    assert REQUIRED_TOPOLOGY not in (pod["metadata"].get("annotations") or {})
    line = rack_note(JobSpec.load(rack_job()), outputs)
    assert line is not None and "each of its pools is at most one rack" in line


def test_a_rack_whose_nics_come_from_dra_gets_a_nic_template_of_its_own():
    rack = rack_platform(rack=DRANET_RACK).pool("gb200").rack  # type: ignore[union-attr]
    assert rack is not None
    assert nic_claim_template("gpt-small", "research", {"a": "b"}, rack) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpt-small-rdma", "namespace": "research", "labels": {"a": "b"}},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "rdma-nics",
                            "exactly": {
                                "deviceClassName": "mrdma.google.com",
                                "allocationMode": "ExactCount",
                                "count": 4,
                            },
                        }
                    ]
                }
            }
        },
    }
    # A rack whose NICs come another way (EFA's device plugin on AWS) gets none.
    aws_rack = rack_platform().pool("gb200").rack  # type: ignore[union-attr]
    assert aws_rack is not None and nic_claim_template("gpt-small", "research", {}, aws_rack) is None


def test_every_gpu_container_of_a_dranet_rack_job_claims_the_nics_beside_the_channel():
    outputs = rack_platform(rack=DRANET_RACK)
    spec = pod_of(build(rack_job(), outputs))["spec"]
    assert spec["resourceClaims"] == [
        {"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name("gpt-small")},
        {"name": NIC_CLAIM_NAME, "resourceClaimTemplateName": nic_claim_template_name("gpt-small")},
    ]
    gpu = [c for c in spec["containers"] if c["resources"]["limits"].get("nvidia.com/gpu")]
    assert gpu and all(
        c["resources"]["claims"] == [{"name": CLAIM_NAME}, {"name": NIC_CLAIM_NAME}] for c in gpu
    )
    job = JobSpec.load(rack_job())
    assert rack_note(job, outputs).endswith(  # type: ignore[union-attr]
        "; 4 RDMA NICs per pod of mrdma.google.com (ResourceClaimTemplate gpt-small-rdma)"
    )


def test_the_gke_rack_job_stack_creates_its_nic_template_before_the_jobset():
    from tests.helpers.plans import one, planned, upstream

    result = planned("gpt-small-gcp-gb200")
    template = one(result, "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")
    jobset = one(result, "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    assert template.urn in upstream(result, jobset)
    assert template.inputs["metadata"]["name"] == "gpt-small-rdma"
    assert template.inputs["metadata"]["namespace"] == jobset.inputs["metadata"]["namespace"]
