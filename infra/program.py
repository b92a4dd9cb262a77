"""The Pulumi program: read the stack's one config object, validate it, build, export.

A platform stack holds `trainplane:platform`; a job stack holds `trainplane:job`; a fleet stack holds
`trainplane:fleet` (components/fleet: one MultiKueue queue over several platforms). Validation happens
before any resource is registered (a job stack first reads its platform stack, which is how it learns
what to validate against); problems surface as one line each, never a traceback.
"""

from __future__ import annotations

import pulumi

from components.spec import ConfigError, JobSpec, PlatformSpec

KINDS = ("platform", "job", "fleet")


def run() -> None:
    config = pulumi.Config("trainplane")
    kinds = [k for k in KINDS if config.get(k) is not None]
    if len(kinds) != 1:
        raise pulumi.RunError(
            "stack config must hold exactly one of trainplane:platform, trainplane:job or trainplane:fleet"
            + (f" (found {', '.join(kinds)})" if kinds else _mistyped_key())
        )
    try:
        if kinds == ["platform"]:
            spec = PlatformSpec.load(config.get_object("platform"))
            provider_region_problems(spec, pulumi.Config(spec.cloud).get("region"))
            _platform(config, spec)
        elif kinds == ["fleet"]:
            _fleet(config.get_object("fleet"))
        else:
            _job(JobSpec.load(config.get_object("job")))
    except ConfigError as e:
        # RunError prints without a Python traceback under `pulumi up`.
        raise pulumi.RunError("invalid stack config:\n" + "\n".join(e.problems)) from None


def stack_config() -> dict[str, object]:
    """Every key of the stack's config, which `pulumi.Config` cannot list: what the engine set, else the
    PULUMI_CONFIG bag (pulumi/pulumi@v3.272.0 sdk/python/lib/pulumi/runtime/config.py: CONFIG,
    get_config_env; get_config looks in that order). Keys set one by one as PULUMI_CONFIG_<KEY>
    environment variables are not listed (their names do not give the key back)."""
    from pulumi.runtime import config as runtime_config

    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}


def _mistyped_key() -> str:
    """A did-you-mean for a mistyped object key (`trainplane:platfrom`), from the config the engine set."""
    import difflib

    keys = set(stack_config())
    for key in sorted(k for k in keys if k.startswith("trainplane:")):
        close = difflib.get_close_matches(key, [f"trainplane:{k}" for k in KINDS], n=1, cutoff=0.6)
        if close:
            return f"; {key!r} is not one: did you mean {close[0]!r}?"
    return ""


def provider_region_problems(spec: PlatformSpec, provider_region: str | None) -> None:
    """`aws:region` (or `gcp:region`) is where the default provider creates what the platform does not
    place itself; a value other than platform.region would split the platform across two regions."""
    if provider_region and spec.region and provider_region != spec.region:
        raise ConfigError(
            [
                f"{spec.cloud}:region: {provider_region!r} differs from platform.region {spec.region!r}; "
                f"set both to the same region (or drop {spec.cloud}:region)"
            ]
        )


def _platform(config: pulumi.Config, spec: PlatformSpec) -> None:
    from components.platform import GpuPlatform, GpuPlatformArgs

    args = GpuPlatformArgs(spec=spec, kubeconfig=config.get_secret("kubeconfig"))
    platform = GpuPlatform(spec.cluster.name, args)
    for key, value in platform.outputs.exports().items():
        pulumi.export(key, value)


def _job(job: JobSpec) -> None:
    from components.job_stack import deploy_job

    training = deploy_job(job)
    for key, value in training.outputs.items():
        pulumi.export(key, value)


def _fleet(raw: object) -> None:
    from components.fleet.stack import deploy_fleet
    from components.spec.fleet import FleetSpec

    _, exports = deploy_fleet(FleetSpec.load(raw))
    for key, value in exports.items():
        pulumi.export(key, value)
