"""TrainingJob: a distributed PyTorch job on a trainplane platform: its trainer config, its runtime object
(a JobSet, or an Indexed Job for elastic jobs: job_runtime.py) and its PodMonitor.

The manifests come from pulumi-free functions (job_pod.py, job_runtime.py) that other commands reuse
(e.g. a NCCL preflight on the job's nodes); this component only registers them.

Example:
    >>> job = TrainingJob("gpt-small", TrainingJobArgs(job=spec, platform=outputs))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.incluster.compute_domain import (
    compute_domain,
    compute_domain_name,
    job_rack,
    nic_claim_template,
)
from components.incluster.job_pod import (
    CONFIG_FILE,
    MASTER_PORT,
    RDZV_PORT,
    checkpoint_uri,
    config_map_name,
    job_labels,
    job_pools,
    trainer_config,
    validate_trainer_config,
)
from components.incluster.job_runtime import elastic_job, is_elastic, training_jobset
from components.incluster.names import JOB_LABEL, TRAINER_METRICS_PORT, TRAINER_METRICS_PORT_NAME
from components.incluster.observability import trainer_pod_monitor
from components.outputs import PlatformOutputs
from components.spec import ConfigError, JobSpec


@dataclass(frozen=True, kw_only=True)
class TrainingJobArgs:
    job: JobSpec
    # The platform stack's outputs (components.outputs), already checked by check_job.
    platform: PlatformOutputs
    # On a fleet's manager (components/job_fleet.py): the JobSet alone, which MultiKueue copies to a worker;
    # the trainer config rides in its pod template, and nothing else is created beside it.
    on_manager: bool = False


@dataclass(frozen=True, kw_only=True)
class TrainingJobResources:
    config: k8s.core.v1.ConfigMap | None
    # A jobset.x-k8s.io JobSet (fixed size) or a batch/v1 Job (elastic).
    job: pulumi.CustomResource
    pod_monitor: k8s.apiextensions.CustomResource | None
    # The elastic runtime's headless Service (a JobSet makes its own); None for a JobSet.
    service: k8s.core.v1.Service | None = None
    # The job's ComputeDomain on a rack-scale pool (compute_domain.py); None elsewhere.
    compute_domain: k8s.apiextensions.CustomResource | None = None
    # The job's ResourceClaimTemplate of its pods' RDMA NICs where a network DRA driver hands them out
    # (compute_domain.py nic_claim_template); None elsewhere.
    nic_claims: k8s.resource.v1.ResourceClaimTemplate | None = None


def _register(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    if manifest["kind"] == "Job":
        return k8s.batch.v1.Job(
            f"{name}-job", metadata=manifest["metadata"], spec=manifest["spec"], opts=opts
        )
    # A JobSet is another resource type than the Job a fixed-size job stack registered before: the
    # engine replaces a deployed Job with the JobSet, which is right for a job (no alias).
    return _custom_resource(f"{name}-jobset", manifest, opts)


def _custom_resource(
    resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A custom resource registered as its manifest says (apiVersion, kind, metadata, spec)."""
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )


def _elastic_service(
    name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.core.v1.Service:
    meta = manifest["metadata"]
    pod = manifest["spec"]["template"]["spec"]
    return k8s.core.v1.Service(
        f"{name}-workers",
        metadata={"name": pod["subdomain"], "namespace": meta["namespace"], "labels": meta["labels"]},
        spec={
            "clusterIP": "None",
            # Rendezvous happens before any pod is Ready; the DNS names must exist already.
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: meta["name"]},
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
        opts=opts,
    )


class TrainingJob(pulumi.ComponentResource):
    """A distributed training job on a trainplane platform."""

    resources: TrainingJobResources

    outputs: dict[str, Any]

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:kubernetes:TrainingJob", name, None, opts)
        job, platform = args.job, args.platform
        validate_trainer_config(job)
        manifest = elastic_job(job, platform) if is_elastic(job) else training_jobset(job, platform)
        namespace = manifest["metadata"]["namespace"]
        labels = job_labels(job)
        child = pulumi.ResourceOptions(parent=self)
        if args.on_manager:
            from components.job_fleet import on_manager

            if job_rack(job_pools(job, platform)) is not None:
                # MultiKueue copies the JobSet alone to a worker; its ComputeDomain would not be there.
                raise ConfigError(
                    [
                        f"job.nodePool: a fleet job cannot run on a rack-scale pool yet (MultiKueue copies the "
                        f"JobSet to the worker without the ComputeDomain {compute_domain_name(job.name)} its "
                        "pods claim from); run it on the platform stack"
                    ]
                )

            config_yaml = yaml.safe_dump(trainer_config(job), sort_keys=False)
            self.job = _register(name, on_manager(manifest, config_yaml), child)
            self.resources = TrainingJobResources(config=None, job=self.job, pod_monitor=None)
            self.outputs = self._outputs(job, platform, namespace)
            self.register_outputs(self.outputs)
            return

        config_map = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={"name": config_map_name(job), "namespace": namespace, "labels": labels},
            data={CONFIG_FILE: yaml.safe_dump(trainer_config(job), sort_keys=False)},
            opts=child,
        )
        service = _elastic_service(name, manifest, child) if is_elastic(job) else None
        domain, nics = None, None
        if (rack := job_rack(job_pools(job, platform))) is not None:
            domain = _custom_resource(
                f"{name}-compute-domain", compute_domain(job.name, namespace, labels), child
            )
            if (template := nic_claim_template(job.name, namespace, labels, rack)) is not None:
                nics = k8s.resource.v1.ResourceClaimTemplate(
                    f"{name}-rdma", metadata=template["metadata"], spec=template["spec"], opts=child
                )
        # The pods mount the ConfigMap by name, and claim the channel of the ComputeDomain's template and
        # the RDMA NICs of theirs: create them first (and delete the job before them).
        first: list[pulumi.Resource] = [r for r in (config_map, domain, nics) if r is not None]
        self.job = _register(name, manifest, pulumi.ResourceOptions(parent=self, depends_on=first))
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
            config=config_map,
            job=self.job,
            pod_monitor=monitor,
            service=service,
            compute_domain=domain,
            nic_claims=nics,
        )
        self.outputs = self._outputs(job, platform, namespace)
        self.register_outputs(self.outputs)

    @staticmethod
    def _outputs(job: JobSpec, platform: PlatformOutputs, namespace: str) -> dict[str, Any]:
        selector = f"{JOB_LABEL}={job.name}"
        kind = "job" if is_elastic(job) else "jobset"
        return {
            "namespace": namespace,
            "jobName": job.name,
            "checkpointUri": checkpoint_uri(job, platform),
            "logs": f"kubectl -n {namespace} logs -f -l {selector} --prefix --max-log-requests={job.nodes.max}",
            "status": f"kubectl -n {namespace} get {kind}/{job.name} workloads.kueue.x-k8s.io pods -l {selector}",
            "grafana": f"Grafana > Dashboards > trainplane / Training jobs, job={job.name}",
        }
