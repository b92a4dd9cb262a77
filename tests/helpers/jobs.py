"""Job stacks planned on the recorded aws-dev and gcp-dev platforms, the lookups into what a job sends
to the cluster, and the JobSet failure-policy decisions (through jobset_sim.py) the job tests share."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from components.incluster.job_runtime import training_jobset
from components.outputs import PlatformOutputs
from components.spec import ConfigError, JobSpec, check_job
from infra.mockcloud import RunResult, run_program
from tests.helpers.jobset_sim import PodOutcome, job_failure, jobset_rule
from tests.helpers.plans import ROOT, planned

REF = "organization/trainplane/aws-dev"


GCP_REF = "organization/trainplane/gcp-dev"


JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def platform_outputs(stack: str) -> dict[str, Any]:
    """What a deployed platform stack hands over: its offline plan's outputs."""
    return planned(stack).outputs


def job_object() -> dict[str, Any]:
    from infra import stackfile

    return copy.deepcopy(stackfile.load("gpt-small-aws-dev", ROOT).object("trainplane:job"))


def gcp_job_object() -> dict[str, Any]:
    job = job_object()
    job["platformStack"] = GCP_REF
    job["checkpoint"]["uri"] = "gs://auto"
    return job


def plan_job(job: dict[str, Any], refs: dict[str, Any] | None = None) -> RunResult:
    if refs is None:
        refs = {REF: platform_outputs("aws-dev"), GCP_REF: platform_outputs("gcp-dev")}
    return run_program({"trainplane:job": json.dumps(job)}, "job", stack_refs=refs)


@functools.cache
def reference_plan() -> RunResult:
    return plan_job(job_object())


def the(result: RunResult, type_: str) -> dict[str, Any]:
    (r,) = result.of_type(type_)
    return r.inputs


def runtime(result: RunResult) -> dict[str, Any]:
    """The job's JobSet (fixed size) or batch/v1 Job (elastic)."""
    (r,) = [r for r in result.resources if r.type in (JOBSET, "kubernetes:batch/v1:Job")]
    return r.inputs


def child_job_spec(result: RunResult) -> dict[str, Any]:
    """The spec of the Job the pods belong to: the JobSet's replicated job template, or the Job's own."""
    obj = runtime(result)
    if "replicatedJobs" in obj["spec"]:
        (rj,) = obj["spec"]["replicatedJobs"]
        return rj["template"]["spec"]
    return obj["spec"]


def pod_spec(result: RunResult) -> dict[str, Any]:
    return child_job_spec(result)["template"]["spec"]


def elastic_plan() -> RunResult:
    job = job_object()
    job["nodes"] = {"min": 1, "max": 2}
    return plan_job(job)


def container(result: RunResult) -> dict[str, Any]:
    (c,) = pod_spec(result)["containers"]
    return c


def env_of(result: RunResult) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(result)["env"]}


RUNNING = None


@functools.cache
def jobset(max_restarts: int = 20) -> dict[str, Any]:
    raw = job_object()
    raw["maxRestarts"] = max_restarts
    platform = PlatformOutputs.model_validate(platform_outputs("aws-dev"))
    return training_jobset(JobSpec.load(raw), platform)


def decide(*pods: PodOutcome) -> str:
    (rj,) = jobset()["spec"]["replicatedJobs"]
    failure = job_failure(rj["template"]["spec"], pods)
    assert failure is not None, "the child Job must fail on the first failed pod"
    return jobset_rule(jobset()["spec"]["failurePolicy"], *failure, rj["name"])[1]


EFA_REF = "organization/trainplane/aws-h200-efa"


EFA = "vpc.amazonaws.com/efa"


# What the AWS layer hands over for an EFA pool of p5en nodes (bundle NodePoolInfo): all 16 EFA devices of
# the node, and the libfabric/NCCL environment of the EKS EFA docs.
EFA_POOL = {"extendedResources": {EFA: 16}, "podEnv": {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}}


@functools.cache
def efa_platform() -> dict[str, Any]:
    outputs = copy.deepcopy(platform_outputs("aws-h200-efa"))
    for pool in outputs["nodePools"]:
        assert "extendedResources" in pool and "podEnv" in pool  # the platform outputs carry the keys
        if pool["gpu"]:
            pool.update(copy.deepcopy(EFA_POOL))
    return outputs


def efa_job(**changes: Any) -> dict[str, Any]:
    job = job_object()
    job.update(platformStack=EFA_REF, team="llm", nodePool="h200-spot", volumes=[], **changes)
    return job


# Synthetic: the job builder applies any fabric as given, without knowing its kind.
FABRIC = {
    "kind": "synthetic",
    "annotations": {"example.com/interfaces": '[{"interfaceName":"eth1","network":"vpc1"}]'},
    "volumes": [{"name": "fabric-libs", "hostPath": {"path": "/opt/fabric/lib64"}}],
    "volumeMounts": [{"name": "fabric-libs", "mountPath": "/usr/local/fabric/lib64", "readOnly": True}],
    "sidecars": [
        {
            "name": "fabric-daemon",
            "image": "registry.example.com/fabric-daemon:1.0",
            "command": ["/fabric-daemon", "--listen"],
            "volumeMounts": [{"name": "fabric-libs", "mountPath": "/lib/fabric"}],
        }
    ],
}


@functools.cache
def fabric_plan() -> RunResult:
    outputs = copy.deepcopy(platform_outputs("aws-dev"))
    pool = next(p for p in outputs["nodePools"] if p["name"] == "h100")
    pool.update(fabric=copy.deepcopy(FABRIC), podEnv={"FABRIC_PLUGIN": "/usr/local/fabric/lib64"})
    return plan_job(job_object(), {REF: outputs})


def build(raw: dict[str, Any], outputs: PlatformOutputs) -> dict[str, Any]:
    """The JobSet of a job block on a platform's outputs, after the same checks `plan` runs (ConfigError)."""
    spec = JobSpec.load(raw)
    problems = check_job(spec, outputs)
    if problems:
        raise ConfigError(problems)
    return training_jobset(spec, outputs)


def pod_of(js: dict[str, Any]) -> dict[str, Any]:
    """The pod template of a JobSet's (only) replicated job."""
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]  # type: ignore[no-any-return]
