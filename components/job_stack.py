"""A training-job stack: read the platform stack it names, check the job against it, build the job.

Used by the project's program (infra/) and by the `training-job` template's own `__main__.py`.

Example:
    >>> job = JobSpec.load(pulumi.Config("trainplane").require_object("job"))  # doctest: +SKIP
    >>> training = deploy_job(job)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.sync_await import _sync_await
from pydantic import ValidationError

from components.outputs import READ_KEYS, PlatformOutputs
from components.spec import ConfigError, JobSpec, check_job
from trainer.contract import format_validation_error


def read_platform(ref: pulumi.StackReference, name: str) -> PlatformOutputs:
    """The platform stack's outputs, parsed into PlatformOutputs before anything else is registered.

    Reading them synchronously (rather than building inside `.apply`) keeps every job resource visible
    to `pulumi preview`; the engine knows a stack reference's outputs during preview too. Keys the
    platform does not export (it predates them) take their defaults.
    """
    values: dict[str, Any] = {}
    for key in READ_KEYS:
        details = _sync_await(ref.get_output_details(key))
        value = details.value if details.value is not None else details.secret_value
        if value is not None:
            values[key] = value
    if values.get("clusterName") is None:
        raise ConfigError(
            [f"job.platformStack: stack {name} has no trainplane platform outputs (is it deployed?)"]
        )
    try:
        return PlatformOutputs.model_validate(values)
    except ValidationError as e:
        raise ConfigError(
            format_validation_error(e, PlatformOutputs, f"platform stack {name} outputs")
        ) from None


def deploy_job(job: JobSpec, opts: pulumi.ResourceOptions | None = None):
    """Register the job on its platform's cluster (or, on a fleet, on the fleet's manager); ConfigError if
    the platform (every worker of the fleet) cannot run it."""
    import pulumi_kubernetes as k8s

    from components.incluster.training_job import TrainingJob, TrainingJobArgs

    if job.on_fleet:
        from components.job_fleet_stack import deploy_fleet_job

        return deploy_fleet_job(job, opts)
    ref = pulumi.StackReference("platform", stack_name=job.platform_stack)
    platform = read_platform(ref, job.platform_stack)
    problems = check_job(job, platform)
    if problems:
        raise ConfigError(problems)
    provider = k8s.Provider(
        "platform-cluster",
        kubeconfig=ref.require_output("kubeconfig"),
        enable_server_side_apply=True,
    )
    return TrainingJob(
        job.name,
        TrainingJobArgs(job=job, platform=platform),
        # A list, keyed by each provider's own package (pulumi 3.272.0, pulumi/resource.py
        # Resource._get_providers: `{p.package: p for p in opts.providers}`): the same as a dict by name.
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[provider])),
    )
