"""The Pulumi program: read the stack's one config object, validate it, build, export.

A platform stack holds `trainplane:platform`; a job stack holds `trainplane:job`. Validation happens
before any resource is registered; problems surface as one line each, never a traceback.
"""

from __future__ import annotations

import pulumi

from components.spec import ConfigError, PlatformSpec


def load_platform_spec(config: pulumi.Config) -> PlatformSpec:
    raw = config.get_object("platform")
    return PlatformSpec.load(raw)


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
            _platform(config, load_platform_spec(config))
        else:
            raise ConfigError(["job: job stacks are not supported by this version of trainplane yet"])
    except ConfigError as e:
        # RunError prints without a Python traceback under `pulumi up`.
        raise pulumi.RunError("invalid stack config:\n" + "\n".join(e.problems)) from None


def _platform(config: pulumi.Config, spec: PlatformSpec) -> None:
    from components.platform import GpuPlatform, GpuPlatformArgs

    platform = GpuPlatform(
        spec.cluster.name, GpuPlatformArgs(spec=spec, kubeconfig=config.get_secret("kubeconfig"))
    )
    for key, value in platform.outputs.items():
        pulumi.export(key, value)
