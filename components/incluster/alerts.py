"""Prometheus alert rules for GPU platforms. Metric names come from dashboards/metrics.py only.

Labels the rules rely on, as the scrape produces them
(tests/integration/components/incluster/test_dcgm_scrape.py scrapes a fake exporter with the same
configuration through a real Prometheus):
- DCGM series (gpu-operator's ServiceMonitor with honorLabels and gpu_operator.DCGM_RELABELINGS): `node`
  (the exporter pod's node), `gpu`, `UUID`, `modelName`, ...; `pod`, `namespace`, `container` only while a
  pod holds the GPU (dcgm-exporter's Kubernetes mapping), never the exporter's own.
- kube-state-metrics: `node`, and `resource="nvidia_com_gpu"` for extended resources.
- trainer series (the job's PodMonitor): `namespace`, `pod`, `job`, `node_rank`, `node` (the pod's node),
  and `rank` (global rank) on trainplane_rank_step_seconds.

The goodput and straggler recording rules and the recovery loop's alerts are goodput_rules.py's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from components.incluster.goodput_rules import recovery_groups
from components.spec import APPLICATION_XIDS, GpuHealthSpec
from contract.recovery import DIAGNOSTIC_TAINT

GPU = 'resource="nvidia_com_gpu"'
# NVML clock event reason bits (nvml.h; go-nvml const.go): HW slowdown 0x8, SW thermal 0x20,
# HW thermal 0x40, HW power brake 0x80. SW power capping (0x4) is normal under full load and not alerted.
THERMAL_BITS = (32, 64)
HW_SLOWDOWN_BITS = (8, 128)


def _rule(alert: str, expr: str, duration: str, severity: str, summary: str) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity, "platform": "trainplane"},
        "annotations": {"summary": summary},
    }


def _bit_set(metric: str, bits: Iterable[int], by: str) -> str:
    """Series of `metric` (a bitmask) with any of `bits` set; PromQL has no bitwise operators."""
    return " or ".join(f"max by ({by}) (floor({metric} / {b}) % 2 == 1)" for b in bits)


def _rose(metric: str, by: str, window: str) -> str:
    """`metric` (a counter) rose within `window`, also when the series is new or restarted.

    increase() alone misses a counter that first appears already at 1 (a pod that starts counting from a
    persisted value, or is scraped once before it exits), so the highest value seen in the window is
    compared with the value before it, and a series that did not exist before counts when above zero.
    """
    now = f"max by ({by}) (max_over_time({metric}[{window}]))"
    before = f"max by ({by}) ({metric} offset {window})"
    return f"({now} > {before}) or ({now} > 0 unless {before})"


def _not_in(values: Iterable[int]) -> str:
    return "".join(f" != {v}" for v in sorted(set(values)))


def gpu_rules(ignored_xids: Iterable[int]) -> list[dict[str, Any]]:
    return [
        # dcgm-exporter sets `pod` only while a pod holds the GPU (kubelet pod-resources mapping).
        _rule(
            "GpuIdleButAllocated",
            'avg by (namespace, pod, node, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{pod!=""}[30m])) < 5',
            "30m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} is allocated to "
            "{{ $labels.namespace }}/{{ $labels.pod }} but under 5% busy for 30 minutes",
        ),
        # The gauge holds the GPU's last XID. Application XIDs (the device plugin's list) leave the GPU
        # healthy; any other needs a reset or a repair, so the alert holds until the GPU is reset.
        _rule(
            "GpuXidError",
            f"max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0{_not_in(ignored_xids)}",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }}",
        ),
        _rule(
            "GpuEccUncorrectableErrors",
            "max by (node, gpu) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL) > 0",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} has {{ $value }} uncorrectable ECC errors since its "
            "driver loaded",
        ),
        _rule(
            "GpuRowRemapFailure",
            "max by (node, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} failed to remap a memory row: replace the GPU",
        ),
        _rule(
            "GpuRowRemapPending",
            "max by (node, gpu) (DCGM_FI_DEV_ROW_REMAP_PENDING) > 0 "
            "or max by (node, gpu) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[1h])) > 0",
            "0m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} remapped rows for uncorrectable errors: reset it",
        ),
        # DCGM's NVLink health watch counts a recovery error as a failure, CRC and replay errors as wear.
        _rule(
            "GpuNvlinkRecoveryErrors",
            "max by (node, gpu) (increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL[10m])) > 0",
            "0m",
            "critical",
            "NVLink of GPU {{ $labels.gpu }} on {{ $labels.node }} needed recovery",
        ),
        _rule(
            "GpuNvlinkErrors",
            "sum by (node, gpu) (increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[10m])) "
            "+ sum by (node, gpu) (increase(DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL[10m])) "
            "+ sum by (node, gpu) (increase(DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL[10m])) > 100",
            "15m",
            "warning",
            "NVLink of GPU {{ $labels.gpu }} on {{ $labels.node }} logs {{ $value }} CRC/replay errors per "
            "10 minutes",
        ),
        _rule(
            "GpuThermalThrottling",
            _bit_set("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", THERMAL_BITS, "node, gpu"),
            "10m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} has been slowed down for heat for 10 minutes",
        ),
        _rule(
            "GpuHardwareSlowdown",
            _bit_set("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", HW_SLOWDOWN_BITS, "node, gpu"),
            "5m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} runs at reduced clocks (hardware slowdown or power "
            "brake) for 5 minutes",
        ),
    ]


def node_rules() -> list[dict[str, Any]]:
    return [
        _rule(
            "GpuNodeNotReady",
            'kube_node_status_condition{condition="Ready", status="true"} == 0 '
            f"and on (node) kube_node_status_capacity{{{GPU}}} > 0",
            "5m",
            "critical",
            "GPU node {{ $labels.node }} has been NotReady for 5 minutes",
        ),
        # The device plugin withdraws a GPU it found unhealthy (XID) from allocatable.
        _rule(
            "GpuNodeMissingGpus",
            f"kube_node_status_allocatable{{{GPU}}} < on (node) kube_node_status_capacity{{{GPU}}}",
            "5m",
            "critical",
            "GPU node {{ $labels.node }} offers only {{ $value }} of its GPUs",
        ),
        # A quarantine (the unhealthy taint) pages through TrainplaneGpuNodeQuarantined, on the node condition
        # the controller sets with it (goodput_rules.py): one alert per quarantine, not two.
        _rule(
            "GpuNodeDiagnosticPending",
            f'max by (node) (kube_node_spec_taint{{key="{DIAGNOSTIC_TAINT}"}}) > 0',
            "30m",
            "warning",
            "GPU node {{ $labels.node }} has waited 30 minutes for its DCGM diagnostic",
        ),
    ]


def training_rules() -> list[dict[str, Any]]:
    # The straggler alert is goodput_rules.ALERT_STRAGGLER (factor and duration from gpuHealth.stragglers).
    return [
        # Only a job that already existed 15 minutes ago: a new one loading data or its checkpoint
        # shows no change in a window shorter than 15 minutes and is not stalled.
        _rule(
            "TrainingJobStalled",
            "max by (namespace, job) (changes(trainplane_step[15m])) == 0 "
            "and max by (namespace, job) (trainplane_step offset 15m)",
            "5m",
            "warning",
            "Training job {{ $labels.namespace }}/{{ $labels.job }} has made no step in 20 minutes",
        ),
        _rule(
            "TrainingJobHang",
            _rose("trainplane_hangs_total", "namespace, job", "30m"),
            "0m",
            "critical",
            "Training job {{ $labels.namespace }}/{{ $labels.job }} hung: a rank made no step for its "
            "watchdog's limit and the job restarts from its last checkpoint",
        ),
        _rule(
            "TrainingCheckpointSaveFailures",
            _rose("trainplane_checkpoint_save_failures_total", "namespace, job", "30m"),
            "0m",
            "warning",
            "Training job {{ $labels.namespace }}/{{ $labels.job }} failed to save a checkpoint",
        ),
    ]


def alert_groups(
    ignored_xids: Iterable[int] = APPLICATION_XIDS, gpu_health: GpuHealthSpec | None = None
) -> list[dict[str, Any]]:
    """The PrometheusRule's groups: alerts, then goodput/straggler recording rules and recovery alerts
    (gpuHealth.stragglers and .quarantine set their thresholds; the spec's defaults without one)."""
    return [
        {"name": "trainplane.gpu", "rules": gpu_rules(ignored_xids) + node_rules()},
        {"name": "trainplane.training", "rules": training_rules()},
        *recovery_groups(gpu_health or GpuHealthSpec()),
    ]
