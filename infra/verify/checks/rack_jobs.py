"""rack-jobs: does every training job on a rack-scale pool (GB200/GB300 NVL72) get its own NVLink domain?

For each training pod on a pool with `rack` (components/outputs.py RackDomain), the job builder's contract
(components/incluster/compute_domain.py), each rule named in its failure line:
- [channel-claim] every GPU container claims the ComputeDomain channel (`resources.claims`) through a pod
  claim from a ResourceClaimTemplate (`resourceClaims[].resourceClaimTemplateName`): without it the pod
  has GPUs but no IMEX channel, and NCCL cannot use multi-node NVLink;
- [claim-template] the pods' resourceClaimTemplateName is the one the job's own ComputeDomain names
  (`spec.channel.resourceClaimTemplate.name`, in the pods' namespace): the driver's controller creates only
  that template (dra-driver-nvidia-gpu@v0.4.1 cmd/compute-domain-controller/computedomain.go), so any other
  name leaves the pods Pending on a claim that never exists;
- [shared-compute-domain] no two jobs share a ComputeDomain (same namespace and name) or its claim
  template: one ComputeDomain is one IMEX domain for one workload (contract/rack.py; FACTS "one
  ComputeDomain per job");
- [clique-span] a job with more pods than one rack has nodes is required (Kueue TAS
  `podset-required-topology`) at a level above the clique of its pool's topology: it spans racks and says
  where; a job without it may be spread over any racks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from components.incluster.placement import REQUIRED_TOPOLOGY
from components.outputs import NodePoolInfo
from infra.verify.context import GPU_RESOURCE, Context
from infra.verify.jobs import TrainingPod
from infra.verify.model import K8sObject
from infra.verify.report import CheckResult

COMPUTE_DOMAIN = "ComputeDomain"


def _gpu_containers(pod: TrainingPod) -> list[Mapping[str, Any]]:
    return [
        c
        for c in pod.pod_spec.get("containers") or []
        if ((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE)
    ]


def _template_of(cd: K8sObject) -> str:
    return str(((cd.spec.get("channel") or {}).get("resourceClaimTemplate") or {}).get("name") or "")


def pod_problems(pod: TrainingPod, pool: NodePoolInfo, domains: list[K8sObject]) -> list[str]:
    """The rule lines of one training pod on a rack pool, against its own job's ComputeDomains."""
    assert pool.rack is not None
    out: list[str] = []
    where = f"team {pod.team} job {pod.job.name} on rack pool {pool.name}"
    claims = {
        c.get("name"): c.get("resourceClaimTemplateName")
        for c in pod.pod_spec.get("resourceClaims") or []
        if c.get("resourceClaimTemplateName")
    }
    for c in _gpu_containers(pod):
        names = {cl.get("name") for cl in (c.get("resources") or {}).get("claims") or []}
        if not names & set(claims):
            out.append(
                f"[channel-claim] {where}: GPU container {c.get('name')} claims no ComputeDomain channel "
                "(resources.claims naming a pod resourceClaim from a template); NCCL gets no multi-node NVLink"
            )
    ns = pod.job.namespace
    templates = {_template_of(cd) for cd in domains if cd.namespace == ns}
    for name, template in sorted(claims.items()):
        if template not in templates:
            out.append(
                f"[claim-template] {where}: claim {name} names ResourceClaimTemplate {template}, which no "
                f"ComputeDomain of the job in {ns} names (it has: {', '.join(sorted(templates)) or 'none'}); "
                "its pods never start"
            )
    nodes = int(pod.job.spec.get("parallelism") or pod.job.spec.get("completions") or 1)
    if nodes > pool.rack.nodes:
        levels = list(pool.topology_levels)
        clique = pool.rack.clique_label
        above = levels[: levels.index(clique)] if clique in levels else []
        annotations = (pod.template.get("metadata") or {}).get("annotations") or {}
        if annotations.get(REQUIRED_TOPOLOGY) not in above:
            out.append(
                f"[clique-span] {where}: {nodes} pods do not fit one NVLink rack ({pool.rack.nodes} nodes) and "
                f"the job requires no level above the clique to span racks at ({REQUIRED_TOPOLOGY}: "
                f"{annotations.get(REQUIRED_TOPOLOGY) or 'none'})"
            )
    return out


def shared_domains(jobs: Iterable[tuple[str, list[K8sObject]]]) -> list[str]:
    """[shared-compute-domain] lines: (job, its ComputeDomains) pairs whose domains or templates collide."""
    by_name: dict[tuple[str | None, str], str] = {}
    by_template: dict[tuple[str | None, str], str] = {}
    out: list[str] = []
    for job, domains in jobs:
        for cd in domains:
            for seen, key, what in (
                (by_name, (cd.namespace, cd.name), f"ComputeDomain {cd.namespace}/{cd.name}"),
                (
                    by_template,
                    (cd.namespace, _template_of(cd)),
                    f"claim template {cd.namespace}/{_template_of(cd)}",
                ),
            ):
                other = seen.setdefault(key, job)
                if other != job:
                    out.append(
                        f"[shared-compute-domain] jobs {other} and {job} share {what}: one ComputeDomain (one "
                        "IMEX domain) per job"
                    )
    return out


def run(ctx: Context) -> CheckResult:
    res = CheckResult("rack-jobs")
    racks = {p.name: p for p in ctx.gpu_pools() if p.rack is not None}
    if not racks:
        res.skipped = "no rack-scale pool"
        return res
    jobs: list[tuple[str, list[K8sObject]]] = []
    for pod in ctx.pods:
        pool = racks.get(pod.pool)
        if pool is None:
            continue
        domains = pod.plan.objects(COMPUTE_DOMAIN)
        jobs.append((f"{pod.job.namespace}/{pod.job.name}", domains))
        for line in pod_problems(pod, pool, domains):
            res.fail(line, f"pool {pool.name}")
        res.examined.append(f"pod {pod.team}/{pool.name}")
    for line in shared_domains(jobs):
        res.fail(line, COMPUTE_DOMAIN)
    return res
