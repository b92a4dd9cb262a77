"""`nccl-test --kubeconfig` against the fake Kubernetes API server (tests/helpers/fake_k8s.py): the JobSet is
created, rank 0's result read, the JobSet always deleted (tests/unit/infra/test_nccl_test.py has the rest)."""

from __future__ import annotations

import pytest

from infra import cli, stacks
from infra.nccl_test import COMPLETION_INDEX_LABEL, JOBSET_NAME_LABEL, PreflightError, build, run_live
from tests.helpers.fake_k8s import FakeApiServer, Request
from trainer.collectives import RESULT_PREFIX, Result, Row

JOB_STACK = "gpt-small-aws-dev"


@pytest.fixture(scope="module")
def job_and_platform():
    return stacks.job_and_platform(JOB_STACK, [])


class FakeCluster:
    """Routes of the fake API server (tests/helpers/fake_k8s.py): JobSets created, read and deleted,
    rank 0's pod and its log."""

    jobsets: dict = {}
    deleted: list = []
    posted: list = []
    log = ""

    @classmethod
    def post(cls, req: Request) -> tuple[int, dict]:
        cls.posted.append(req.path)
        obj = req.body
        obj["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
        cls.jobsets[obj["metadata"]["name"]] = obj
        return 201, obj

    @classmethod
    def get(cls, req: Request) -> tuple[int, dict | str]:
        parts = req.path.strip("/").split("/")
        if req.path.rstrip("/") == "/version":  # what `connect` asks first
            keys = ("buildDate", "compiler", "gitCommit", "gitTreeState", "goVersion", "platform")
            return 200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0", **dict.fromkeys(keys, "x")}
        if req.path.endswith("/log"):
            return 200, cls.log
        if parts[-1] == "pods":
            sel = req.query["labelSelector"][0]
            name = sel.split(",")[0].split("=")[1]
            ok = f"{JOBSET_NAME_LABEL}={name}" in sel and f"{COMPLETION_INDEX_LABEL}=0" in sel
            items = [{"metadata": {"name": f"{name}-workers-0-0", "namespace": parts[3]}}] if ok else []
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        return 200, cls.jobsets[parts[-1]]

    @classmethod
    def delete(cls, req: Request) -> tuple[int, dict]:
        cls.deleted.append(req.path.rsplit("/", 1)[-1])
        return 200, {"kind": "Status", "status": "Success"}


@pytest.fixture
def cluster(tmp_path):
    server = FakeApiServer(FakeCluster)
    FakeCluster.jobsets, FakeCluster.deleted, FakeCluster.posted = {}, [], []
    yield server.kubeconfig(tmp_path / "config")
    server.close()


def test_live_run_reads_rank_zeros_result_and_always_deletes_the_jobset(job_and_platform, cluster, capsys):
    job, platform = job_and_platform
    pf = build(job, platform, nodes=2)
    low = Result("all_gather", 16, "nccl", [Row(8 << 30, 1e5, 85.9, 80.5)], 1000.0)
    FakeCluster.log = f"warming up\n{RESULT_PREFIX} {low.to_json()}\n"
    assert run_live(pf, kubeconfig=cluster, context=None, poll_s=0) == low
    assert pf.name in FakeCluster.jobsets and FakeCluster.deleted == [pf.name]
    # the CLI's verdict: below the floor is exit 1, with the sweep printed
    assert cli.main(["nccl-test", JOB_STACK, "--nodes", "2", "--kubeconfig", cluster]) == 1
    assert "BELOW FLOOR" in capsys.readouterr().out
    FakeCluster.log = "the pod never got to the sweep\n"
    with pytest.raises(PreflightError, match="no result from rank 0"):
        run_live(pf, kubeconfig=cluster, context=None, poll_s=0)
    assert FakeCluster.deleted.count(pf.name) == 3


def test_a_preflight_without_a_result_is_a_failed_check_exit_1(cluster, capsys):
    FakeCluster.log = "the pod never got to the sweep\n"
    assert cli.main(["nccl-test", JOB_STACK, "--nodes", "2", "--kubeconfig", cluster]) == 1
    assert "no result from rank 0" in capsys.readouterr().err


def test_a_dranet_rack_preflight_creates_its_domain_and_nic_template_first_and_deletes_them(cluster):
    from components.spec import JobSpec
    from tests.helpers.rack_jobs import DRANET_RACK, rack_job, rack_platform

    pf = build(JobSpec.load(rack_job(18)), rack_platform(rack=DRANET_RACK))
    FakeCluster.log = f"{RESULT_PREFIX} {Result('all_gather', 72, 'nccl', [], 1.0).to_json()}\n"
    run_live(pf, kubeconfig=cluster, context=None, poll_s=0)
    ns = pf.namespace
    assert FakeCluster.posted == [
        f"/apis/resource.nvidia.com/v1beta1/namespaces/{ns}/computedomains",
        f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
    ]
    assert pf.compute_domain is not None and pf.nic_claim_template is not None
    assert FakeCluster.deleted == [
        pf.name,
        pf.compute_domain["metadata"]["name"],
        pf.nic_claim_template["metadata"]["name"],
    ]
