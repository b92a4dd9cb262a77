"""The only metric names dashboards and alert rules may use (a test parses every PromQL selector).

Trainer metrics are exported by trainer/ (documented in docs/trainer.md); labels job, namespace, pod and
rank come from the PodMonitor. DCGM metrics come from the GPU operator's DCGM exporter, kube_* from
kube-state-metrics (kube-prometheus-stack).
"""

from __future__ import annotations

TRAINER_METRICS = frozenset(
    {
        "trainplane_step",
        "trainplane_loss",
        "trainplane_tokens_per_second",
        "trainplane_step_seconds",
        "trainplane_checkpoint_save_seconds",
        "trainplane_checkpoint_save_bytes",
        "trainplane_restarts",
        "trainplane_resumes",
        "trainplane_preemptions",
        "trainplane_mfu_ratio",
    }
)

DCGM_METRICS = frozenset(
    {
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
    }
)

KUBE_STATE_METRICS = frozenset({"kube_node_status_condition", "kube_node_status_capacity"})

ALLOWED_METRICS = TRAINER_METRICS | DCGM_METRICS | KUBE_STATE_METRICS
