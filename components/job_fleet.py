"""A training job on a fleet (`job.fleetStack`): checked against every worker platform of the fleet.

MultiKueue copies the ONE JobSet the job stack creates on the manager, unchanged, to the worker that
admits it (kubernetes-sigs/kueue@v0.19.2 pkg/controller/admissionchecks/multikueue/workload.go: the
adapter creates the remote object from the local one; the worker's own Kueue then admits it). So:

- the job must fit at least one worker (`check_job` against that worker's PlatformOutputs);
- where it fits several, its pod must be the same on each (pools' node labels and taints, the machine
  sizing, the fabric, the grace period): one pod template cannot be right for two unlike workers;
- a job on NVL72 rack pools is refused: its pods claim a channel of the job's ComputeDomain, which the job
  stack creates beside the JobSet and MultiKueue does not copy (kueue@v0.19.2
  pkg/controller/jobs/jobset/jobset_multikueue_adapter.go SyncJob creates the remote JobSet from the local
  one and nothing else), so on the worker the claim template never exists and the pods never start; the
  manager, without the DRA driver's controller, has no claim template either, and its Kueue cannot count
  the claim (pkg/dra/claims.go getClaimSpec fails). A rack job runs on its rack platform (platformStack);
- `<scheme>://auto` names ONE platform's checkpoint bucket, resolved when the job stack deploys, and the
  manager cannot know which worker will admit the job: a fleet job gives an explicit URI (on an object
  store every fitting worker's identity reaches) or a path on a volume every fitting worker has.

Example:
    >>> fits, problems = check_fleet_job(job, [("aws", "org/p/aws-h100", outputs)])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from components.outputs import PlatformOutputs
from components.spec import JobSpec, check_job


@dataclass(frozen=True)
class WorkerFit:
    """Whether the job fits one worker of the fleet, and why not."""

    name: str
    stack: str
    problems: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.problems


def _object_store_problems(job: JobSpec, platform: PlatformOutputs, stack: str, root: str) -> list[str]:
    """An explicit object-store URI is reachable on a worker only through that worker's cloud identity,
    which trusts its own cloud's store (the team identities: components/<cloud>/identity.py)."""
    if job.checkpoint is None or "://" not in job.checkpoint.uri or job.checkpoint.uri.endswith("://auto"):
        return []
    scheme = job.checkpoint.uri.split("://", 1)[0]
    if platform.object_store == scheme:
        return []
    have = (
        f"keeps objects in {platform.object_store}://" if platform.object_store else "has no object storage"
    )
    return [
        f"{root}.checkpoint.uri: platform {stack} {have}; its pods have no identity for {scheme}:// "
        "(use a path on a volume this worker has)"
    ]


def pod_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The keys of two pod templates (metadata and spec) that differ, e.g. `spec.nodeSelector`,
    `spec.containers[trainer].resources`: what one JobSet cannot carry for both workers."""
    out: list[str] = []
    for part in ("metadata", "spec"):
        pa, pb = a.get(part) or {}, b.get(part) or {}
        for key in sorted(set(pa) | set(pb)):
            if key == "containers":
                ca = {c["name"]: c for c in pa.get(key) or []}
                cb = {c["name"]: c for c in pb.get(key) or []}
                for name in sorted(set(ca) | set(cb)):
                    x, y = ca.get(name) or {}, cb.get(name) or {}
                    out += [
                        f"{part}.{key}[{name}].{k}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)
                    ]
            elif pa.get(key) != pb.get(key):
                out.append(f"{part}.{key}")
    return out


def _on_racks(job: JobSpec, platform: PlatformOutputs) -> bool:
    from components.incluster.compute_domain import job_rack
    from components.incluster.job_pod import job_pools

    return job_rack(job_pools(job, platform)) is not None


def _pod(job: JobSpec, platform: PlatformOutputs) -> dict[str, Any]:
    from components.incluster.job_pod import pod_template

    return pod_template(job, platform, args=[])


def check_fleet_job(
    job: JobSpec, workers: Sequence[tuple[str, str, PlatformOutputs]], root: str = "job"
) -> tuple[list[WorkerFit], list[str]]:
    """Check a fleet job against each worker (name, stack, outputs), in the fleet's dispatch order.

    Returns each worker's fit and the problems that refuse the job: none fits (one line per worker
    saying why), `://auto` checkpoints, or a pod that differs between the workers it fits.
    """
    problems: list[str] = []
    if job.nodes.min < job.nodes.max:
        # An elastic job is a batch Job plus a headless Service for its rendezvous (job_runtime.py);
        # MultiKueue's batch Job adapter copies the Job only, so the worker's pods would find no peers.
        problems.append(
            f"{root}.nodes: an elastic job (min {job.nodes.min} < max {job.nodes.max}) needs a Service "
            "beside its Job that MultiKueue does not copy to the worker; give nodes.min == nodes.max on a fleet"
        )
    if job.checkpoint is not None and job.checkpoint.uri.endswith("://auto"):
        problems.append(
            f"{root}.checkpoint.uri: {job.checkpoint.uri} is one platform's checkpoint bucket, and the fleet's "
            "manager cannot know which worker will run the job; give an explicit URI or a path on a "
            "volume every worker it fits has"
        )
    fits = []
    for name, stack, platform in workers:
        lines = check_job(job, platform, root, stack=stack) + _object_store_problems(
            job, platform, stack, root
        )
        fits.append(WorkerFit(name, stack, lines))
    fitting = [(f, p) for f, (_, _, p) in zip(fits, workers, strict=True) if f.fits]
    racks = [f.name for f, p in fitting if _on_racks(job, p)]
    if racks:
        problems.append(
            f"{root}.nodePools: on worker {', '.join(racks)} they are NVL72 rack pools, whose pods claim a channel "
            "of the job's ComputeDomain, and MultiKueue copies only the JobSet to a worker, not the "
            "ComputeDomain: the pods would never start; run a rack job on its platform (platformStack)"
        )
    if not fitting:
        problems += [
            f"{root}: fits no worker of fleet {job.fleet_stack}; worker {f.name} ({f.stack}): {'; '.join(f.problems)}"
            for f in fits
        ]
        return fits, problems
    first, first_pod = fitting[0][0], _pod(job, fitting[0][1])
    for f, platform in fitting[1:]:
        diff = pod_differences(first_pod, _pod(job, platform))
        if diff:
            problems.append(
                f"{root}: fits workers {first.name} and {f.name}, but its pod differs between them "
                f"({', '.join(diff)}); MultiKueue copies the manager's one JobSet unchanged to whichever "
                "admits it: name pools that only alike workers have"
            )
    return fits, problems


def job_platform(
    fits: Sequence[WorkerFit], workers: Sequence[tuple[str, str, PlatformOutputs]]
) -> PlatformOutputs:
    """The platform the job's objects are built for: the first worker it fits in dispatch order (every
    fitting worker gives the same pod: check_fleet_job)."""
    for f, (_, _, platform) in zip(fits, workers, strict=True):
        if f.fits:
            return platform
    raise ValueError("check_fleet_job refuses a job that fits no worker")


# The pod annotation that carries the trainer's config on a fleet (see `on_manager`).
CONFIG_ANNOTATION = "trainplane.dev/trainer-config"


def on_manager(manifest: dict[str, Any], config_yaml: str) -> dict[str, Any]:
    """The job's JobSet as the manager holds it: the trainer config travels IN the pod template.

    MultiKueue copies the JobSet (and its Workload) to the worker, nothing else (kueue@v0.19.2
    pkg/controller/jobs/jobset/jobset_multikueue_adapter.go SyncJob: creates the remote JobSet from the
    local one's spec), so a ConfigMap beside it on the manager would never reach the worker's pods. The
    config becomes a pod annotation, mounted at the same path by a downwardAPI volume
    (core/v1 DownwardAPIVolumeFile fieldRef `metadata.annotations['<key>']`).
    """
    from components.incluster.job_pod import CONFIG_FILE

    pod = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"].setdefault("annotations", {})[CONFIG_ANNOTATION] = config_yaml
    pod["spec"]["volumes"] = [
        {
            "name": v["name"],
            "downwardAPI": {
                "items": [
                    {
                        "path": CONFIG_FILE,
                        "fieldRef": {"fieldPath": f"metadata.annotations['{CONFIG_ANNOTATION}']"},
                    }
                ]
            },
        }
        if "configMap" in v
        else v
        for v in pod["spec"]["volumes"]
    ]
    return manifest
