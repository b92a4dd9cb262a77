"""The training pods a platform will run, made by the real job-stack program.

For a platform plan, verify does not hand-build a pod: for every team and GPU pool it writes the largest
job the team may run there as a `trainplane:job` config and runs the job stack's program under the mock
engine with the platform plan's outputs as its stack reference, exactly as `trainplane plan <job stack>`
does. The Job, its pod template, Service and PodMonitor come out of that run. For a job stack, its own
planned objects are used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from components.outputs import NodePoolInfo, TeamOutput
from infra.verify.model import K8sObject, Plan, PlanResource, build, from_run

PLATFORM_STACK = "organization/trainplane/{stack}"
VERIFY_IMAGE = "registry.invalid/trainplane-trainer:verify"


@dataclass(frozen=True)
class TrainingPod:
    """One training job's pod template on one pool, with the plan it came from."""

    team: str
    pool: str
    # The batch/v1 Job the pods belong to: an elastic job's own, or the child Job a JobSet creates from
    # its replicated job (metadata: the JobSet's, which carries the queue label and annotations).
    job: K8sObject
    plan: Plan  # the job stack's plan (JobSet or Job and Service, ConfigMap, PodMonitor)
    synthesized: bool
    # The runtime object the job stack registers: "JobSet" (fixed size) or "Job" (elastic).
    runtime: str = "Job"
    # All pools the job may use (`nodePools`), `pool` first; () for a one-pool job.
    pools: tuple[str, ...] = ()

    @property
    def all_pools(self) -> tuple[str, ...]:
        return self.pools or (self.pool,)

    @property
    def template(self) -> Mapping[str, Any]:
        return self.job.spec.get("template") or {}

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        return self.template.get("spec") or {}

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.template.get("metadata") or {}).get("labels") or {})

    @property
    def namespace(self) -> str:
        return self.job.namespace or "default"

    @property
    def pods(self) -> int:
        return int(self.job.spec.get("parallelism") or 1)

    @property
    def min_pods(self) -> int:
        """Pods Kueue may admit the job with: its minimum parallelism when it is elastic."""
        floor = self.job.annotations.get("kueue.x-k8s.io/job-min-parallelism")
        return min(int(floor), self.pods) if floor and str(floor).isdigit() else self.pods

    @property
    def ref(self) -> str:
        return f"{self.runtime} {self.namespace}/{self.job.name} (pool {self.pool})"


def largest_job(team: TeamOutput, pool: NodePoolInfo) -> tuple[int, int] | None:
    """(nodes, GPUs per node) of the largest job `team` may run on `pool`, None if none fits.

    Whole nodes first (training jobs take a node's GPUs), as many as the team's GPU quota and the pool's
    maximum allow; a quota smaller than a node gets one node with the quota's GPUs.
    """
    quota = team.gpu_quota
    per_node = pool.gpus_per_node
    if quota <= 0 or per_node <= 0:
        return None
    gpus = min(per_node, quota)
    nodes = min(quota // gpus, pool.max_nodes or 1)
    return (nodes, gpus) if nodes >= 1 else None


def job_config(platform: Plan, team: TeamOutput, pool: NodePoolInfo) -> dict[str, Any] | None:
    size = largest_job(team, pool)
    if size is None:
        return None
    nodes, gpus = size
    name = re.sub(r"[^a-z0-9-]", "-", f"verify-{team.name}-{pool.name}".lower())[:40].rstrip("-")
    storage = list(team.storage)
    volumes = [{"storage": s, "mountPath": f"/mnt/{s}", "readOnly": False} for s in storage]
    job: dict[str, Any] = {
        "platformStack": PLATFORM_STACK.format(stack=platform.stack),
        "name": name,
        "team": team.name,
        "image": VERIFY_IMAGE,
        "nodePool": pool.name,
        "nodes": {"min": nodes, "max": nodes},
        "gpusPerNode": gpus,
        "spot": pool.capacity == "spot",
        "trainer": {"globalBatchSize": nodes * gpus, "microBatchSize": 1},
        "volumes": volumes,
    }
    store = platform.platform_outputs.object_store if platform.platform_outputs else None
    if store:
        job["checkpoint"] = {"uri": f"{store}://auto"}
    elif volumes:
        job["checkpoint"] = {"uri": f"{volumes[0]['mountPath']}/checkpoints"}
    return job


def run_job(platform: Plan, job: Mapping[str, Any]) -> Plan:
    """Plan a job stack on `platform` through the real program under mocks."""
    resources, outputs = _job_run(
        json.dumps(dict(platform.outputs), sort_keys=True), json.dumps(job, sort_keys=True)
    )
    return build(str(job["name"]), resources, outputs, dict(job), platform)


@lru_cache(maxsize=64)
def _job_run(platform_outputs: str, job: str) -> tuple[tuple[PlanResource, ...], dict[str, Any]]:
    """One mock-engine run per (platform outputs, job): what-if variants of a platform share it."""
    from infra.mockcloud import run_program

    spec = json.loads(job)
    refs = {str(spec["platformStack"]): json.loads(platform_outputs)}
    result = run_program({"trainplane:job": job}, str(spec["name"]), stack_refs=refs)
    plan = from_run(result, kind="job")
    return plan.resources, dict(plan.outputs)


def runtime_jobs(plan: Plan) -> list[tuple[str, K8sObject]]:
    """(runtime kind, the Job its pods belong to) for every training job of a job stack's plan."""
    out = [("Job", j) for j in plan.objects("Job")]
    for js in plan.objects("JobSet"):
        for rj in js.spec.get("replicatedJobs") or []:
            template = rj.get("template") or {}
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {**(js.body.get("metadata") or {})},
                "spec": template.get("spec") or {},
            }
            out.append(("JobSet", K8sObject(js.resource, body)))
    return out


def _pod_of(
    plan: Plan, team: str, pool: str, synthesized: bool, pools: tuple[str, ...] = ()
) -> TrainingPod | None:
    jobs = runtime_jobs(plan)
    if not jobs:
        return None
    kind, job = jobs[0]
    return TrainingPod(team, pool, job, plan, synthesized, kind, pools)


def training_pods(plan: Plan) -> tuple[list[TrainingPod], list[str]]:
    """The training pods to check, and one line per team/pool that gets none (and why)."""
    problems: list[str] = []
    if plan.kind == "job":
        cfg = plan.config or {}
        team = str(cfg.get("team") or "")
        pool = str(cfg.get("nodePool") or (cfg.get("nodePools") or [""])[0])
        if not pool:
            # From a dump: the pool is the one whose labels the pod selects.
            for _, job in runtime_jobs(plan):
                sel = (((job.spec.get("template") or {}).get("spec") or {}).get("nodeSelector")) or {}
                pool = next(
                    (p.name for p in (plan.platform.node_pools if plan.platform else []) if p.labels == sel),
                    "",
                )
                team = job.namespace or ""
        pod = _pod_of(plan, team, pool, False, tuple(str(p) for p in cfg.get("nodePools") or ()))
        return ([pod] if pod else []), problems
    pods: list[TrainingPod] = []
    for team_out in plan.teams:
        for pool_out in plan.node_pools:
            if not pool_out.gpu:
                continue
            job_cfg = job_config(plan, team_out, pool_out)
            if job_cfg is None:
                continue
            try:
                job_plan = run_job(plan, job_cfg)
            except Exception as e:  # the job stack refuses the platform: that is a finding
                first = str(e).strip().splitlines()
                problems.append(
                    f"team {team_out.name} cannot run a {job_cfg['nodes']['max']}x{job_cfg['gpusPerNode']}-GPU job on "
                    f"pool {pool_out.name}: {first[-1] if first else type(e).__name__}"
                )
                continue
            pod = _pod_of(job_plan, team_out.name, pool_out.name, True)
            if pod:
                pods.append(pod)
    return pods, problems
