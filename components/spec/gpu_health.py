"""The platform's GPU node health models (`platform.gpuHealth`, components/incluster/gpu_health.py): the
node-start diagnostic, stragglers, quarantine and the health controller. Re-exported by
components.spec.platform, where the platform spec uses them.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from components.spec.base import Spec

# XIDs the NVIDIA device plugin (v0.20.0, internal/rm/health.go) treats as application errors that leave
# the GPU healthy; the health controller and the XID alert ignore them the same way.
APPLICATION_XIDS = (13, 31, 43, 45, 68, 109)


class GpuDiagnosticSpec(Spec):
    enabled: bool = True
    # dcgmi diag suite: 1 quick (seconds), 2 medium (about 2 minutes), 3 long (about 15 minutes).
    level: int = Field(default=1, ge=1, le=3)


class StragglerSpec(Spec):
    """When a rank is a straggler: its own compute time per step (trainplane_rank_step_seconds) above
    `factor` times the median of its job's ranks for `forMinutes` in a row."""

    factor: float = Field(default=1.25, gt=1.0, le=10.0)
    for_minutes: int = Field(default=15, ge=5, le=1440)


class QuarantineSpec(Spec):
    """What the GPU health controller does with a node it finds faulty, besides the NoSchedule taint."""

    # Cordon the node and evict the pods that request GPUs (other pods stay: DaemonSets, system pods).
    evict_gpu_pods: bool = True
    # Run the node diagnostic again on a quarantined node; a pass returns the node to service.
    rediagnose: bool = True
    # A node still failing this long after quarantine is handed to replacement where its pool has one
    # (see components/incluster/gpu_health.py); elsewhere it stays quarantined with a Warning Event and
    # an alert, never silently.
    replace_after_minutes: int = Field(default=30, ge=5, le=1440)


class GpuHealthSpec(Spec):
    enabled: bool = True
    diagnostic: GpuDiagnosticSpec = GpuDiagnosticSpec()
    # A new GPU node may take this long to advertise its GPUs before the missing ones count as a fault.
    startup_grace_minutes: int = Field(default=20, ge=5, le=240)
    ignored_xids: list[int] = Field(default_factory=lambda: list(APPLICATION_XIDS))
    stragglers: StragglerSpec = StragglerSpec()
    quarantine: QuarantineSpec = QuarantineSpec()
    # Moved to `images.gpuHealthController` (one place for every agent's image, pinned by digest).
    controller_image: str | None = None

    @field_validator("controller_image")
    @classmethod
    def _moved(cls, v: str | None) -> str | None:
        if v is not None:
            raise ValueError(
                "moved to images.gpuHealthController (pinned by digest, <repository>@sha256:<64 hex digits>)"
            )
        return v
