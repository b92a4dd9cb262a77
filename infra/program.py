"""The Pulumi program: read the stack's one config object, validate it, build, export.

A platform stack holds `trainplane:platform`; a job stack holds `trainplane:job`. Validation happens
before any resource is registered (a job stack first reads its platform stack, which is how it learns
what to validate against); problems surface as one line each, never a traceback.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.sync_await import _sync_await

from components.spec import ConfigError, JobSpec, PlatformSpec, check_job

# The platform outputs a job stack needs (see components.platform.platform_outputs).
PLATFORM_KEYS = ("cloud", "clusterName", "region", "nodePools", "teams", "storage", "buckets", "objectStore")


def run() -> None:
    config = pulumi.Config("trainplane")
    kinds = [k for k in ("platform", "job") if config.get(k) is not None]
    if len(kinds) != 1:
        raise pulumi.RunError(
            "stack config must hold exactly one of trainplane:platform or trainplane:job"
            + (f" (found {', '.join(kinds)})" if kinds else "")
        )
    try:
        if kinds == ["platform"]:
            _platform(config, PlatformSpec.load(config.get_object("platform")))
        else:
            _job(JobSpec.load(config.get_object("job")))
    except ConfigError as e:
        # RunError prints without a Python traceback under `pulumi up`.
        raise pulumi.RunError("invalid stack config:\n" + "\n".join(e.problems)) from None


def _platform(config: pulumi.Config, spec: PlatformSpec) -> None:
    from components.platform import GpuPlatform, GpuPlatformArgs

    args = GpuPlatformArgs(spec=spec, kubeconfig=config.get_secret("kubeconfig"))
    platform = GpuPlatform(spec.cluster.name, args)
    for key, value in platform.outputs.items():
        pulumi.export(key, value)


def read_platform(ref: pulumi.StackReference) -> dict[str, Any]:
    """The platform stack's outputs as plain values, read once, before anything else is registered.

    Reading them synchronously (rather than building inside `.apply`) keeps every job resource visible
    to `pulumi preview`; the engine knows a stack reference's outputs during preview too.
    """
    values: dict[str, Any] = {}
    for key in PLATFORM_KEYS:
        details = _sync_await(ref.get_output_details(key))
        values[key] = details.value if details.value is not None else details.secret_value
    if values.get("clusterName") is None:
        raise ConfigError(
            [f"job.platformStack: stack {ref.name} has no trainplane platform outputs (is it deployed?)"]
        )
    return values


def _job(job: JobSpec) -> None:
    import pulumi_kubernetes as k8s

    from components.kubernetes.training_job import TrainingJob, TrainingJobArgs

    ref = pulumi.StackReference("platform", stack_name=job.platform_stack)
    platform = read_platform(ref)
    problems = check_job(job, platform)
    if problems:
        raise ConfigError(problems)
    provider = k8s.Provider(
        "platform-cluster",
        kubeconfig=ref.require_output("kubeconfig"),
        enable_server_side_apply=True,
    )
    training = TrainingJob(
        job.name,
        TrainingJobArgs(job=job, platform=platform),
        pulumi.ResourceOptions(providers={"kubernetes": provider}),
    )
    for key, value in training.outputs.items():
        pulumi.export(key, value)
