"""rack-jobs: does every training job on a rack-scale pool (GB200/GB300 NVL72) get its own NVLink domain?

For each training pod on a pool with `rack` (components/outputs.py RackDomain), the job builder's contract
(components/incluster/compute_domain.py), each rule named in its failure line:
- [channel-claim] every GPU container claims the ComputeDomain channel (`resources.claims`) through a pod
  claim from a ResourceClaimTemplate (`resourceClaims[].resourceClaimTemplateName`): without it the pod
  has GPUs but no IMEX channel, and NCCL cannot use multi-node NVLink;
- [claim-template] each of the pods' resourceClaimTemplateName is the one the job's own ComputeDomain
  names (`spec.channel.resourceClaimTemplate.name`, in the pods' namespace): the driver's controller creates
  only that template (dra-driver-nvidia-gpu@v0.4.1 cmd/compute-domain-controller/computedomain.go), or a
  ResourceClaimTemplate the job creates itself in that namespace (its RDMA NICs); any other name leaves the
  pods Pending on a claim that never exists;
- [rdma-claim] on a pool whose RDMA NICs come from a network DRA driver (RackDomain.nic_device_class, GKE
  managed DRANET), every GPU container claims them (`resources.claims` naming a pod claim whose template, the
  job's own, requests that DeviceClass): without it NCCL runs without RDMA. The request is allocationMode
  ExactCount (Kueue 0.19.2 refuses All and never admits the job: kubernetes-sigs/kueue@v0.19.2
  pkg/dra/claims.go countDevicesPerClass) of the node's `nics_per_node` (fewer leaves NICs idle, more never
  fits a node);
- [shared-compute-domain] no two jobs share a ComputeDomain (same namespace and name) or its claim
  template: one ComputeDomain is one IMEX domain for one workload (contract/rack.py; FACTS "one
  ComputeDomain per job");
- [clique-span] a job with more pods than one rack has nodes is required (Kueue TAS
  `podset-required-topology`) at a level above the clique of its pool's topology: it spans racks and says
  where; a job without it may be spread over any racks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components.incluster.placement import REQUIRED_TOPOLOGY
from components.outputs import NodePoolInfo
from infra.verify.context import GPU_RESOURCE, Context
from infra.verify.jobs import TrainingPod
from infra.verify.model import K8sObject
from infra.verify.report import CheckResult

COMPUTE_DOMAIN = "ComputeDomain"
CLAIM_TEMPLATE = "ResourceClaimTemplate"


def _gpu_containers(pod: TrainingPod) -> list[Mapping[str, Any]]:
    return [
        c
        for c in pod.pod_spec.get("containers") or []
        if ((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE)
    ]


def _template_of(cd: K8sObject) -> str:
    return str(((cd.spec.get("channel") or {}).get("resourceClaimTemplate") or {}).get("name") or "")


def pod_problems(
    pod: TrainingPod, pool: NodePoolInfo, domains: list[K8sObject], templates: Sequence[K8sObject] = ()
) -> list[str]:
    """The rule lines of one training pod on a rack pool, against its own job's ComputeDomains and
    ResourceClaimTemplates."""
    assert pool.rack is not None
    out: list[str] = []
    where = f"team {pod.team} job {pod.job.name} on rack pool {pool.name}"
    claims = {
        c.get("name"): c.get("resourceClaimTemplateName")
        for c in pod.pod_spec.get("resourceClaims") or []
        if c.get("resourceClaimTemplateName")
    }
    ns = pod.job.namespace
    channels = {_template_of(cd) for cd in domains if cd.namespace == ns}
    own = {t.name: t for t in templates if t.namespace == ns}
    # Every claim but those from the job's own templates (its RDMA NICs) is meant as the channel;
    # [claim-template] says when its template is not the ComputeDomain's.
    channel_claims = {name for name, template in claims.items() if template not in own}
    for c in _gpu_containers(pod):
        if not _claim_names(c) & channel_claims:
            out.append(
                f"[channel-claim] {where}: GPU container {c.get('name')} claims no ComputeDomain channel "
                "(resources.claims naming a pod resourceClaim from a template); NCCL gets no multi-node NVLink"
            )
    for name, template in sorted(claims.items()):
        if template not in channels and template not in own:
            out.append(
                f"[claim-template] {where}: claim {name} names ResourceClaimTemplate {template}, which neither "
                f"a ComputeDomain of the job in {ns} names (it has: {', '.join(sorted(channels)) or 'none'}) nor "
                "the job creates; its pods never start"
            )
    if pool.rack.nic_device_class is not None:
        out += _rdma_problems(pod, pool, where, claims, own)
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


def _claim_names(container: Mapping[str, Any]) -> set[Any]:
    return {cl.get("name") for cl in (container.get("resources") or {}).get("claims") or []}


def _rdma_problems(
    pod: TrainingPod,
    pool: NodePoolInfo,
    where: str,
    claims: Mapping[Any, Any],
    own: Mapping[str, K8sObject],
) -> list[str]:
    """[rdma-claim] lines: the pod's GPU containers against its claims of the pool's RDMA NIC class."""
    assert pool.rack is not None and pool.rack.nic_device_class is not None
    cls, want = pool.rack.nic_device_class, pool.rack.nics_per_node
    requests: dict[Any, Mapping[str, Any]] = {}
    for name, template in claims.items():
        t = own.get(str(template))
        devices = ((t.spec.get("spec") or {}).get("devices") or {}) if t is not None else {}
        for r in devices.get("requests") or []:
            exactly = r.get("exactly") or {}
            if exactly.get("deviceClassName") == cls:
                requests[name] = exactly
    out: list[str] = []
    for c in _gpu_containers(pod):
        if not _claim_names(c) & set(requests):
            out.append(
                f"[rdma-claim] {where}: GPU container {c.get('name')} claims no RDMA NICs (no resources.claims "
                f"entry naming a pod claim whose template requests DeviceClass {cls}): NCCL runs without RDMA"
            )
    for name, exactly in sorted(requests.items()):
        # The API server's defaults: allocationMode ExactCount, count 1 (kubernetes/api@v0.34.9 resource/v1).
        mode, count = exactly.get("allocationMode") or "ExactCount", int(exactly.get("count") or 1)
        if mode != "ExactCount":
            out.append(
                f"[rdma-claim] {where}: claim {name} requests {cls} with allocationMode {mode}: Kueue never "
                "admits it (only ExactCount is counted: kueue@v0.19.2 pkg/dra/claims.go)"
            )
        elif count != want:
            out.append(
                f"[rdma-claim] {where}: claim {name} requests {count} of {cls}, a node of the pool has {want}: "
                + ("NCCL runs without RDMA on the rest" if count < want else "the pod never fits a node")
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
        for line in pod_problems(pod, pool, domains, pod.plan.objects(CLAIM_TEMPLATE)):
            res.fail(line, f"pool {pool.name}")
        res.examined.append(f"pod {pod.team}/{pool.name}")
    for line in shared_domains(jobs):
        res.fail(line, COMPUTE_DOMAIN)
    return res
