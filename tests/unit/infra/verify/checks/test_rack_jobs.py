"""verify rack-jobs: each rule on a rack pool's training pod, with the plan broken the way it names: a GPU
container without the channel claim, pods claiming from a template their ComputeDomain does not name, two
jobs sharing a ComputeDomain or its template, a job larger than a rack without a spanning level, and on a
DRANET pool a GPU container without the RDMA NIC claim or a claim Kueue refuses or that miscounts. The
pods are the job builder's own (components/incluster/job_runtime.py) on hand-built rack outputs."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from components.incluster.compute_domain import compute_domain, nic_claim_template
from components.incluster.placement import REQUIRED_TOPOLOGY
from components.outputs import NodePoolInfo
from infra.verify.checks.rack_jobs import pod_problems, shared_domains
from infra.verify.jobs import TrainingPod
from infra.verify.model import K8sObject
from tests.helpers.jobs import build
from tests.helpers.rack_jobs import DRANET_RACK, rack_job, rack_platform

pytestmark = pytest.mark.plans


@dataclass
class _Plan:
    """The one lookup the rule reads of a job plan."""

    items: list[K8sObject] = field(default_factory=list)

    def objects(self, kind: str | None = None, namespace: str | None = None) -> list[K8sObject]:
        return [o for o in self.items if kind is None or o.kind == kind]


@dataclass
class _Resource:
    name: str = "unnamed"


def _obj(body: dict[str, Any]) -> K8sObject:
    return K8sObject(_Resource(), body)  # type: ignore[arg-type]


def _job(
    nodes: int = 18, name: str = "gpt-small", rack: dict[str, Any] | None = None
) -> tuple[TrainingPod, NodePoolInfo, list[K8sObject]]:
    outputs = rack_platform(rack=rack)
    js = build(rack_job(nodes, name=name), outputs)
    rj = js["spec"]["replicatedJobs"][0]["template"]
    job = _obj({"kind": "Job", "metadata": copy.deepcopy(js["metadata"]), "spec": copy.deepcopy(rj["spec"])})
    ns = js["metadata"]["namespace"]
    domains = [_obj(compute_domain(name, ns, {}))]
    pool = outputs.pool("gb200")
    assert pool is not None
    pod = TrainingPod("research", "gb200", job, _Plan(domains), False, "JobSet")  # type: ignore[arg-type]
    return pod, pool, domains


def _dranet_job() -> tuple[TrainingPod, NodePoolInfo, list[K8sObject], list[K8sObject]]:
    """A job on a rack pool whose RDMA NICs come from DRANET, with the job's own NIC claim template."""
    pod, pool, domains = _job(rack=DRANET_RACK)
    assert pool.rack is not None
    template = nic_claim_template("gpt-small", pod.job.namespace or "", {}, pool.rack)
    assert template is not None
    return pod, pool, domains, [_obj(template)]


def _spec(pod: TrainingPod) -> dict[str, Any]:
    return pod.job.spec["template"]["spec"]  # type: ignore[no-any-return]


def test_the_job_builders_rack_pod_passes_every_rule():
    for nodes in (18, 36):
        pod, pool, domains = _job(nodes)
        assert pod_problems(pod, pool, domains) == []


def test_channel_claim_a_gpu_container_without_the_claim():
    pod, pool, domains = _job()
    for c in _spec(pod)["containers"]:
        c["resources"].pop("claims", None)
    lines = pod_problems(pod, pool, domains)
    assert lines and lines[0].startswith("[channel-claim] team research job gpt-small on rack pool gb200")


def test_claim_template_the_pods_claim_from_another_template():
    pod, pool, domains = _job()
    _spec(pod)["resourceClaims"][0]["resourceClaimTemplateName"] = "someone-elses-channel"
    lines = pod_problems(pod, pool, domains)
    assert lines == [
        "[claim-template] team research job gpt-small on rack pool gb200: claim compute-domain-channel names "
        "ResourceClaimTemplate someone-elses-channel, which neither a ComputeDomain of the job in research "
        "names "
        "(it has: gpt-small-channel) nor the job creates; its pods never start"
    ]


def test_claim_template_a_job_without_its_compute_domain():
    pod, pool, _ = _job()
    assert any(line.startswith("[claim-template]") for line in pod_problems(pod, pool, []))


def test_clique_span_a_job_larger_than_a_rack_that_requires_no_spanning_level():
    pod, pool, domains = _job(36)
    pod.job.spec["template"]["metadata"]["annotations"].pop(REQUIRED_TOPOLOGY)
    lines = pod_problems(pod, pool, domains)
    assert lines and lines[0].startswith(
        "[clique-span] team research job gpt-small on rack pool gb200: 36 pods"
    )


def test_clique_span_a_job_larger_than_a_rack_held_at_the_clique():
    pod, pool, domains = _job(36)
    pod.job.spec["template"]["metadata"]["annotations"][REQUIRED_TOPOLOGY] = "nvidia.com/gpu.clique"
    assert any(line.startswith("[clique-span]") for line in pod_problems(pod, pool, domains))


def test_shared_compute_domain_two_jobs_with_one_domain_or_one_template():
    a = [_obj(compute_domain("a", "research", {}))]
    b = [_obj(compute_domain("b", "research", {}))]
    assert shared_domains([("research/a", a), ("research/b", b)]) == []
    same = shared_domains([("research/a", a), ("research/b", a)])
    assert [line.split(":")[0] for line in same] == [
        "[shared-compute-domain] jobs research/a and research/b share ComputeDomain research/a-compute-domain",
        "[shared-compute-domain] jobs research/a and research/b share claim template research/a-channel",
    ]
    b[0].body["spec"]["channel"]["resourceClaimTemplate"]["name"] = "a-channel"
    one_template = shared_domains([("research/a", a), ("research/b", b)])
    assert len(one_template) == 1 and "claim template research/a-channel" in one_template[0]


def test_the_job_builders_dranet_pod_claims_channel_and_nics_and_passes():
    pod, pool, domains, templates = _dranet_job()
    assert [c["name"] for c in _spec(pod)["resourceClaims"]] == ["compute-domain-channel", "rdma"]
    for c in _spec(pod)["containers"]:
        assert c["resources"]["claims"] == [{"name": "compute-domain-channel"}, {"name": "rdma"}]
    assert pod_problems(pod, pool, domains, templates) == []


def test_rdma_claim_a_gpu_container_without_the_nic_claim():
    pod, pool, domains, templates = _dranet_job()
    for c in _spec(pod)["containers"]:
        c["resources"]["claims"] = [{"name": "compute-domain-channel"}]
    lines = pod_problems(pod, pool, domains, templates)
    assert lines == [
        "[rdma-claim] team research job gpt-small on rack pool gb200: GPU container trainer claims no RDMA NICs "
        "(no resources.claims entry naming a pod claim whose template requests DeviceClass mrdma.google.com): "
        "NCCL runs without RDMA"
    ]


def test_rdma_claim_a_job_without_its_nic_template():
    pod, pool, domains, _ = _dranet_job()
    lines = pod_problems(pod, pool, domains, [])
    assert [line.split(":")[0] for line in lines] == [
        "[claim-template] team research job gpt-small on rack pool gb200",
        "[rdma-claim] team research job gpt-small on rack pool gb200",
    ]


def test_rdma_claim_allocation_mode_all_is_never_admitted_and_a_short_count():
    pod, pool, domains, templates = _dranet_job()
    exactly = templates[0].body["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exactly.update(allocationMode="All")
    exactly.pop("count")
    (line,) = pod_problems(pod, pool, domains, templates)
    assert line.startswith("[rdma-claim]") and "allocationMode All: Kueue never admits it" in line
    exactly.update(allocationMode="ExactCount", count=2)
    (line,) = pod_problems(pod, pool, domains, templates)
    assert (
        "requests 2 of mrdma.google.com, a node of the pool has 4: NCCL runs without RDMA on the rest" in line
    )
