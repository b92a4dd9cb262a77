"""The training-job stack's spec models (`trainplane:job`) and the check of a job against its platform.

`JobSpec.load` checks a job on its own; `check_job` then checks it against the outputs of the platform
stack it names (team, pool, GPUs, storage, object store).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from components.spec.base import (
    DNS_LABEL,
    MOUNT_PATH,
    NO_SPACES,
    STACK_REF,
    Spec,
    alias_set,
    duplicates,
    load_checked,
)

if TYPE_CHECKING:
    from components.outputs import NodePoolInfo, PlatformOutputs, TeamOutput


class NodeRange(Spec):
    min: int = Field(ge=1, le=1000)
    max: int = Field(ge=1, le=1000)


class JobVolume(Spec):
    storage: str = Field(pattern=DNS_LABEL)
    mount_path: str = Field(pattern=MOUNT_PATH)
    read_only: bool = False
    sub_path: str | None = None


class JobCheckpoint(Spec):
    # <scheme>://auto: the platform's checkpoint bucket, prefix <team>/<job>; or a URI of an object store
    # (the schemes the backends' object stores use, e.g. s3://, gs://); or a path under one of the job's
    # writable volumes (Lustre/NFS).
    uri: str
    interval_steps: int = Field(default=500, ge=1)
    keep: int = Field(default=3, ge=2)
    async_save: bool = True


class JobResources(Spec):
    cpu: float | None = Field(default=None, gt=0)
    memory_gib: float | None = Field(default=None, alias="memoryGiB", gt=0)
    shm_gib: float | None = Field(default=None, alias="shmGiB", gt=0)


class JobTopology(Spec):
    """Topology-aware placement (Kueue TAS) of the job's pods on its pools' topology levels."""

    # block | subblock | host: the pool's levels above the node, broadest first; clique: the NVLink clique
    # of a rack-scale pool (NVL72). Default: the tightest; on a rack pool, the clique when the job fits one
    # rack, else the level above it (components/incluster/compute_domain.py).
    level: Literal["block", "subblock", "host", "clique"] | None = None
    # preferred: pack as tightly as possible, else spread; required: never outside one such domain.
    mode: Literal["preferred", "required"] = "preferred"


JOB_NAME_MAX = 40


class JobSpec(Spec):
    # The platform stack the job runs on, or (`fleetStack`) the fleet stack whose manager queues it and
    # whose workers may run it (components/job_fleet.py); exactly one of the two, "" for the other.
    platform_stack: str = Field(default="", pattern=STACK_REF)
    fleet_stack: str = Field(default="", pattern=STACK_REF)
    # The JobSet name. Its pods are `<name>-workers-0-<index>-<5 random>` (jobset@v0.12.0
    # pkg/util/placement/placement.go GenPodName), a DNS-1035 label of at most 63 characters that the
    # JobSet webhook checks at create: 40 + 17 (1000 nodes) + 6 = 63.
    name: str = Field(pattern=DNS_LABEL, max_length=JOB_NAME_MAX)
    team: str = Field(pattern=DNS_LABEL)
    image: str = Field(pattern=NO_SPACES)
    # One pool (`nodePool`), or the pools the job may use in order of preference (`nodePools`, the
    # platform's capacity order: reserved, on-demand, DWS, spot); exactly one of the two.
    node_pool: str | None = Field(default=None, pattern=DNS_LABEL)
    node_pools: list[Annotated[str, Field(pattern=DNS_LABEL)]] = Field(default_factory=list, max_length=8)
    topology: JobTopology | None = None
    nodes: NodeRange
    gpus_per_node: int = Field(ge=1, le=16)
    trainer: dict[str, Any] = Field(default_factory=dict)
    volumes: list[JobVolume] = Field(default_factory=list)
    checkpoint: JobCheckpoint | None = None
    spot: bool = False
    max_restarts: int = Field(default=10, ge=0, le=1000)
    resources: JobResources = JobResources()
    env: dict[str, str] = Field(default_factory=dict)
    # At least 60 s on every cloud (job_pod.MIN_GRACE_SECONDS): time for the preemption checkpoint.
    grace_period_seconds: int | None = Field(default=None, ge=60, le=3600)
    dataloader_workers: int = Field(default=4, ge=0, le=64)
    # Never reclaimed for idleness (teams[].idle): the JobSet/Job carries contract.idle.IDLE_EXEMPT_LABEL "true".
    idle_exempt: bool = False

    @property
    def on_fleet(self) -> bool:
        """Whether the job names a fleet (`fleetStack`) rather than one platform."""
        return bool(self.fleet_stack)

    @property
    def pools(self) -> list[str]:
        """The pools the job may run on, in its order of preference."""
        return list(self.node_pools) or ([self.node_pool] if self.node_pool else [])

    @property
    def pool_key(self) -> str:
        """The key the job named its pools with, for error lines."""
        return "nodePools" if self.node_pools else "nodePool"

    @classmethod
    def load(cls, raw: Any, root: str = "job") -> JobSpec:
        """Validate a raw job object on its own; `check_job` then checks it against the platform."""
        return load_checked(cls, raw, root, _check_job_alone)


def _check_job_alone(job: JobSpec, root: str) -> Iterable[str]:
    if bool(job.platform_stack) == bool(job.fleet_stack):
        given = "both are given" if job.platform_stack else "neither is given"
        yield f"{root}.platformStack: give either platformStack (one platform) or fleetStack (a fleet); {given}"
    if (job.node_pool is None) == (not job.node_pools):
        yield f"{root}.nodePool: give either nodePool (one pool) or nodePools (pools in order of preference)"
    for dup in sorted(duplicates(job.node_pools)):
        yield f"{root}.nodePools: {dup!r} is listed more than once"
    if job.node_pools and alias_set(job, "spot"):
        yield f"{root}.spot: derived from nodePools (a spot pool among them accepts preemption); remove it"
    if job.nodes.min > job.nodes.max:
        yield f"{root}.nodes.min: {job.nodes.min} is greater than nodes.max {job.nodes.max}"
    mounts = [v.mount_path for v in job.volumes]
    for dup in sorted(duplicates(mounts)):
        yield f"{root}.volumes: mountPath {dup!r} is used more than once"
    for i, v in enumerate(job.volumes):
        if v.mount_path in RESERVED_MOUNTS:
            yield f"{root}.volumes[{i}].mountPath: {v.mount_path} is reserved in the trainer container"
    for key in job.env:
        if key.startswith("TRAINPLANE_") or key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            yield f"{root}.env.{key}: set by trainplane itself; configure it through the job's keys"
    if job.checkpoint is not None:
        yield from _check_checkpoint_uri(job, job.checkpoint.uri, root)


RESERVED_MOUNTS = ("/", "/dev", "/dev/shm", "/proc", "/sys", "/etc", "/config")


def object_store_schemes() -> list[str]:
    """The URI schemes of the registered clouds' object stores, in the registry's order."""
    from components.backends import backends

    return [scheme for b in backends() if (scheme := b.object_store_scheme())]


def _a(word: str) -> str:
    """The article before a scheme read letter by letter: an s3:// URI, a gs:// URI."""
    return "an" if word[:1] in tuple("aefhilmnorsx") else "a"


def _either(words: list[str]) -> str:
    return " or ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} or {words[-1]}"


def _check_checkpoint_uri(job: JobSpec, uri: str, root: str) -> Iterable[str]:
    schemes = object_store_schemes()
    if not schemes:  # no registered cloud has an object store
        if not uri.startswith("/"):
            yield f"{root}.checkpoint.uri: {uri!r} must be an absolute path (no cloud here has an object store)"
            return
    else:
        uris = _either([f"{s}://" for s in schemes])
        autos = ", ".join(f"{s}://auto" for s in schemes)
        pattern = rf"^({'|'.join(map(re.escape, schemes))})://[a-z0-9][a-z0-9._-]{{1,62}}(/.*)?$"
        if "://" in uri and not re.match(pattern, uri):
            yield f"{root}.checkpoint.uri: {uri!r} is not {_a(schemes[0])} {uris} URI (or {autos}, or a path)"
            return
        if "://" not in uri and not uri.startswith("/"):
            yield f"{root}.checkpoint.uri: {uri!r} must be {autos}, {_a(schemes[0])} {uris} URI, or an absolute path"
            return
    if uri.startswith("/"):
        writable = [v.mount_path for v in job.volumes if not v.read_only]
        if not any(uri == m or uri.startswith(m.rstrip("/") + "/") for m in writable):
            yield (
                f"{root}.checkpoint.uri: {uri} is not under a writable volume of this job "
                f"(writable mountPaths: {', '.join(writable) or 'none'}); checkpoints must outlive the pod"
            )


def check_job(
    job: JobSpec, platform: PlatformOutputs, root: str = "job", stack: str | None = None
) -> list[str]:
    """Check a job against its platform stack's outputs (team, pools, GPUs, storage, object store);
    `stack`: the platform's stack name in the lines (a fleet's worker), default the job's platformStack."""
    problems: list[str] = []
    ref = stack or job.platform_stack
    team = platform.team(job.team)
    if team is None:
        known = ", ".join(sorted(t.name for t in platform.teams)) or "none"
        problems.append(f"{root}.team: {job.team!r} is not a team of platform {ref}; known: {known}")
    pools = []
    for name in job.pools:
        pool = platform.pool(name)
        if pool is None:
            known = ", ".join(sorted(p.name for p in platform.node_pools)) or "none"
            problems.append(
                f"{root}.{job.pool_key}: {name!r} is not a node pool of platform {ref}; known: {known}"
            )
        else:
            problems += _check_pool_fit(job, platform, pool, root)
            pools.append(pool)
    if pools and len(pools) == len(job.pools):
        from components.spec.job_pools import check_pools

        problems += check_pools(job, platform, pools, root)
        if team is not None and all(p.gpu for p in pools):
            problems += _check_quota(job, team, root)
    if team is not None:
        problems += _check_volumes(job, team, ref, root)
    problems += _check_object_store(job, platform, ref, root)
    return problems


def _check_pool_fit(job: JobSpec, platform: PlatformOutputs, pool: NodePoolInfo, root: str) -> list[str]:
    problems = []
    key = job.pool_key
    if not pool.gpu:
        problems.append(f"{root}.{key}: {pool.name} is a CPU pool; a training job needs a GPU pool")
    elif job.gpus_per_node > pool.gpus_per_node:
        problems.append(
            f"{root}.gpusPerNode: {job.gpus_per_node} is more than the {pool.gpus_per_node} GPUs "
            f"per node of pool {pool.name}"
        )
    if job.nodes.max > pool.max_nodes:
        problems.append(
            f"{root}.nodes.max: {job.nodes.max} nodes is more than pool {pool.name} "
            f"can scale to ({pool.max_nodes})"
        )
    if job.node_pools:
        return problems  # spot is derived from the pools
    if pool.capacity == "spot" and not job.spot:
        others = [p for p in platform.node_pools if p.gpu == pool.gpu and p.capacity != "spot"]
        hint = (
            f"pick {others[0].capacity} pool {others[0].name}"
            if others
            else "set spot: true to accept preemption"
        )
        problems.append(f"{root}.spot: pool {pool.name} is spot capacity; {hint}")
    if pool.capacity != "spot" and job.spot:
        problems.append(
            f"{root}.spot: pool {pool.name} is {pool.capacity} capacity; set spot: false or pick a spot pool"
        )
    return problems


def _check_quota(job: JobSpec, team: TeamOutput, root: str) -> list[str]:
    # Kueue may lend idle quota, but a job that cannot start inside its team's own quota would wait for
    # other teams to be idle; refuse it up front.
    if job.gpus_per_node * job.nodes.min > team.gpu_quota:
        return [
            f"{root}.nodes.min: {job.nodes.min} nodes x {job.gpus_per_node} GPUs is more than team "
            f"{job.team}'s GPU quota of {team.gpu_quota}"
        ]
    return []


def _check_volumes(job: JobSpec, team: TeamOutput, ref: str, root: str) -> list[str]:
    allowed = set(team.storage)
    return [
        f"{root}.volumes[{i}].storage: team {job.team} has no storage {v.storage!r} on platform {ref}; "
        f"it has: {', '.join(sorted(allowed)) or 'none'}"
        for i, v in enumerate(job.volumes)
        if v.storage not in allowed
    ]


def _check_object_store(job: JobSpec, platform: PlatformOutputs, ref: str, root: str) -> list[str]:
    if job.checkpoint is None or not job.checkpoint.uri.endswith("://auto"):
        return []
    scheme = job.checkpoint.uri.split("://", 1)[0]
    store = platform.object_store
    if store is None:
        return [
            f"{root}.checkpoint.uri: platform {ref} has no object storage; use a path on a writable volume"
        ]
    if scheme != store:
        return [f"{root}.checkpoint.uri: platform {ref} keeps checkpoints in {store}://; use {store}://auto"]
    return []
