"""Cloud-neutral spec models of a GPU platform and of a training job (`components.spec`).

A stack file holds one object, `trainplane:platform` or `trainplane:job`, that `PlatformSpec.load()` /
`JobSpec.load()` validate in two passes: the shape with pydantic, then the rules that need the GPU
catalog or several keys at once (the cloud's own rules come from its backend, components.backends).
Every problem becomes one `ConfigError` line that names the key path, e.g.

    platform.nodePools[1].gpu: 'H1000' is not a known GPU; known: A10G, L4, ...

The package is split by concern: `base` (Spec, ConfigError, loading), `platform` (platform models),
`sections` (how each cloud's own keys, components/<cloud>/spec_keys.py, join the platform models),
`job` (job models, check_job), `rules` (the cloud-neutral rules and helpers the backends use).
"""

from components.spec.base import ConfigError, Spec
from components.spec.job import (
    JobCheckpoint,
    JobResources,
    JobSpec,
    JobVolume,
    NodeRange,
    check_job,
)
from components.spec.platform import (
    APPLICATION_XIDS,
    AgentImagesSpec,
    Capacity,
    ClusterSpec,
    GpuDiagnosticSpec,
    GpuHealthSpec,
    GpuOperatorSpec,
    IdleSpec,
    MigSpec,
    NetworkSpec,
    NodePoolSpec,
    ObservabilitySpec,
    PlatformSpec,
    PodsReadySpec,
    PriceOverride,
    PricingSpec,
    QuarantineSpec,
    QueueingSpec,
    StorageSpec,
    StragglerSpec,
    Taint,
    TeamSpec,
    TimeSlicingSpec,
    machine_of,
)
from components.spec.rules import check_platform

__all__ = [
    "APPLICATION_XIDS",
    "AgentImagesSpec",
    "Capacity",
    "ClusterSpec",
    "ConfigError",
    "GpuDiagnosticSpec",
    "GpuHealthSpec",
    "GpuOperatorSpec",
    "IdleSpec",
    "JobCheckpoint",
    "JobResources",
    "JobSpec",
    "JobVolume",
    "MigSpec",
    "NetworkSpec",
    "NodePoolSpec",
    "NodeRange",
    "ObservabilitySpec",
    "PlatformSpec",
    "PodsReadySpec",
    "PriceOverride",
    "PricingSpec",
    "QuarantineSpec",
    "QueueingSpec",
    "Spec",
    "StorageSpec",
    "StragglerSpec",
    "Taint",
    "TeamSpec",
    "TimeSlicingSpec",
    "check_job",
    "check_platform",
    "machine_of",
]
