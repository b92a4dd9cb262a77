"""TrainingJob: a distributed PyTorch job as an Indexed batch/v1 Job plus a headless Service.

One pod per node; each pod runs the trainer's launcher (`python -m trainer.launch`, a torchrun wrapper
whose exit code tells the truth: 0 done, 143 preempted after a committed checkpoint, 2 configuration
error). The Job's podFailurePolicy encodes that contract, so spot reclaims and preemptions never eat
into `maxRestarts` and a bad config fails once instead of retrying.

Example:
    >>> job = TrainingJob("gpt-small", TrainingJobArgs(job=spec, platform=outputs))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kubernetes.names import JOB_LABEL, TRAINER_METRICS_PORT, TRAINER_METRICS_PORT_NAME
from components.kubernetes.observability import trainer_pod_monitor
from components.outputs import NodePoolOutput, PlatformOutputs
from components.spec import ConfigError, JobSpec
from trainer import contract

CONTAINER = "trainer"
CONFIG_DIR = "/etc/trainplane"
CONFIG_FILE = "trainer.yaml"
RDZV_PORT = 29400
MASTER_PORT = 29500
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
TEAM_LABEL = "trainplane.dev/team"
# Without a machine shape (existing clusters), size requests per GPU.
CPU_PER_GPU, MEMORY_GIB_PER_GPU = 8, 64
# Leave room on each node for the kubelet, DaemonSets (GPU operator, DCGM, CSI, log shipper).
NODE_SHARE = 0.85


@dataclass(frozen=True, kw_only=True)
class TrainingJobArgs:
    job: JobSpec
    # The platform stack's outputs (components.outputs), already checked by check_job.
    platform: PlatformOutputs


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


def fabric_resources(pool: NodePoolOutput) -> dict[str, str]:
    """Every extended resource of the pool's nodes (e.g. their fabric devices) at the node's full count.

    One pod per node owns the node's fabric: devices a pod does not request are invisible to it, so NCCL
    would fall back to TCP. Extended resources take requests equal to limits.
    """
    return {name: str(int(count)) for name, count in sorted(pool.extended_resources.items())}


def pod_env(job: JobSpec, pool: NodePoolOutput, reserved: set[str]) -> list[dict[str, Any]]:
    """The pool's fabric environment, then the job's own env, which wins on a conflict."""
    fabric = {k: str(v) for k, v in pool.pod_env.items() if k not in job.env and k not in reserved}
    return [{"name": k, "value": v} for k, v in sorted(fabric.items())] + [
        {"name": k, "value": v} for k, v in sorted(job.env.items())
    ]


def pod_resources(job: JobSpec, pool: NodePoolOutput) -> tuple[str, str, str]:
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
    problems = contract.validate_trainer_config(trainer_config(job)["trainer"], root="job.trainer")
    if problems:
        raise ConfigError(problems)


def launcher_args(job: JobSpec, service: str) -> list[str]:
    """torchrun options for the launcher: static ranks when the size is fixed, c10d when elastic."""
    nodes = job.nodes
    args = [f"--nproc-per-node={job.gpus_per_node}"]
    if nodes.min == nodes.max:
        args += [
            f"--nnodes={nodes.max}",
            "--node-rank=$(NODE_RANK)",
            f"--master-addr={job.name}-0.{service}",
            f"--master-port={MASTER_PORT}",
        ]
    else:
        # Pod 0 hosts the c10d store; the others find it by its stable DNS name.
        args += [
            f"--nnodes={nodes.min}:{nodes.max}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={job.name}-0.{service}:{RDZV_PORT}",
            f"--rdzv-id={job.name}",
        ]
    # A failed worker restarts the group in place a few times before the pod gives up to the Job.
    args.append("--max-restarts=3")
    return [*args, "--", "--config", f"{CONFIG_DIR}/{CONFIG_FILE}"]


def pod_failure_policy() -> dict[str, Any]:
    """The trainer's exit-code contract (DESIGN.md) as a podFailurePolicy; first match wins."""
    return {
        "rules": [
            # Evicted, preempted or its node reclaimed: not the job's fault, never counted.
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            # Preempted after a committed checkpoint: retry, not a failure.
            {
                "action": "Ignore",
                "onExitCodes": {
                    "containerName": CONTAINER,
                    "operator": "In",
                    "values": [contract.EXIT_PREEMPTED],
                },
            },
            # Configuration error: retrying cannot help.
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER,
                    "operator": "In",
                    "values": [contract.EXIT_CONFIG],
                },
            },
        ]
    }


@dataclass(frozen=True, kw_only=True)
class TrainingJobResources:
    config: k8s.core.v1.ConfigMap
    service: k8s.core.v1.Service
    job: k8s.batch.v1.Job
    pod_monitor: k8s.apiextensions.CustomResource


class TrainingJob(pulumi.ComponentResource):
    """A distributed training job on a trainplane platform."""

    resources: TrainingJobResources

    outputs: dict[str, Any]

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:TrainingJob", name, None, opts)
        job, platform = args.job, args.platform
        validate_trainer_config(job)
        team, pool = platform.team(job.team), platform.pool(job.node_pool)
        assert team is not None and pool is not None, "check_job refuses unknown teams and pools"
        namespace = team.namespace
        service = f"{job.name}-workers"
        labels = {
            "app.kubernetes.io/name": "trainplane-trainer",
            "app.kubernetes.io/instance": job.name,
            "app.kubernetes.io/managed-by": "trainplane",
            JOB_LABEL: job.name,
            TEAM_LABEL: job.team,
        }
        child = pulumi.ResourceOptions(parent=self)

        config_map = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={"name": f"{job.name}-config", "namespace": namespace, "labels": labels},
            data={CONFIG_FILE: yaml.safe_dump(trainer_config(job), sort_keys=False)},
            opts=child,
        )
        service_res = k8s.core.v1.Service(
            f"{name}-workers",
            metadata={"name": service, "namespace": namespace, "labels": labels},
            spec={
                "clusterIP": "None",
                # Rendezvous happens before any pod is Ready; the DNS names must exist already.
                "publishNotReadyAddresses": True,
                "selector": {JOB_LABEL: job.name},
                "ports": [
                    {"name": "c10d", "port": RDZV_PORT, "targetPort": RDZV_PORT},
                    {"name": "master", "port": MASTER_PORT, "targetPort": MASTER_PORT},
                    {
                        "name": TRAINER_METRICS_PORT_NAME,
                        "port": TRAINER_METRICS_PORT,
                        "targetPort": TRAINER_METRICS_PORT,
                    },
                ],
            },
            opts=child,
        )
        cpu, memory, shm = pod_resources(job, pool)
        fabric = fabric_resources(pool)
        # Long enough for the preemption checkpoint within the cloud's notice (the platform says how long).
        grace = job.grace_period_seconds or platform.preemption_grace_seconds
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
        env += pod_env(job, pool, {e["name"] for e in env})

        volumes: list[dict[str, Any]] = [
            {"name": "config", "configMap": {"name": config_map.metadata["name"]}},
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
                {
                    "name": f"vol-{storage}",
                    "persistentVolumeClaim": {"claimName": storage, "readOnly": read_only},
                }
            )
        for v in job.volumes:
            mount = {"name": f"vol-{v.storage}", "mountPath": v.mount_path, "readOnly": v.read_only}
            if v.sub_path:
                mount["subPath"] = v.sub_path
            mounts.append(mount)

        tolerations = [{**t.exports(), "operator": "Equal"} for t in pool.taints]
        pod_labels = {**labels, "kueue.x-k8s.io/queue-name": team.local_queue}
        job_metadata: dict[str, Any] = {
            "name": job.name,
            "namespace": namespace,
            "labels": pod_labels,
            # The provider would otherwise wait for the Job to finish: a training run, not a deploy.
            "annotations": {"pulumi.com/skipAwait": "true"},
        }
        if job.nodes.min < job.nodes.max:
            # Kueue may admit an elastic job with fewer pods than max when quota is short.
            job_metadata["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = str(job.nodes.min)

        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=job_metadata,
            spec={
                "completionMode": "Indexed",
                "completions": job.nodes.max,
                "parallelism": job.nodes.max,
                # Kueue admits the whole job (all its GPUs) or none of it, then unsuspends it.
                "suspend": True,
                "backoffLimit": job.max_restarts,
                "podFailurePolicy": pod_failure_policy(),
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        "subdomain": service,
                        "restartPolicy": "Never",
                        "serviceAccountName": team.service_account,
                        "terminationGracePeriodSeconds": grace,
                        # The labels that select the pool's nodes (trainplane's own on clouds,
                        # the stack's selector on existing clusters).
                        "nodeSelector": dict(pool.labels),
                        "tolerations": tolerations,
                        # One pod per node: the job's GPUs per node come from one machine.
                        "affinity": {
                            "podAntiAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "labelSelector": {"matchLabels": {JOB_LABEL: job.name}},
                                        "topologyKey": "kubernetes.io/hostname",
                                    }
                                ]
                            }
                        },
                        "containers": [
                            {
                                "name": CONTAINER,
                                "image": job.image,
                                # The image's entry point is tini -> `python -m trainer.launch`
                                # (trainer/Dockerfile): tini forwards signals and reaps orphans.
                                "args": launcher_args(job, service),
                                "env": env,
                                "ports": [
                                    {
                                        "name": TRAINER_METRICS_PORT_NAME,
                                        "containerPort": TRAINER_METRICS_PORT,
                                    },
                                    {"name": "c10d", "containerPort": RDZV_PORT},
                                    {"name": "master", "containerPort": MASTER_PORT},
                                ],
                                "resources": {
                                    "requests": {
                                        "cpu": cpu,
                                        "memory": memory,
                                        "nvidia.com/gpu": str(job.gpus_per_node),
                                        **fabric,
                                    },
                                    "limits": {
                                        "memory": memory,
                                        "nvidia.com/gpu": str(job.gpus_per_node),
                                        **fabric,
                                    },
                                },
                                "volumeMounts": mounts,
                            }
                        ],
                        "volumes": volumes,
                    },
                },
            },
            opts=child,
        )
        # Scraped by the platform's Prometheus (it selects every PodMonitor); labels job and rank.
        monitor = k8s.apiextensions.CustomResource(
            f"{name}-metrics",
            api_version="monitoring.coreos.com/v1",
            kind="PodMonitor",
            metadata={"name": job.name, "namespace": namespace, "labels": labels},
            spec=trainer_pod_monitor(job.name),
            opts=child,
        )
        self.resources = TrainingJobResources(
            config=config_map, service=service_res, job=self.job, pod_monitor=monitor
        )
        selector = f"{JOB_LABEL}={job.name}"
        self.outputs = {
            "namespace": namespace,
            "jobName": job.name,
            "checkpointUri": uri,
            "logs": f"kubectl -n {namespace} logs -f -l {selector} --prefix --max-log-requests={job.nodes.max}",
            "status": f"kubectl -n {namespace} get job/{job.name} workloads.kueue.x-k8s.io pods -l {selector}",
            "grafana": f"Grafana > Dashboards > trainplane / Training jobs, job={job.name}",
        }
        self.register_outputs(self.outputs)
