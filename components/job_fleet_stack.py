"""The deploy path of a job on a fleet (`job.fleetStack`): read the fleet stack's outputs and each worker
platform's, check the job against every worker (components/job_fleet.py), and create its JobSet on the
fleet's MANAGER, in the team's namespace and LocalQueue there (the same names as on the workers); the
manager's MultiKueue copies it to the worker that admits it.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from components.outputs import PlatformOutputs
from components.spec import ConfigError, JobSpec
from components.stack_outputs import read_outputs, read_platform
from trainer.contract import format_validation_error


class FleetWorkerOutput(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    name: str
    stack: str
    cloud: str = ""
    order: int = 0


class FleetOutputs(BaseModel):
    """What a fleet stack exports for the job stacks on it (the fleet program's outputs)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    fleet_name: str
    manager_stack: str
    workers: list[FleetWorkerOutput] = Field(min_length=1)
    teams: list[Any] = Field(default_factory=list)

    def dispatch_order(self) -> list[FleetWorkerOutput]:
        return sorted(self.workers, key=lambda w: w.order)

    def team_names(self) -> list[str]:
        return [t if isinstance(t, str) else str(t.get("name")) for t in self.teams]


FLEET_READ_KEYS = ("fleetName", "managerStack", "workers", "teams")
# The manager's kubeconfig: the fleet stack exports its manager platform's `kubeconfig` (a secret).
MANAGER_KUBECONFIG = "kubeconfig"


def read_fleet(ref: pulumi.StackReference, name: str) -> FleetOutputs:
    """The fleet stack's outputs, read synchronously (as read_platform reads a platform's)."""
    values = read_outputs(ref, FLEET_READ_KEYS)
    if values.get("fleetName") is None:
        raise ConfigError([f"job.fleetStack: stack {name} has no trainplane fleet outputs (is it deployed?)"])
    try:
        return FleetOutputs.model_validate(values)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, FleetOutputs, f"fleet stack {name} outputs")) from None


def fleet_problems(
    job: JobSpec, fleet: FleetOutputs, workers: list[tuple[str, str, PlatformOutputs]]
) -> tuple[list[Any], list[str]]:
    """The job against the fleet: its team must be a fleet team (mirrored on the manager), then every
    worker (components/job_fleet.check_fleet_job)."""
    from components.job_fleet import check_fleet_job

    problems = []
    if fleet.teams and job.team not in fleet.team_names():
        problems.append(
            f"job.team: {job.team!r} is not a team of fleet {job.fleet_stack} (the manager has no queue for "
            f"it); fleet teams: {', '.join(fleet.team_names())}"
        )
    fits, more = check_fleet_job(job, workers)
    return fits, problems + more


def deploy_fleet_job(job: JobSpec, opts: pulumi.ResourceOptions | None = None) -> Any:
    import pulumi_kubernetes as k8s

    from components.incluster.training_job import TrainingJob, TrainingJobArgs
    from components.job_fleet import job_platform

    ref = pulumi.StackReference("fleet", stack_name=job.fleet_stack)
    fleet = read_fleet(ref, job.fleet_stack)
    workers, refs = [], {}
    for w in fleet.dispatch_order():
        refs[w.name] = pulumi.StackReference(f"worker-{w.name}", stack_name=w.stack)
        workers.append((w.name, w.stack, read_platform(refs[w.name], w.stack)))
    fits, problems = fleet_problems(job, fleet, workers)
    if problems:
        raise ConfigError(problems)
    provider = k8s.Provider(
        "fleet-manager",
        kubeconfig=ref.require_output(MANAGER_KUBECONFIG),
        enable_server_side_apply=True,
    )
    training = TrainingJob(
        job.name,
        TrainingJobArgs(job=job, platform=job_platform(fits, workers), on_manager=True),
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[provider])),
    )
    training.outputs["workers"] = [f.name for f in fits if f.fits]
    for f, (_, _, platform) in zip(fits, workers, strict=True):
        team = platform.team(job.team)
        if f.fits and team is not None:
            _worker_monitor(job, f.name, team.namespace, refs[f.name], training)
    return training


def _worker_monitor(
    job: JobSpec, worker: str, namespace: str, ref: pulumi.StackReference, parent: pulumi.Resource
) -> None:
    """The job's PodMonitor on a worker it fits: its pods run there, and that worker's Prometheus (which
    selects every PodMonitor) scrapes them; MultiKueue copies only the JobSet, so the job stack puts it
    there itself, through the worker platform's own kubeconfig output (or its ambient context)."""
    import pulumi_kubernetes as k8s

    from components.fleet.providers import platform_provider
    from components.incluster.job_pod import job_labels
    from components.incluster.observability import trainer_pod_monitor

    # An existing-cluster worker on the ambient kubeconfig exports a placeholder, not a kubeconfig: the
    # provider is the one the fleet stack builds for it (the ambient file with the worker's context).
    provider = platform_provider(f"worker-{worker}", ref)
    k8s.apiextensions.CustomResource(
        f"{job.name}-metrics-{worker}",
        api_version="monitoring.coreos.com/v1",
        kind="PodMonitor",
        metadata={"name": job.name, "namespace": namespace, "labels": job_labels(job)},
        spec=trainer_pod_monitor(job.name),
        opts=pulumi.ResourceOptions(parent=parent, providers=[provider]),
    )
