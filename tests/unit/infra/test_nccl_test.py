"""`trainplane nccl-test`: the preflight is the job's own JobSet (pool, fabric, placement, queue) running
trainer.collectives, judged against the fabric's floor; live, it is created, read and deleted through a
fake API server on loopback with the real kubernetes client."""

from __future__ import annotations

import json

import pytest
import yaml

from components import nccl_floors as fabrics
from infra import cli, stacks
from infra.nccl_test import PreflightError, build

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

JOB_STACK = "gpt-small-aws-dev"


@pytest.fixture(scope="module")
def job_and_platform():
    return stacks.job_and_platform(JOB_STACK, [])


def _container(manifest):
    pod = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return pod, next(c for c in pod["containers"] if c["name"] == "trainer")


def test_the_preflight_is_the_jobs_jobset_with_the_sweep_in_place_of_the_trainer(job_and_platform):
    job, platform = job_and_platform
    from components.incluster.job_runtime import training_jobset

    pf = build(job.model_copy(update={"nodes": job.nodes.model_copy(update={"min": 2, "max": 2})}), platform)
    real = training_jobset(
        job.model_copy(update={"nodes": job.nodes.model_copy(update={"min": 2, "max": 2})}), platform
    )
    pod, c = _container(pf.manifest)
    real_pod, real_c = _container(real)
    # same placement, fabric, queue and environment as the job itself
    for key in ("nodeSelector", "tolerations", "annotations"):
        assert pod.get(key) == real_pod.get(key), key
    assert (pod.get("affinity") or {}).get("nodeAffinity") == (real_pod.get("affinity") or {}).get(
        "nodeAffinity"
    )
    assert c["resources"] == real_c["resources"]

    def env(container):  # the job's environment (fabric, NCCL, identity); TRAINPLANE_* name the job
        return {e["name"]: e for e in container["env"] if not e["name"].startswith("TRAINPLANE_")}

    assert env(c) == env(real_c) and [e["name"] for e in c["env"]] == [e["name"] for e in real_c["env"]]
    assert (
        pf.manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        == real["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    )
    assert pf.name == f"{job.name}-nccl" and pf.manifest["metadata"]["name"] == pf.name
    # the sweep under torchrun, static ranks over the JobSet's pod-0 address, never restarted
    cmd = c["command"]
    assert cmd[:3] == ["python", "-m", "torch.distributed.run"]
    assert "--nnodes=2" in cmd and "--node-rank=$(NODE_RANK)" in cmd and "--max-restarts=0" in cmd
    assert any(a.startswith(f"--master-addr={pf.name}-") for a in cmd)
    assert cmd[cmd.index("-m", 3) + 1] == "trainer.collectives"
    assert pf.manifest["spec"]["failurePolicy"] == {"maxRestarts": 0}
    assert pf.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] == 2


def test_an_efa_pool_gets_the_published_floor_and_a_too_small_preflight_is_refused(job_and_platform):
    job, platform = job_and_platform
    pool = platform.pool(job.node_pool)
    pf = build(job, platform, nodes=2)
    kind = fabrics.pool_fabric_kind(pool.model_dump(by_alias=True))
    assert pf.fabric == kind
    if kind is None:
        assert pf.floor_gbps is None and "--floor-gbps" not in _container(pf.manifest)[1]["command"]
    else:
        floor = min(
            (fabrics.floor_gbps(kind, "all_gather", m) for m in pool.machine_types),
            key=lambda f: f.busbw_gbps,
        )
        cmd = _container(pf.manifest)[1]["command"]
        assert cmd[cmd.index("--floor-gbps") + 1] == str(floor.minimum())
    with pytest.raises(PreflightError, match="--nodes 1: the preflight needs 2"):
        build(job, platform, nodes=1)


def test_cli_prints_the_preflight_without_a_cluster_and_bad_input_is_one_line(capsys):
    assert cli.main(["nccl-test", JOB_STACK, "--nodes", "2"]) == 0
    printed = capsys.readouterr()
    # `nccl-test JOB > jobset.yaml` is the manifest alone; what it is goes to stderr.
    manifest = yaml.safe_load(printed.out)
    assert manifest["kind"] == "JobSet" and manifest["metadata"]["name"] == "gpt-small-nccl"
    assert "NCCL preflight" in printed.err and "nothing sent" in printed.err
    assert cli.main(["nccl-test", JOB_STACK, "--nodes", "99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--nodes 99" in err[0]
    assert cli.main(["nccl-test", "aws-dev"]) == 2
    assert "not a job stack" in capsys.readouterr().err


def test_a_tcpxo_preflight_carries_the_fabric_and_is_judged_against_a3_megas_published_floor(tmp_path):
    stack = tmp_path / "Pulumi.mega-job.yaml"
    stack.write_text(
        "config:\n  trainplane:job:\n    platformStack: organization/trainplane/gcp-h100-mega\n"
        "    name: mega-job\n    team: pretrain\n    image: ghcr.io/example/trainplane-trainer:0.1.0\n"
        "    nodePool: h100mega\n    spot: true\n    nodes: {min: 2, max: 2}\n    gpusPerNode: 8\n"
        "    trainer: {model: gpt-small, globalBatchSize: 64, microBatchSize: 4}\n"
    )
    job, platform = stacks.job_and_platform(str(stack), [])
    pf = build(job, platform)
    tcpxo = fabrics.floor_gbps("tcpxo", "all_gather")
    assert (pf.fabric, pf.floor_gbps, pf.nodes) == ("tcpxo", tcpxo.minimum(), 2)
    assert "a3-megagpu-8g" in (pf.floor_source or "") or "megagpu" in (pf.floor_source or "")
    pod, c = _container(pf.manifest)
    fabric = platform.pool("h100mega").fabric
    template = pf.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    # the pool's GPUDirect wiring reaches the preflight pods: interfaces, RxDM sidecar, NCCL plugin env
    for key, value in fabric.annotations.items():
        assert template["metadata"]["annotations"][key] == value
    sidecars = {s["name"] for s in fabric.sidecars}
    assert sidecars and sidecars <= {i["name"] for i in pod.get("initContainers", [])}
    names = {e["name"] for e in c["env"]}
    assert set(platform.pool("h100mega").pod_env) <= names


def test_the_preflight_of_a_longest_name_job_passes_the_jobset_webhook_at_11_nodes(job_and_platform):
    """`<40 chars>-nccl-workers-0-10-abcde` was 64 characters: JobSet v0.12.0's webhook refused the
    preflight of any job with a 40-character name on 11 or more nodes."""
    from infra.verify.checks import admission_webhooks

    job, platform = job_and_platform
    long = job.model_copy(
        update={"name": "a" * 40, "nodes": job.nodes.model_copy(update={"min": 11, "max": 11})}
    )
    pf = build(long, platform)
    assert len(pf.name) <= 40 and pf.name.endswith("-nccl")
    assert admission_webhooks.jobset(pf.manifest) == []


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound, never listening: connections to it are refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_kubeconfig_that_cannot_be_used_is_one_line_exit_2(tmp_path, capsys):
    # It used to be "trainplane: internal error: ConfigException ..." and exit 1, the floor's code.
    assert cli.main(["nccl-test", JOB_STACK, "--kubeconfig", "/nonexistent"]) == 2
    printed = capsys.readouterr()
    assert printed.err.strip().splitlines() == [
        "--kubeconfig /nonexistent: cannot load it: ConfigException: Invalid kube-config file. "
        "No configuration found."
    ]
    assert printed.out == ""
    # An API server nobody answers on: also exit 2, one line naming where it looked.
    port = _closed_port()
    unreachable = tmp_path / "config"
    unreachable.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "f", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "f", "context": {"cluster": "f", "user": "u"}}],
                "current-context": "f",
            }
        )
    )
    assert cli.main(["nccl-test", JOB_STACK, "--kubeconfig", str(unreachable)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cannot reach the cluster at http://127.0.0.1:{port}")


def test_a_rack_preflight_brings_its_own_compute_domain_and_has_no_invented_floor():
    from components.incluster.compute_domain import claim_template_name
    from components.spec import JobSpec
    from tests.helpers.rack_jobs import rack_job, rack_platform

    pf = build(JobSpec.load(rack_job(18)), rack_platform())
    assert pf.fabric == fabrics.MNNVL and pf.floor_gbps is None
    assert pf.compute_domain is not None and pf.compute_domain["metadata"]["namespace"] == pf.namespace
    pod, trainer = _container(pf.manifest)
    template = pf.compute_domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert template == claim_template_name(pf.name) == pod["resourceClaims"][0]["resourceClaimTemplateName"]
    assert trainer["resources"]["claims"] == [{"name": pod["resourceClaims"][0]["name"]}]


def test_a_dranet_rack_preflight_brings_its_own_nic_template_and_claims_it():
    from components.incluster.compute_domain import nic_claim_template_name
    from components.spec import JobSpec
    from tests.helpers.rack_jobs import DRANET_RACK, rack_job, rack_platform

    pf = build(JobSpec.load(rack_job(18)), rack_platform(rack=DRANET_RACK))
    assert pf.nic_claim_template is not None
    assert pf.nic_claim_template["metadata"] == {
        "name": nic_claim_template_name(pf.name),
        "namespace": pf.namespace,
        "labels": pf.manifest["metadata"]["labels"],
    }
    pod, trainer = _container(pf.manifest)
    assert [c["resourceClaimTemplateName"] for c in pod["resourceClaims"]][1] == nic_claim_template_name(
        pf.name
    )
    assert [c["name"] for c in trainer["resources"]["claims"]] == [c["name"] for c in pod["resourceClaims"]]
    # An AWS rack (EFA through its device plugin) has none.
    assert build(JobSpec.load(rack_job(18)), rack_platform()).nic_claim_template is None
