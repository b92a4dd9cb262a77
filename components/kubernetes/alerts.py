"""Prometheus alert rules for GPU platforms: idle-but-allocated GPUs, XID errors, stalled training jobs
and GPU nodes that are NotReady. Metric names come from dashboards/metrics.py only."""

from __future__ import annotations

from typing import Any


def _rule(alert: str, expr: str, duration: str, severity: str, summary: str) -> dict[str, Any]:
    return {
        "alert": alert,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity, "platform": "trainplane"},
        "annotations": {"summary": summary},
    }


def alert_groups() -> list[dict[str, Any]]:
    return [
        {
            "name": "trainplane.gpu",
            "rules": [
                # DCGM sets `pod` only while a GPU is allocated to a pod (kubelet pod-resources mapping).
                _rule(
                    "GpuIdleButAllocated",
                    "avg by (namespace, pod, Hostname, gpu) "
                    '(avg_over_time(DCGM_FI_DEV_GPU_UTIL{pod!=""}[30m])) < 5',
                    "30m",
                    "warning",
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is allocated to "
                    "{{ $labels.namespace }}/{{ $labels.pod }} but under 5% busy for 30 minutes",
                ),
                # The gauge holds the last XID seen; any non-zero value is a driver-reported GPU error.
                _rule(
                    "GpuXidError",
                    "max by (Hostname, gpu, pod) (max_over_time(DCGM_FI_DEV_XID_ERRORS[5m])) > 0",
                    "0m",
                    "critical",
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}",
                ),
                _rule(
                    "GpuNodeNotReady",
                    'kube_node_status_condition{condition="Ready", status="true"} == 0 '
                    'and on (node) kube_node_status_capacity{resource="nvidia_com_gpu"} > 0',
                    "5m",
                    "critical",
                    "GPU node {{ $labels.node }} has been NotReady for 5 minutes",
                ),
            ],
        },
        {
            "name": "trainplane.training",
            "rules": [
                _rule(
                    "TrainingJobStalled",
                    "max by (namespace, job) (changes(trainplane_step[15m])) == 0",
                    "5m",
                    "warning",
                    "Training job {{ $labels.namespace }}/{{ $labels.job }} has made no step in 20 minutes",
                ),
            ],
        },
    ]
