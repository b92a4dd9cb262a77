"""Training-job stacks on recorded aws-dev and gcp-dev platforms: what the job sends to the cluster."""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes_validate
import pulumi
import pytest

from infra.mockcloud import RunResult
from infra.render import kubernetes_objects
from tests.helpers.jobs import (
    EFA,
    EFA_REF,
    FABRIC,
    JOBSET,
    REF,
    child_job_spec,
    container,
    efa_job,
    efa_platform,
    elastic_plan,
    env_of,
    fabric_plan,
    gcp_job_object,
    job_object,
    plan_job,
    platform_outputs,
    pod_spec,
    reference_plan,
    runtime,
    the,
)
from tests.helpers.plans import planned

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

JOB_KINDS_FROM_CRDS = {("monitoring.coreos.com/v1", "PodMonitor"), ("jobset.x-k8s.io/v1alpha2", "JobSet")}


def test_the_job_reads_its_platform_through_a_stack_reference():
    result = reference_plan()
    assert result.stack_references == [REF]
    assert result.outputs["namespace"] == "research"
    assert result.outputs["jobName"] == "gpt-small"
    bucket = platform_outputs("aws-dev")["buckets"]["checkpoints"]
    # Under the team's prefix: each team's identity reaches only `<bucket>/<team>/`.
    assert result.outputs["checkpointUri"] == f"s3://{bucket}/research/gpt-small"
    assert "kubectl -n research logs" in result.outputs["logs"]


def test_fixed_size_job_is_a_jobset_with_stable_pod_dns_and_static_ranks():
    result = reference_plan()
    assert not result.of_type("kubernetes:batch/v1:Job") and not result.of_type("kubernetes:core/v1:Service")
    js = the(result, JOBSET)
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research-gpus"
    assert js["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert js["spec"]["suspend"] is True
    # JobSet makes the headless Service `gpt-small` itself; pod i is gpt-small-workers-0-<i>.gpt-small.
    assert js["spec"]["network"] == {
        "enableDNSHostnames": True,
        "subdomain": "gpt-small",
        "publishNotReadyAddresses": True,
    }
    (rj,) = js["spec"]["replicatedJobs"]
    assert (rj["name"], rj["replicas"]) == ("workers", 1)
    spec = child_job_spec(result)
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == 2
    assert "subdomain" not in pod_spec(result)  # JobSet sets it on the child Job
    args = container(result)["args"]
    assert args[:5] == [
        "--nproc-per-node=8",
        "--nnodes=2",
        "--node-rank=$(NODE_RANK)",
        "--master-addr=gpt-small-workers-0-0.gpt-small",
        "--master-port=29500",
    ]
    assert args[-3:] == ["--", "--config", "/etc/trainplane/trainer.yaml"]
    # No command: the image's entry point (tini, then the launcher) must stay in charge of signals.
    assert "command" not in container(result)


def test_elastic_job_keeps_the_indexed_job_with_a_c10d_rendezvous():
    """JobSet cannot resize and Kueue admits a JobSet whole: an elastic job stays a batch/v1 Job that
    Kueue may admit with nodes.min pods (components/incluster/job_runtime.py)."""
    result = elastic_plan()
    assert not result.of_type(JOBSET)
    job = the(result, "kubernetes:batch/v1:Job")
    svc = the(result, "kubernetes:core/v1:Service")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["suspend"] is True
    assert spec["parallelism"] == spec["completions"] == 2
    assert spec["backoffLimit"] == 20
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "1"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research-gpus"
    assert pod_spec(result)["subdomain"] == svc["metadata"]["name"] == "gpt-small-workers"
    assert container(result)["args"][1:5] == [
        "--nnodes=1:2",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=gpt-small-0.gpt-small-workers:29400",
        "--rdzv-id=gpt-small",
    ]
    assert spec["podFailurePolicy"]["rules"] == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "Ignore", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [143]}},
        {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [2]}},
        {"action": "Ignore", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [75]}},
    ]


def test_partial_admission_of_an_elastic_job_lowers_completions_with_parallelism():
    """Kueue admits an elastic Job with fewer pods when quota is short and sets only `parallelism` unless
    the Job asks for completions to follow (kueue v0.19.2 job_controller.go RunWithPodSetsInfo); with
    `completions` left at the maximum, the missing indexes run after the admitted pods finish."""
    from infra.verify.checks.controllers import kueue_partial_admission

    job = runtime(elastic_plan())
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-completions-equal-parallelism"] == "true"
    admitted = kueue_partial_admission(job, 1)
    assert admitted["parallelism"] == admitted["completions"] == 1
    # A fixed-size job is a JobSet: never partially admitted, so neither it nor its child Job carries it.
    jobset = runtime(reference_plan())
    assert "kueue.x-k8s.io/job-completions-equal-parallelism" not in jobset["metadata"]["annotations"]


def test_pod_spec_carries_resources_selectors_tolerations_volumes_identity_and_failure_policy():
    result = reference_plan()
    pod = pod_spec(result)
    c = container(result)
    # p5.48xlarge: 192 vCPUs, 2048 GiB; the whole node (8 of 8 GPUs) less 15% for the system.
    assert c["resources"] == {
        "requests": {"cpu": "163", "memory": "1740Gi", "nvidia.com/gpu": "8"},
        "limits": {"memory": "1740Gi", "nvidia.com/gpu": "8"},
    }
    assert pod["nodeSelector"] == {
        "trainplane.dev/pool": "h100",
        "trainplane.dev/capacity": "spot",
        "trainplane.dev/gpu": "H100",
    }
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule", "operator": "Equal"}
    ]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [
        {
            "labelSelector": {"matchLabels": {"trainplane.dev/job": "gpt-small"}},
            "topologyKey": "kubernetes.io/hostname",
        }
    ]
    assert pod["serviceAccountName"] == "trainer"
    assert pod["restartPolicy"] == "Never"
    assert pod["terminationGracePeriodSeconds"] == 120
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["vol-datasets"] == {
        "name": "vol-datasets",
        "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True},
    }
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is True and mounts["/dev/shm"]["name"] == "dshm"
    # The failure policy (tests/unit/trainer/test_failure_semantics.py shows what it does).
    assert child_job_spec(result)["backoffLimit"] == 0
    assert the(result, JOBSET)["spec"]["failurePolicy"]["maxRestarts"] == 20
    env = env_of(result)
    assert env["TRAINPLANE_METRICS_PORT"] == "9090"
    assert env["TRAINPLANE_JOB_NAME"] == "gpt-small"
    assert env["TRAINPLANE_GRACE_S"] == "110"
    assert env["NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    # torchrun's own default for more than one worker, set for the launcher too: its zygote forks the workers
    assert env["OMP_NUM_THREADS"] == "1"


def test_the_jobs_own_omp_setting_wins_and_one_worker_per_pod_keeps_the_default():
    own = job_object()
    own["env"] = {**own.get("env", {}), "OMP_NUM_THREADS": "4"}
    names = [e["name"] for e in container(plan_job(own))["env"]]
    assert names.count("OMP_NUM_THREADS") == 1 and env_of(plan_job(own))["OMP_NUM_THREADS"] == "4"
    single = job_object()
    single["gpusPerNode"] = 1
    assert "OMP_NUM_THREADS" not in env_of(plan_job(single))  # torchrun sets none for one worker either


def test_trainer_config_map_holds_the_trainer_block_and_the_job_decisions():
    import yaml

    data = yaml.safe_load(the(reference_plan(), "kubernetes:core/v1:ConfigMap")["data"]["trainer.yaml"])
    trainer = data["trainer"]
    assert trainer["model"] == "gpt-small" and trainer["globalBatchSize"] == 512
    assert trainer["worldSizes"] == [16]
    assert trainer["checkpoint"] == {"intervalSteps": 500, "keep": 3, "asyncSave": True}
    from trainer.config import TrainConfig, normalise_keys

    config = TrainConfig.model_validate(normalise_keys(trainer))
    assert config.accumulation(16) == 4


def test_pod_monitor_scrapes_the_trainer_with_job_node_rank_and_node_labels():
    (pm,) = [r for r in reference_plan().resources if r.type.endswith(":PodMonitor")]
    spec = pm.inputs["spec"]
    # trainplane's job label: a JobSet's pods carry their child Job's name (gpt-small-workers-0) in
    # batch.kubernetes.io/job-name, not the job's.
    assert spec["selector"] == {"matchLabels": {"trainplane.dev/job": "gpt-small"}}
    assert spec["selector"]["matchLabels"].items() <= pod_spec_labels(reference_plan()).items()
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics"
    # node: the straggler alert names the node a slow rank runs on (goodput_rules.py).
    assert {x["targetLabel"] for x in endpoint["relabelings"]} == {"job", "node_rank", "node"}
    assert "metrics" in {p["name"] for p in container(reference_plan())["ports"]}


def pod_spec_labels(result: RunResult) -> dict[str, str]:
    return child_job_spec(result)["template"]["metadata"]["labels"]


@pytest.mark.parametrize("version", ["1.33", "1.34", "1.35"])
@pytest.mark.parametrize("platform", ["aws", "gcp", "aws-efa", "elastic"])
def test_job_objects_validate_strictly(platform, version):
    result = {
        "aws": reference_plan,
        "gcp": lambda: plan_job(gcp_job_object()),
        "aws-efa": lambda: plan_job(efa_job(), {EFA_REF: efa_platform()}),
        "elastic": elastic_plan,
    }[platform]()
    objects = kubernetes_objects(result)
    expected = {"ConfigMap", "Service", "Job", "PodMonitor"} if platform == "elastic" else None
    assert {o["kind"] for o in objects} == (expected or {"ConfigMap", "JobSet", "PodMonitor"})
    for obj in objects:
        if obj["kind"] == "JobSet":
            # The child Job JobSet creates from the template, strictly as Kubernetes sees it; the JobSet
            # itself against its CRD in test_jobset_validates_against_its_crd.
            (rj,) = obj["spec"]["replicatedJobs"]
            obj = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "x-workers-0"},
                **rj["template"],
            }
        if (obj["apiVersion"], obj["kind"]) in JOB_KINDS_FROM_CRDS:
            continue  # kube-prometheus-stack's CRD; its fields are asserted above
        kubernetes_validate.validate(obj, version, strict=True)


def test_jobset_failure_policy_rule_names_pass_the_jobset_webhook():
    """JobSet's validating webhook (failurePolicy Fail) refuses the whole JobSet when a rule name is not
    1-128 characters of `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$` or repeats one
    (jobset@v0.12.0:pkg/webhooks/jobset_webhook.go validateFailurePolicy); dashes are refused."""
    import re

    allowed = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    plans = (reference_plan(), plan_job(efa_job(), {EFA_REF: efa_platform()}), fabric_plan())
    for result in plans:
        (js,) = [o for o in kubernetes_objects(result) if o["kind"] == "JobSet"]
        names = [r.get("name", "") for r in js["spec"]["failurePolicy"]["rules"]]
        assert names and len(set(names)) == len(names), names
        assert all(1 <= len(n) <= 128 and allowed.match(n) for n in names), names


def test_gcp_platform_job_uses_gcs_and_at_least_60s_of_grace():
    result = plan_job(gcp_job_object())
    bucket = platform_outputs("gcp-dev")["buckets"]["checkpoints"]
    assert env_of(result)["TRAINPLANE_CHECKPOINT_URI"] == f"gs://{bucket}/research/gpt-small"
    # GKE's preemption notice is 30 s; a Kueue preemption or a drain still gets 60 s to checkpoint.
    assert platform_outputs("gcp-dev")["preemptionGraceSeconds"] < 60
    assert pod_spec(result)["terminationGracePeriodSeconds"] == 60
    assert env_of(result)["TRAINPLANE_GRACE_S"] == "50"
    assert pod_spec(result)["serviceAccountName"] == "trainer"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        return _flatten({v["name"]: v for v in value}, prefix)
    return {prefix: value}


def _state(result: RunResult) -> dict[str, Any]:
    return {
        k: v
        for r in result.resources
        if r.type.startswith("kubernetes:")
        for k, v in _flatten(r.inputs, r.type.rsplit(":", 1)[-1]).items()
    }


def _changed(before: RunResult, after: RunResult) -> set[str]:
    a, b = _state(before), _state(after)
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def _two_h100_pools() -> dict[str, Any]:
    outputs = copy.deepcopy(platform_outputs("aws-dev"))
    spot = next(p for p in outputs["nodePools"] if p["name"] == "h100")
    ondemand = copy.deepcopy(spot)
    ondemand.update(name="h100-od", capacity="on-demand")
    ondemand["labels"].update({"trainplane.dev/pool": "h100-od", "trainplane.dev/capacity": "on-demand"})
    outputs["nodePools"].append(ondemand)
    return outputs


def _set(obj: dict, **changes: Any) -> dict:
    obj = copy.deepcopy(obj)
    for path, value in changes.items():
        cur = obj
        *parents, last = path.split("__")
        for p in parents:
            cur = cur[p]
        cur[last] = value
    return obj


JOB = "JobSet.spec.replicatedJobs.workers.template.spec"
POD = f"{JOB}.template.spec"
CHANGES = [
    (
        "one node",
        {"nodes": {"min": 1, "max": 1}},
        {
            f"{JOB}.parallelism",
            f"{JOB}.completions",
            f"{POD}.containers.trainer.args",
            "ConfigMap.data.trainer.yaml",
        },
    ),
    (
        "a grace period of its own",
        {"gracePeriodSeconds": 300},
        {f"{POD}.terminationGracePeriodSeconds", f"{POD}.containers.trainer.env.TRAINPLANE_GRACE_S.value"},
    ),
    (
        "more restarts",
        {"maxRestarts": 50},
        {"JobSet.spec.failurePolicy.maxRestarts"},
    ),
    (
        "4 of 8 GPUs per node",
        {"gpusPerNode": 4},
        {
            f"{POD}.containers.trainer.resources.requests.nvidia.com/gpu",
            f"{POD}.containers.trainer.resources.limits.nvidia.com/gpu",
            f"{POD}.containers.trainer.resources.requests.cpu",
            f"{POD}.containers.trainer.resources.requests.memory",
            f"{POD}.containers.trainer.resources.limits.memory",
            f"{POD}.volumes.dshm.emptyDir.sizeLimit",
            f"{POD}.containers.trainer.args",
            "ConfigMap.data.trainer.yaml",
        },
    ),
    (
        "on-demand pool",
        {"spot": False, "nodePool": "h100-od"},
        {f"{POD}.nodeSelector.trainplane.dev/pool", f"{POD}.nodeSelector.trainplane.dev/capacity"},
    ),
    (
        "checkpoint to a bucket of its own",
        {"checkpoint__uri": "s3://team-research-ckpt/gpt"},
        {f"{POD}.containers.trainer.env.TRAINPLANE_CHECKPOINT_URI.value"},
    ),
]


@pytest.mark.parametrize(("what", "changes", "expected"), CHANGES, ids=[c[0] for c in CHANGES])
def test_changing_one_knob_changes_what_it_must_and_nothing_else(what, changes, expected):
    refs = {REF: _two_h100_pools()}
    before = plan_job(job_object(), refs)
    after = plan_job(_set(job_object(), **changes), refs)
    assert _changed(before, after) == expected


BAD = [
    (
        {"nodePool": "a100"},
        "job.nodePool: 'a100' is not a node pool of platform organization/trainplane/aws-dev; known: h100, system",
    ),
    ({"gpusPerNode": 16}, "job.gpusPerNode: 16 is more than the 8 GPUs per node of pool h100"),
    (
        {"volumes": [{"storage": "scratch", "mountPath": "/scratch"}]},
        "job.volumes[0].storage: team research has no storage 'scratch' on platform "
        "organization/trainplane/aws-dev; it has: datasets",
    ),
    ({"nodes": {"min": 3, "max": 2}}, "job.nodes.min: 3 is greater than nodes.max 2"),
    (
        {"team": "vision"},
        "job.team: 'vision' is not a team of platform organization/trainplane/aws-dev; known: research",
    ),
    ({"nodePool": "system"}, "job.nodePool: system is a CPU pool; a training job needs a GPU pool"),
    ({"nodes": {"min": 2, "max": 6}}, "job.nodes.max: 6 nodes is more than pool h100 can scale to (4)"),
    ({"spot": False}, "job.spot: pool h100 is spot capacity; set spot: true to accept preemption"),
    (
        {"checkpoint": {"uri": "gs://auto"}},
        "job.checkpoint.uri: platform organization/trainplane/aws-dev keeps checkpoints in s3://; use s3://auto",
    ),
    (
        {"checkpoint": {"uri": "/data/ckpt"}},
        "job.checkpoint.uri: /data/ckpt is not under a writable volume of this job (writable mountPaths: none); checkpoints must outlive the pod",
    ),
    ({"trainer": {"globalBatchSize": 500, "microBatchSize": 8}}, "job.trainer"),
    (
        {"nodes": {"min": 3, "max": 4}},
        "job.nodes.min: 3 nodes x 8 GPUs is more than team research's GPU quota of 16",
    ),
    ({"gracePeriodSeconds": 30}, "job.gracePeriodSeconds: Input should be greater than or equal to 60"),
]


@pytest.mark.parametrize(
    ("change", "expected"), BAD, ids=[b[1].split(":")[0] + str(i) for i, b in enumerate(BAD)]
)
def test_bad_jobs_fail_with_a_config_error_before_any_kubernetes_object(change, expected):
    job = {**job_object(), **change}
    with pytest.raises(pulumi.RunError) as info:
        plan_job(job)
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid stack config:"
    assert any(line.startswith(expected) for line in lines[1:]), lines


def test_checkpoints_may_go_to_a_writable_shared_volume():
    job = job_object()
    job["volumes"].append({"storage": "datasets", "mountPath": "/ckpt", "subPath": "checkpoints/gpt-small"})
    job["checkpoint"]["uri"] = "/ckpt/run1"
    result = plan_job(job)
    assert env_of(result)["TRAINPLANE_CHECKPOINT_URI"] == "/ckpt/run1"
    mounts = {m["mountPath"]: m for m in container(result)["volumeMounts"]}
    assert mounts["/ckpt"]["subPath"] == "checkpoints/gpt-small" and mounts["/ckpt"]["readOnly"] is False


def test_cli_plans_and_renders_the_job_stack(tmp_path, capsys):
    import yaml

    from infra.cli import main

    assert main(["render", "gpt-small-aws-dev", "--out", str(tmp_path)]) == 0
    js = yaml.safe_load((tmp_path / "research" / "JobSet-gpt-small.yaml").read_text())
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2
    assert sorted(p.name for p in (tmp_path / "research").iterdir()) == [
        "ConfigMap-gpt-small-config.yaml",
        "JobSet-gpt-small.yaml",
        "PodMonitor-gpt-small.yaml",
    ]
    capsys.readouterr()
    assert main(["plan", "gpt-small-aws-dev", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["gpus"] == {"min": 16, "max": 16}
    (pool,) = summary["cost"]["pools"]
    assert (pool["pool"], pool["minNodes"], pool["maxNodes"]) == ("h100", 2, 2)
    assert summary["cost"]["maxHourly"] == pytest.approx(2 * pool["spotHourly"], abs=0.01)


# ---- a pool with fabric devices (EFA on p5/p5e/p5en) -------------------------------------------


def test_pod_on_an_efa_pool_requests_every_device_of_its_node_and_gets_the_fabric_env():
    result = plan_job(
        efa_job(env={"FI_EFA_USE_DEVICE_RDMA": "0", "NCCL_DEBUG": "INFO"}), {EFA_REF: efa_platform()}
    )
    resources = container(result)["resources"]
    # Extended resources take requests equal to limits; a pod sees only the devices it requests.
    assert resources["requests"][EFA] == resources["limits"][EFA] == "16"
    env = env_of(result)
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "0"  # the job's own env wins over the pool's
    assert env["NCCL_DEBUG"] == "INFO"
    names = [e["name"] for e in container(result)["env"]]
    assert len(names) == len(set(names))
    bucket = efa_platform()["buckets"]["checkpoints"]
    assert env["TRAINPLANE_CHECKPOINT_URI"] == f"s3://{bucket}/llm/gpt-small"


def test_pod_on_a_pool_without_extended_resources_requests_none():
    requests = container(reference_plan())["resources"]["requests"]
    assert set(requests) == {"cpu", "memory", "nvidia.com/gpu"}


def parse_quantity(q: str) -> float:
    """The Kubernetes quantities these objects use: plain numbers, milli-units and Ki/Mi/Gi/Ti."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix, factor in units.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * factor
    return float(q)


def test_the_platform_admits_the_largest_efa_job_of_a_team():
    """The job's pods fit the team's Kueue ClusterQueue (every requested resource covered, in quota) and
    its namespace ResourceQuota, on the same platform (aws-h200-efa, EFA pools)."""
    platform = planned("aws-h200-efa")
    quota_gpus = next(t["gpuQuota"] for t in efa_platform()["teams"] if t["name"] == "llm")
    job = plan_job(efa_job(nodes={"min": quota_gpus // 8, "max": quota_gpus // 8}), {EFA_REF: efa_platform()})
    requests = container(job)["resources"]["requests"]
    pods = child_job_spec(job)["parallelism"]
    (cq,) = [
        r.inputs["spec"]
        for r in platform.resources
        if r.type.endswith(":ClusterQueue") and r.inputs["metadata"]["name"] == "llm"
    ]
    (group,) = cq["resourceGroups"]
    assert set(requests) <= set(group["coveredResources"])
    (flavor,) = [f for f in group["flavors"] if f["name"] == "h200-spot"]
    # Its share of the flavor plus what it may borrow from the other team's idle share (the flavor's GPUs
    # are split across the teams, contract/quota.py).
    reach = {
        r["name"]: parse_quantity(r["nominalQuota"]) + parse_quantity(r.get("borrowingLimit", "0"))
        for r in flavor["resources"]
    }
    for name, value in requests.items():
        assert parse_quantity(value) * pods <= reach[name], name
    (quota,) = [
        r.inputs["spec"]["hard"]
        for r in platform.of_type("kubernetes:core/v1:ResourceQuota")
        if r.inputs["metadata"]["namespace"] == "llm"
    ]
    for key, hard in quota.items():
        resource = key.split(".", 1)[1]
        asked = (
            requests.get(resource)
            if key.startswith("requests.")
            else container(job)["resources"]["limits"].get(resource)
        )
        if asked is not None:
            assert parse_quantity(asked) * pods <= parse_quantity(hard), key


# ---- a pool with a pod fabric (what a backend sets in NodePoolInfo.fabric, e.g. GKE TCPXO) ---------


def test_the_pools_fabric_reaches_the_pod_as_given():
    result = fabric_plan()
    template = child_job_spec(result)["template"]
    assert template["metadata"]["annotations"] == FABRIC["annotations"]
    pod = template["spec"]
    assert FABRIC["volumes"][0] in pod["volumes"]
    assert FABRIC["volumeMounts"][0] in container(result)["volumeMounts"]
    # Native sidecar: an init container that keeps running beside the trainer (Kubernetes 1.29+).
    assert pod["initContainers"] == [{**FABRIC["sidecars"][0], "restartPolicy": "Always"}]
    assert env_of(result)["FABRIC_PLUGIN"] == "/usr/local/fabric/lib64"
    # Without a fabric nothing of it appears.
    plain = child_job_spec(reference_plan())["template"]
    assert "annotations" not in plain["metadata"] and "initContainers" not in plain["spec"]


@pytest.mark.parametrize("version", ["1.33", "1.35"])
def test_a_fabric_pod_validates_strictly(version):
    (js,) = [o for o in kubernetes_objects(fabric_plan()) if o["kind"] == "JobSet"]
    (rj,) = js["spec"]["replicatedJobs"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x-workers-0"}, **rj["template"]}
    kubernetes_validate.validate(job, version, strict=True)
