"""The pod of a training job, as plain manifests: pulumi-free, shared by both runtimes (job_runtime.py).

One pod per node, running the trainer's launcher (`python -m trainer.launch`, a torchrun wrapper whose
exit code tells the truth: trainer/contract.py). What the pod gets from its pool (`NodePoolInfo`), applied
without knowing the cloud: the pool's labels and taints, every extended resource of its nodes, the
fabric's environment (`pod_env`) and the fabric itself (`fabric`: pod annotations, volumes, the trainer's
mounts, native sidecars).
"""

from __future__ import annotations

import math
from typing import Any

from components.incluster.compute_domain import container_claims, job_rack, pod_resource_claims, rack_level
from components.incluster.names import JOB_LABEL, TRAINER_METRICS_PORT, TRAINER_METRICS_PORT_NAME
from components.incluster.placement import (
    PREFERRED_TOPOLOGY,
    REQUIRED_TOPOLOGY,
    common_labels,
    default_level,
    levels_of_pool_flavor,
    named_levels,
)
from components.outputs import NodePoolInfo, PlatformOutputs
from components.spec import ConfigError, JobSpec
from trainer import contract
from trainer.config import validate_trainer_config as trainer_config_problems

CONTAINER = "trainer"
CONFIG_DIR = "/etc/trainplane"
CONFIG_FILE = "trainer.yaml"
RDZV_PORT = 29400
MASTER_PORT = 29500
# The completion index Kubernetes puts on every pod of an Indexed Job (also a JobSet's child Job, one per
# training job, so the index is the node rank): annotation since 1.21, label since 1.28.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
TEAM_LABEL = "trainplane.dev/team"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Without a machine shape (existing clusters), size requests per GPU.
CPU_PER_GPU, MEMORY_GIB_PER_GPU = 8, 64
# Leave room on each node for the kubelet, DaemonSets (GPU operator, DCGM, CSI, log shipper).
NODE_SHARE = 0.85
# The least time a training pod gets between SIGTERM and SIGKILL on any cloud: enough for the trainer's
# preemption checkpoint after a Kueue preemption or a drain (a node's own shutdown may cap it lower).
MIN_GRACE_SECONDS = 60


def job_labels(job: JobSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "trainplane-trainer",
        "app.kubernetes.io/instance": job.name,
        "app.kubernetes.io/managed-by": "trainplane",
        JOB_LABEL: job.name,
        TEAM_LABEL: job.team,
    }


def config_map_name(job: JobSpec) -> str:
    return f"{job.name}-config"


def checkpoint_uri(job: JobSpec, platform: PlatformOutputs) -> str | None:
    """`s3://auto` / `gs://auto` become `<scheme>://<checkpoint bucket>/<team>/<job>`.

    Teams share the platform's checkpoint bucket and each team's cloud identity reaches only its own
    `<team>/` prefix of it, so the job writes under its team's prefix.
    """
    if job.checkpoint is None:
        return None
    uri = job.checkpoint.uri
    if uri.endswith("://auto"):
        scheme = uri.split("://", 1)[0]
        return f"{scheme}://{platform.buckets['checkpoints']}/{job.team}/{job.name}"
    return uri


def fabric_resources(pool: NodePoolInfo) -> dict[str, str]:
    """Every extended resource of the pool's nodes (e.g. their fabric devices) at the node's full count.

    One pod per node owns the node's fabric: devices a pod does not request are invisible to it, so NCCL
    would fall back to TCP. Extended resources take requests equal to limits.
    """
    return {name: str(int(count)) for name, count in sorted(pool.extended_resources.items())}


def pod_env(job: JobSpec, pool: NodePoolInfo, reserved: set[str]) -> list[dict[str, Any]]:
    """The pool's fabric environment, then the job's own env, which wins on a conflict."""
    fabric = {k: str(v) for k, v in pool.pod_env.items() if k not in job.env and k not in reserved}
    return [{"name": k, "value": v} for k, v in sorted(fabric.items())] + [
        {"name": k, "value": v} for k, v in sorted(job.env.items())
    ]


def launcher_env(job: JobSpec, pool: NodePoolInfo) -> list[dict[str, Any]]:
    """OMP_NUM_THREADS=1 for a pod of more than one GPU (one worker each), unless the job or the fabric sets it.

    torchrun sets exactly this for its workers when the environment has none and there is more than one per
    node (torch@v2.13.0 torch/distributed/run.py config_from_args), so the workers see no change (a job's
    command, e.g. the NCCL preflight, runs its processes under torchrun too). Set for the launcher as well,
    it lets the launcher fork its workers from its zygote: OpenMP (and OpenBLAS, which starts a thread pool
    when loaded without it) read it when torch loads, before the launcher can set it, and a worker whose
    start-up value differs from its launcher's is started fresh (trainer/zygote.py).
    """
    if job.gpus_per_node <= 1 or "OMP_NUM_THREADS" in job.env or "OMP_NUM_THREADS" in pool.pod_env:
        return []
    return [{"name": "OMP_NUM_THREADS", "value": "1"}]


def pod_resources(job: JobSpec, pool: NodePoolInfo) -> tuple[str, str, str]:
    """CPU, memory and /dev/shm for one pod: the job's values, or its GPU share of the node's machine."""
    share = job.gpus_per_node / max(pool.gpus_per_node or job.gpus_per_node, 1)
    # The pool's smallest machine (the platform knows it; several types in a spot pool): the pod fits on
    # any node of the pool.
    if pool.node_vcpus and pool.node_memory_gib:
        vcpus = pool.node_vcpus * share * NODE_SHARE
        memory = pool.node_memory_gib * share * NODE_SHARE
    else:
        vcpus, memory = CPU_PER_GPU * job.gpus_per_node, MEMORY_GIB_PER_GPU * job.gpus_per_node
    cpu = job.resources.cpu or math.floor(vcpus)
    mem = job.resources.memory_gib or math.floor(memory)
    # DataLoader workers pass batches through shared memory; the 64 MiB container default breaks them.
    shm = job.resources.shm_gib or min(
        max(8, job.dataloader_workers * job.gpus_per_node), math.floor(mem / 4)
    )
    return _quantity(cpu), f"{_quantity(mem)}Gi", f"{_quantity(shm)}Gi"


def _quantity(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def trainer_config(job: JobSpec) -> dict[str, Any]:
    """The trainer's config file: the job's `trainer:` block plus what the job stack decides."""
    config = dict(job.trainer)
    config["jobName"] = job.name
    # The world sizes this job can run at, so the trainer can refuse a global batch none of them divides.
    config["worldSizes"] = [n * job.gpus_per_node for n in range(job.nodes.min, job.nodes.max + 1)]
    config.setdefault("numWorkers", job.dataloader_workers)
    if job.checkpoint is not None:
        config["checkpoint"] = {
            **(config.get("checkpoint") or {}),
            "intervalSteps": job.checkpoint.interval_steps,
            "keep": job.checkpoint.keep,
            "asyncSave": job.checkpoint.async_save,
        }
    return {"trainer": config}


def validate_trainer_config(job: JobSpec) -> None:
    """Run the trainer's own validation now, so a bad `trainer:` block fails the deploy, not the pods."""
    problems = trainer_config_problems(trainer_config(job)["trainer"], root="job.trainer")
    if problems:
        raise ConfigError(problems)


def grace_seconds(job: JobSpec, platform: PlatformOutputs) -> int:
    """The pod's terminationGracePeriodSeconds: the job's, else the platform's (the cloud's preemption
    notice), never below MIN_GRACE_SECONDS (GKE's notice is 30 s; a Kueue preemption or a drain is not
    bounded by it)."""
    return max(job.grace_period_seconds or platform.preemption_grace_seconds, MIN_GRACE_SECONDS)


def _env(job: JobSpec, platform: PlatformOutputs, pool: NodePoolInfo, grace: int) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": contract.ENV_CONFIG, "value": f"{CONFIG_DIR}/{CONFIG_FILE}"},
        {"name": contract.ENV_JOB_NAME, "value": job.name},
        {"name": contract.ENV_METRICS_PORT, "value": str(TRAINER_METRICS_PORT)},
        # The launcher's own deadline for workers to save and exit, inside the pod's grace period.
        {"name": contract.ENV_GRACE_S, "value": str(max(grace - 10, 5))},
        {
            "name": "NODE_RANK",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}},
        },
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    uri = checkpoint_uri(job, platform)
    if uri is not None:
        env.append({"name": contract.ENV_CHECKPOINT_URI, "value": uri})
    return env + launcher_env(job, pool) + pod_env(job, pool, {e["name"] for e in env})


def _volumes(job: JobSpec, pool: NodePoolInfo, shm: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the trainer's mounts: config, /dev/shm, the job's storage, the fabric's."""
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": config_map_name(job)}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    # One volume per storage; several mounts (sub-paths) of it share it. The claim is read-only only
    # when every mount of it is.
    for storage in dict.fromkeys(v.storage for v in job.volumes):
        read_only = all(v.read_only for v in job.volumes if v.storage == storage)
        volumes.append(
            {"name": f"vol-{storage}", "persistentVolumeClaim": {"claimName": storage, "readOnly": read_only}}
        )
    for v in job.volumes:
        mount = {"name": f"vol-{v.storage}", "mountPath": v.mount_path, "readOnly": v.read_only}
        if v.sub_path:
            mount["subPath"] = v.sub_path
        mounts.append(mount)
    if pool.fabric is not None:
        # The fabric's volumes (e.g. the NCCL plugin's host libraries) and the trainer's mounts of them,
        # as the backend gives them (components/bundle.py PodFabric).
        volumes += [dict(v) for v in pool.fabric.volumes]
        mounts += [dict(m) for m in pool.fabric.volume_mounts]
    return volumes, mounts


def trainer_container(
    job: JobSpec,
    platform: PlatformOutputs,
    pool: NodePoolInfo,
    *,
    args: list[str],
    command: list[str] | None,
    grace: int,
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    cpu, memory, _ = pod_resources(job, pool)
    fabric = fabric_resources(pool)
    c: dict[str, Any] = {
        "name": CONTAINER,
        "image": job.image,
        "env": _env(job, platform, pool, grace),
        "ports": [
            {"name": TRAINER_METRICS_PORT_NAME, "containerPort": TRAINER_METRICS_PORT},
            {"name": "c10d", "containerPort": RDZV_PORT},
            {"name": "master", "containerPort": MASTER_PORT},
        ],
        "resources": {
            "requests": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(job.gpus_per_node), **fabric},
            "limits": {"memory": memory, "nvidia.com/gpu": str(job.gpus_per_node), **fabric},
        },
        "volumeMounts": mounts,
    }
    if pool.rack is not None:
        # The ComputeDomain's IMEX channel beside the GPUs: multi-node NVLink; and the node's RDMA NICs where a
        # network DRA driver hands them out (compute_domain.py).
        c["resources"]["claims"] = container_claims(pool.rack)
    if command is None:
        # No command: the image's entry point is tini -> `python -m trainer.launch` (trainer/Dockerfile);
        # tini forwards signals and reaps orphans.
        c["args"] = args
    else:
        c["command"] = list(command)
    return c


def job_pools(job: JobSpec, platform: PlatformOutputs) -> list[NodePoolInfo]:
    """The job's pools, in its order of preference (check_job refuses unknown ones)."""
    pools = [platform.pool(name) for name in job.pools]
    assert pools and all(p is not None for p in pools), "check_job refuses unknown pools"
    return [p for p in pools if p is not None]


def _sizing_pool(pools: list[NodePoolInfo]) -> NodePoolInfo:
    """The pool with the smallest machine: a pod sized for it fits every pool of the job."""
    return min(pools, key=lambda p: (p.node_vcpus or 0, p.node_memory_gib or 0))


def node_placement(job_name: str, pools: list[NodePoolInfo]) -> dict[str, Any]:
    """nodeSelector, affinity and tolerations that keep the pod on the job's pools.

    One pool: its labels. Several: the labels all of them share in the nodeSelector, and one required
    node-affinity term per pool with its own labels (terms are ORed). Kueue matches a pod against a
    ResourceFlavor on the flavor's label keys only (v0.19.2 flavorassigner), so a pool-specific term fits
    its own flavor and no other, and Kueue adds the admitted flavor's labels to the nodeSelector.
    """
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {JOB_LABEL: job_name}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    taints: dict[tuple[str, str, str], dict[str, Any]] = {}
    for p in pools:
        for t in p.taints:
            taints.setdefault((t.key, t.value, t.effect), {**t.exports(), "operator": "Equal"})
    out: dict[str, Any] = {"tolerations": list(taints.values()), "affinity": anti}
    if len(pools) == 1:
        out["nodeSelector"] = dict(pools[0].labels)
        return out
    common = common_labels(pools)
    out["nodeSelector"] = common
    # Sorted by key: a job stack reads the pools' labels through a StackReference, whose outputs reach the
    # program as a map in no stable order (the same plan gave capacity before pool in one process and pool
    # before capacity in another); a list in that order would change the JobSet at every `pulumi up`.
    terms = [
        {
            "matchExpressions": [
                {"key": k, "operator": "In", "values": [v]}
                for k, v in sorted(p.labels.items())
                if k not in common
            ]
        }
        for p in pools
    ]
    if all(t["matchExpressions"] for t in terms):
        out["affinity"] = {
            **anti,
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}},
        }
    return out


def topology_annotations(
    job: JobSpec, platform: PlatformOutputs, pools: list[NodePoolInfo]
) -> dict[str, str]:
    """Kueue TAS podset annotation: the job's `topology`, else preferred at the tightest level above the
    node. Only when every pool's flavor has the same Topology: Kueue refuses a topology request on a
    flavor without one, which would stop the fallback to such a pool."""
    levels = {levels_of_pool_flavor(p, platform.node_pools) for p in pools}
    if len(levels) != 1 or not (lv := levels.pop()):
        return {}
    topo = job.topology
    if (topo is None or not topo.level) and (rack := job_rack(pools)) is not None:
        # A rack job stays within one NVLink clique, or spans cliques at the level above (compute_domain.py).
        level = rack_level(lv, rack, job.nodes.max)
        return {REQUIRED_TOPOLOGY: level} if level else {}
    label = named_levels(lv)[topo.level] if topo is not None and topo.level else default_level(lv)
    mode = topo.mode if topo is not None else "preferred"
    return {REQUIRED_TOPOLOGY if mode == "required" else PREFERRED_TOPOLOGY: label}


def workload_annotations(pools: list[NodePoolInfo]) -> dict[str, str]:
    """What the pools ask of the job's workload object (e.g. GKE queued provisioning's
    `provreq.kueue.x-k8s.io/maxRunDurationSeconds`, which Kueue copies to the ProvisioningRequest)."""
    out: dict[str, str] = {}
    for p in pools:
        for k, v in p.workload_annotations.items():
            out.setdefault(k, v)
    return out


def pod_template(
    job: JobSpec,
    platform: PlatformOutputs,
    *,
    args: list[str],
    command: list[str] | None = None,
    subdomain: str | None = None,
) -> dict[str, Any]:
    """The job's pod template (metadata and spec) on its pools."""
    team = platform.team(job.team)
    assert team is not None, "check_job refuses unknown teams"
    pools = job_pools(job, platform)
    pool = _sizing_pool(pools)
    grace = grace_seconds(job, platform)
    _, _, shm = pod_resources(job, pool)
    volumes, mounts = _volumes(job, pool, shm)
    annotations = dict(pool.fabric.annotations) if pool.fabric is not None else {}
    annotations.update(topology_annotations(job, platform, pools))
    placement = node_placement(job.name, pools)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": team.service_account,
        "terminationGracePeriodSeconds": grace,
        # The labels that select the pools' nodes (trainplane's own on clouds, the stack's selector on
        # existing clusters); one pod per node: the job's GPUs per node come from one machine.
        "nodeSelector": placement["nodeSelector"],
        "tolerations": placement["tolerations"],
        "affinity": placement["affinity"],
        "containers": [
            trainer_container(job, platform, pool, args=args, command=command, grace=grace, mounts=mounts)
        ],
        "volumes": volumes,
    }
    if pool.fabric is not None and pool.fabric.sidecars:
        # Native sidecars (Kubernetes 1.29+): init containers that keep running beside the trainer, start
        # before it and stop after it, and never keep the pod (or the Job) from completing.
        spec["initContainers"] = [{**s, "restartPolicy": "Always"} for s in pool.fabric.sidecars]
    if (rack := job_rack(pools)) is not None:
        spec["resourceClaims"] = pod_resource_claims(job.name, rack)
    if subdomain is not None:
        spec["subdomain"] = subdomain
    metadata: dict[str, Any] = {"labels": {**job_labels(job), QUEUE_LABEL: team.local_queue}}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}
