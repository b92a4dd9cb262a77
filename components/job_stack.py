"""A training-job stack: read the platform stack it names, check the job against it, build the job.

Used by the project's program (infra/) and by the `training-job` template's own `__main__.py`.

Example:
    >>> job = JobSpec.load(pulumi.Config("trainplane").require_object("job"))  # doctest: +SKIP
    >>> training = deploy_job(job)  # doctest: +SKIP
"""

from __future__ import annotations

import pulumi

from components.spec import ConfigError, JobSpec, check_job
from components.stack_outputs import read_platform

__all__ = ["deploy_job", "read_platform"]


def deploy_job(job: JobSpec, opts: pulumi.ResourceOptions | None = None):
    """Register the job on its platform's cluster (or, on a fleet, on the fleet's manager); ConfigError if
    the platform (every worker of the fleet) cannot run it."""

    from components.fleet.providers import platform_provider
    from components.incluster.training_job import TrainingJob, TrainingJobArgs

    if job.on_fleet:
        from components.job_fleet_stack import deploy_fleet_job

        return deploy_fleet_job(job, opts)
    ref = pulumi.StackReference("platform", stack_name=job.platform_stack)
    platform = read_platform(ref, job.platform_stack)
    problems = check_job(job, platform)
    if problems:
        raise ConfigError(problems)
    # An existing cluster on the ambient kubeconfig exports a placeholder naming its context, not a
    # kubeconfig: the provider is built as the fleet builds it (components/fleet/providers.py).
    provider = platform_provider("platform-cluster", ref)
    return TrainingJob(
        job.name,
        TrainingJobArgs(job=job, platform=platform),
        # A list, keyed by each provider's own package (pulumi 3.272.0, pulumi/resource.py
        # Resource._get_providers: `{p.package: p for p in opts.providers}`): the same as a dict by name.
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[provider])),
    )
