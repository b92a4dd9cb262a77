"""The only metric names dashboards and alert rules may use (a test parses every PromQL selector).

Trainer metrics are exported by trainer/ (documented in docs/trainer.md); labels job, namespace, pod and
node_rank come from the PodMonitor. DCGM metrics come from the GPU operator's DCGM exporter, which
collects exactly DCGM_EXPORTER_FIELDS (sent as its metrics ConfigMap), kube_* from kube-state-metrics
(kube-prometheus-stack).
"""

from __future__ import annotations

from components.incluster.cost_rules import recorded
from components.incluster.goodput_rules import RECORDED
from components.incluster.idle_rules import RECORDED as IDLE_RECORDED
from contract.recovery import PHASE_SECONDS, STEPS_REDONE

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
        # Issue 14: per-rank compute time of the last step (label rank = global rank), hang and
        # checkpoint-failure counters. Names fixed with the trainer; see AWAITING_TRAINER.
        "trainplane_rank_step_seconds",
        "trainplane_hangs_total",
        "trainplane_checkpoint_save_failures_total",
        "trainplane_checkpoint_load_failures_total",
        # Issue 19: goodput (trainer/goodput.py) and the GPUs of a job (one process per GPU).
        PHASE_SECONDS,
        STEPS_REDONE,
        "trainplane_world_size",
    }
)
# Names the trainer branch of issue 14 adds to trainer/metrics.py; until it is merged the contract test
# (tests/unit/components/incluster/test_metric_contract.py) skips them with this reason instead of failing.
AWAITING_TRAINER = frozenset(
    {"trainplane_rank_step_seconds", "trainplane_hangs_total", "trainplane_checkpoint_load_failures_total"}
)

# What dcgm-exporter collects: (Prometheus type, help). gpu-operator v26.7.0 points the exporter at
# /etc/dcgm-exporter/dcp-metrics-included.csv unless dcgmExporter.config names a ConfigMap (state-dcgm-exporter
# DaemonSet asset, TransformDCGMExporter); a ConfigMap replaces that list, so it starts with the whole
# default list (dcgm-exporter 4.5.3-4.8.2 etc/dcp-metrics-included.csv) and adds the health fields below.
# The exporter refuses to start on a name DCGM does not know (counters.ExtractCounters -> dcgm.GetFieldID),
# so every added name was checked against go-dcgm const_fields.go at the version the exporter pins
# (ec245c09fe3e); the field ids are given.
DCGM_DEFAULT_FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "Memory temperature (in C)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "Total energy consumption since boot (in mJ)."),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("counter", "Total number of PCIe retries."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %)."),
    "DCGM_FI_DEV_ENC_UTIL": ("gauge", "Encoder utilization (in %)."),
    "DCGM_FI_DEV_DEC_UTIL": ("gauge", "Decoder utilization (in %)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB)."),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
    ),
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": ("gauge", "vGPU License status"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("counter", "Number of remapped rows for correctable errors"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "Whether remapping of rows has failed"),
    "DCGM_FI_DRIVER_VERSION": ("label", "Driver Version"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", "Ratio of cycles the device memory interface is active."),
    "DCGM_FI_PROF_PCIE_TX_BYTES": (
        "gauge",
        "Rate of data transmitted over the PCIe bus in bytes per second.",
    ),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gauge", "Rate of data received over the PCIe bus in bytes per second."),
}
DCGM_HEALTH_FIELDS: dict[str, tuple[str, str]] = {
    # 311, 310: ECC double- and single-bit errors since the driver loaded.
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Double-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("counter", "Single-bit volatile ECC errors."),
    # 396: a row remap waits for a GPU reset.
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("gauge", "Whether remapping of rows is pending a GPU reset."),
    # 409, 419, 429, 439: NVLink error counters summed over all links.
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("counter", "NVLink flow-control CRC errors."),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("counter", "NVLink data CRC errors."),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("counter", "NVLink retries."),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("counter", "NVLink recovery errors."),
    # 112: bitmask of current clock event (throttle) reasons; CLOCK_THROTTLE_REASONS is its legacy alias.
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("gauge", "Current clock event reasons (bitmask)."),
    # Not a DCGM field: the exporter's own count of each XID's events in its window (label `xid`;
    # counters.IdentifyMetricType, collector/xid_collector.go). It goes down as the window moves on, so a
    # gauge; the health controller's XID signal (contract.recovery.XID_QUERY) reads it.
    "DCGM_EXP_XID_ERRORS_COUNT": ("gauge", "Count of XID errors in the last window per XID."),
}
DCGM_EXPORTER_FIELDS = {**DCGM_DEFAULT_FIELDS, **DCGM_HEALTH_FIELDS}

# Label-type fields become labels of the other series, not series of their own.
DCGM_METRICS = frozenset(name for name, (kind, _) in DCGM_EXPORTER_FIELDS.items() if kind != "label")

KUBE_STATE_METRICS = frozenset(
    {
        "kube_node_status_condition",
        "kube_node_status_capacity",
        "kube_node_status_allocatable",
        "kube_node_spec_taint",
    }
)

# Series trainplane's own recording rules produce (components/incluster/goodput_rules.py, cost_rules.py,
# idle_rules.py).
RECORDED_METRICS = frozenset(RECORDED) | recorded() | frozenset(IDLE_RECORDED)

ALLOWED_METRICS = TRAINER_METRICS | DCGM_METRICS | KUBE_STATE_METRICS | RECORDED_METRICS


def dcgm_exporter_csv() -> str:
    """The exporter's metrics file (`dcgm-metrics.csv`): one `field, type, help` line per field."""
    return (
        "\n".join(f"{name}, {kind}, {help_}" for name, (kind, help_) in DCGM_EXPORTER_FIELDS.items()) + "\n"
    )
