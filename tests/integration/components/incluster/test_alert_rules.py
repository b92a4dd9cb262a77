"""Every alert rule, run by `promtool test rules` on synthetic series: it fires on the faulty series and
stays silent on healthy ones.

Series labels are what the scrape stores (tests/helpers/scrape.py: target relabelings and honor_labels of the
DCGM ServiceMonitor and the training PodMonitor, checked against a real Prometheus in
test_dcgm_scrape.py). Expected annotations are rendered from the rule's summary with the alert's labels,
so a summary naming a label the series lack fails too.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field

import pytest
import yaml

from components.incluster.alerts import alert_groups
from contract.recovery import (
    ALERT_QUARANTINED,
    ALERT_REPLACE_NEEDED,
    ALERT_STRAGGLER,
    QUARANTINE_CONDITION,
)
from controllers.gpu_health_agent import PENDING_TAINT
from tests.helpers import procs
from tests.helpers.scrape import NODE, dcgm_series, gpu, selector, trainer_node, trainer_series

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not on PATH (CI installs Debian's prometheus)"
)
# Alerts only: the recording rules have their own promtool tests (test_goodput_rules.py).
RULES = {r["alert"]: r for g in alert_groups() for r in g["rules"] if "alert" in r}
STATIC = {"severity", "platform"}

# kube-state-metrics as kube-prometheus-stack scrapes it (its ServiceMonitor honours the metric labels).
KSM_TARGET = {
    "job": "kube-state-metrics",
    "instance": "10.0.0.12:8080",
    "namespace": "monitoring",
    "service": "kube-prometheus-stack-kube-state-metrics",
    "pod": "kube-prometheus-stack-kube-state-metrics-6d9f",
    "container": "kube-state-metrics",
    "endpoint": "http",
}


def ksm(name: str, **labels: str) -> str:
    return selector(name, {**KSM_TARGET, **labels})


def dcgm(name: str, index: int, allocated: bool = False) -> str:
    return selector(name, dcgm_series(gpu(index, allocated)))


def trainer(name: str, job: str, index: int = 0, pod: str | None = None, **labels: str) -> str:
    series = trainer_series(labels, job=job, index=index)
    if pod:
        series["pod"] = pod
    return selector(name, series)


@dataclass
class Case:
    alert: str
    series: dict[str, str]  # selector -> promtool values
    # eval time -> expected alerts: labels (without the rule's static ones) and "$value" when rendered
    expect: dict[str, list[dict[str, str]]]
    interval: str = "1m"
    # labels of the firing alerts, checked against the summary's references
    seen: list[dict[str, str]] = field(default_factory=list)


def go_value(value: str) -> str:
    """Go's %v of a float64 (Prometheus renders $value so): 79 -> 79, 1.5 -> 1.5."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def render(template: str, labels: dict[str, str], value: str | None) -> str:
    def sub(m: re.Match) -> str:
        ref = m.group(1)
        if ref == "$value":
            assert value is not None, f"{template!r} renders $value: give the expected value"
            return go_value(value)
        name = ref.removeprefix("$labels.")
        assert name in labels, f"summary reads label {name!r} the alert does not have: {sorted(labels)}"
        return labels[name]

    return re.sub(r"\{\{\s*(\$value|\$labels\.\w+)\s*\}\}", sub, template)


def expected_alert(alert: str, want: dict[str, str]) -> dict:
    rule = RULES[alert]
    value = want.get("$value")
    labels = {k: v for k, v in want.items() if k != "$value"}
    full = {**labels, **rule["labels"]}
    annotations = {k: render(v, full, value) for k, v in rule["annotations"].items()}
    return {"exp_labels": full, "exp_annotations": annotations}


GPU0 = {"node": NODE, "gpu": "0"}
GPU1 = {"node": NODE, "gpu": "1"}
GPU2 = {"node": NODE, "gpu": "2"}

CASES = [
    Case(
        "GpuIdleButAllocated",
        {
            dcgm("DCGM_FI_DEV_GPU_UTIL", 0, allocated=True): "2x90",
            # Held by the same pod and busy.
            dcgm("DCGM_FI_DEV_GPU_UTIL", 2, allocated=True): "95x90",
            # Idle but held by no pod: no workload labels, so never "allocated".
            dcgm("DCGM_FI_DEV_GPU_UTIL", 1): "0x90",
        },
        {
            "20m": [],
            "45m": [{"namespace": "research", "pod": "gpt-small-0-x2v9q", **GPU0}],
        },
    ),
    Case(
        "GpuXidError",
        {
            dcgm("DCGM_FI_DEV_XID_ERRORS", 0, allocated=True): "0 0 0 79 79 79 79",
            dcgm("DCGM_FI_DEV_XID_ERRORS", 1): "13x6",  # an application error: the GPU is fine
            dcgm("DCGM_FI_DEV_XID_ERRORS", 2): "0x6",
        },
        {"1m": [], "5m": [{**GPU0, "$value": "79"}]},
    ),
    Case(
        "GpuEccUncorrectableErrors",
        {
            dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0): "0 0 2 2 2",
            dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1): "0x4",
        },
        {"1m": [], "3m": [{**GPU0, "$value": "2"}]},
    ),
    Case(
        "GpuRowRemapFailure",
        {
            dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0): "0 1 1",
            dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1): "0x2",
        },
        {"0m": [], "2m": [GPU0]},
    ),
    Case(
        "GpuRowRemapPending",
        {
            dcgm("DCGM_FI_DEV_ROW_REMAP_PENDING", 0): "0 0 1 1 1",
            dcgm("DCGM_FI_DEV_ROW_REMAP_PENDING", 1): "0x4",
            dcgm("DCGM_FI_DEV_ROW_REMAP_PENDING", 2): "0x4",
            dcgm("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1): "0 0 0 1 1",
            # Rows remapped long ago (and applied): no new remap.
            dcgm("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 2): "3x4",
        },
        {"1m": [], "4m": [GPU0, GPU1]},
    ),
    Case(
        "GpuNvlinkRecoveryErrors",
        {
            dcgm("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 0): "0 0 0 1 1 1",
            dcgm("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 1): "5x5",  # old errors only
        },
        {"2m": [], "4m": [GPU0]},
    ),
    Case(
        "GpuNvlinkErrors",
        {
            dcgm("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 0): "0+20x40",
            dcgm("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 0): "0x40",
            dcgm("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 0): "0x40",
            dcgm("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 1): "0+1x40",
            dcgm("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 1): "0x40",
            dcgm("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 1): "0x40",
        },
        {"15m": [], "30m": [{**GPU0, "$value": "200"}]},
    ),
    Case(
        "GpuThermalThrottling",
        {
            dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 0): "32x20",  # SW thermal slowdown
            dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 2): "68x20",  # HW thermal + SW power cap
            dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1): "4x20",  # SW power cap only: normal at full load
        },
        {"5m": [], "15m": [GPU0, GPU2]},
    ),
    Case(
        "GpuHardwareSlowdown",
        {
            dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 0): "8x10",  # HW slowdown
            dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 2): "129x10",  # HW power brake while idle
            dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1): "1x10",  # idle
        },
        {"2m": [], "6m": [GPU0, GPU2]},
    ),
    Case(
        "GpuNodeNotReady",
        {
            ksm("kube_node_status_condition", node=NODE, condition="Ready", status="true"): "0x10",
            ksm("kube_node_status_capacity", node=NODE, resource="nvidia_com_gpu", unit="integer"): "8x10",
            # A CPU node that is NotReady is not this alert's business.
            ksm("kube_node_status_condition", node="cpu-node", condition="Ready", status="true"): "0x10",
        },
        {
            "2m": [],
            "7m": [{**KSM_TARGET, "node": NODE, "condition": "Ready", "status": "true"}],
        },
    ),
    Case(
        "GpuNodeMissingGpus",
        {
            ksm("kube_node_status_allocatable", node=NODE, resource="nvidia_com_gpu", unit="integer"): "7x10",
            ksm("kube_node_status_capacity", node=NODE, resource="nvidia_com_gpu", unit="integer"): "8x10",
            ksm(
                "kube_node_status_allocatable", node="gpu-node-b", resource="nvidia_com_gpu", unit="integer"
            ): "8x10",
            ksm(
                "kube_node_status_capacity", node="gpu-node-b", resource="nvidia_com_gpu", unit="integer"
            ): "8x10",
        },
        {"2m": [], "6m": [{"node": NODE, "$value": "7"}]},
    ),
    Case(
        "GpuNodeDiagnosticPending",
        {
            ksm(
                "kube_node_spec_taint", node=NODE, key=PENDING_TAINT, value="pending", effect="NoSchedule"
            ): "1x40",
            # A node whose diagnostic passed after 10 minutes.
            ksm(
                "kube_node_spec_taint",
                node="gpu-node-b",
                key=PENDING_TAINT,
                value="pending",
                effect="NoSchedule",
            ): "1x10",
        },
        {"20m": [], "35m": [{"node": NODE}]},
    ),
    Case(
        ALERT_QUARANTINED,
        {
            # the GPU health controller's node condition, as kube-state-metrics exports it (one series
            # per status; the true one is 1)
            ksm(
                "kube_node_status_condition", node=NODE, condition=QUARANTINE_CONDITION, status="true"
            ): "0 1x5",
            ksm(
                "kube_node_status_condition", node=NODE, condition=QUARANTINE_CONDITION, status="false"
            ): "1 0x5",
            ksm(
                "kube_node_status_condition", node="gpu-node-b", condition=QUARANTINE_CONDITION, status="true"
            ): "0x5",
            ksm(
                "kube_node_status_condition",
                node="gpu-node-b",
                condition=QUARANTINE_CONDITION,
                status="false",
            ): "1x5",
            # another condition that is true is not a quarantine
            ksm("kube_node_status_condition", node="gpu-node-b", condition="Ready", status="true"): "1x5",
        },
        {"0m": [], "2m": [{"node": NODE}]},
    ),
    Case(
        ALERT_REPLACE_NEEDED,
        {
            # quarantined for the whole 60 minutes: past replaceAfterMinutes (30) + 15 of grace
            ksm(
                "kube_node_status_condition", node=NODE, condition=QUARANTINE_CONDITION, status="true"
            ): "1x60",
            # quarantined for 20 minutes, then returned by a passing diagnostic
            ksm(
                "kube_node_status_condition", node="gpu-node-b", condition=QUARANTINE_CONDITION, status="true"
            ): ("1x20 0x40"),
        },
        {"44m": [], "46m": [{"node": NODE}]},
    ),
    Case(
        "TrainingJobStalled",
        {
            trainer("trainplane_step", "gpt-small"): "100x30",
            trainer("trainplane_step", "llama"): "0+1x30",
        },
        # 10m: gpt-small is 10 minutes old, still starting; 25m: no step for 25 minutes.
        {"10m": [], "19m": [], "25m": [{"namespace": "research", "job": "gpt-small"}]},
    ),
    Case(
        ALERT_STRAGGLER,
        {
            # gpt-small: 2 pods x 2 GPUs, each pod exports its node's ranks. Rank 3 computes 1.5 s a step,
            # the median of (1, 1, 1.25, 1.5) is 1.125: 1.5 / 1.125 = 1.33 > 1.25 (gpuHealth.stragglers
            # default factor), for the default 15 minutes.
            trainer("trainplane_rank_step_seconds", "gpt-small", 0, rank="0"): "1x30",
            trainer("trainplane_rank_step_seconds", "gpt-small", 0, rank="1"): "1x30",
            trainer("trainplane_rank_step_seconds", "gpt-small", 1, rank="2"): "1.25x30",
            trainer("trainplane_rank_step_seconds", "gpt-small", 1, rank="3"): "1.5x30",
            # llama: 1.125 / 1.0625 = 1.06, within the factor.
            trainer("trainplane_rank_step_seconds", "llama", 0, rank="0"): "1x30",
            trainer("trainplane_rank_step_seconds", "llama", 0, rank="1"): "1.125x30",
            # bert: rank 1 takes twice as long for 5 minutes only (ratio 1.33 while the smoothing window
            # holds those steps, under 15 minutes in all).
            trainer("trainplane_rank_step_seconds", "bert", 0, rank="0"): "1x30",
            trainer("trainplane_rank_step_seconds", "bert", 0, rank="1"): "1x4 2x4 1x21",
        },
        {
            "10m": [],
            # pending from 0m (the ratio needs one sample), fires once 15 minutes have passed
            "16m": [
                {
                    "namespace": "research",
                    "job": "gpt-small",
                    "rank": "3",
                    "node": trainer_node(1),
                    "$value": str(1.5 / 1.125),
                }
            ],
        },
    ),
    Case(
        "TrainingJobHang",
        {
            # gpt-small: the counter (kept across restarts) goes 0 -> 1 at minute 3.
            trainer("trainplane_hangs_total", "gpt-small"): "0 0 0 1x60",
            # llama: the pod that hung is gone; its successor's series starts at 1.
            trainer("trainplane_hangs_total", "llama", pod="llama-0-old"): "0 0 0 stale",
            trainer("trainplane_hangs_total", "llama", pod="llama-0-new"): "_x4 1x60",
            # bert: a series that is already at 1 when first seen counts (a job just resumed after a
            # hang); 30 minutes later it is old news.
            trainer("trainplane_hangs_total", "bert"): "1x70",
            # opt: a counter that starts from 0 in every process, scraped once at 1 before the exit.
            trainer("trainplane_hangs_total", "opt"): "0x35 1 0x40",
        },
        {
            "5m": [
                {"namespace": "research", "job": "bert"},
                {"namespace": "research", "job": "gpt-small"},
                {"namespace": "research", "job": "llama"},
            ],
            "40m": [{"namespace": "research", "job": "opt"}],
            "70m": [],
        },
    ),
    Case(
        "TrainingCheckpointSaveFailures",
        {
            trainer("trainplane_checkpoint_save_failures_total", "gpt-small"): "0 0 2 2 2",
            trainer("trainplane_checkpoint_save_failures_total", "llama"): "0x4",
        },
        {"1m": [], "4m": [{"namespace": "research", "job": "gpt-small"}]},
    ),
]


def test_every_rule_has_a_case():
    assert {c.alert for c in CASES} == set(RULES)


def test_every_case_has_faulty_and_healthy_series():
    for case in CASES:
        firing = max(len(v) for v in case.expect.values())
        # Something fires, and some series (or some time) stays silent.
        assert firing > 0 and (len(case.series) > firing or min(len(v) for v in case.expect.values()) == 0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.alert)
def test_rule_with_promtool(case, tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": alert_groups()}))
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": case.interval,
                "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": case.alert,
                        "exp_alerts": [expected_alert(case.alert, w) for w in wanted],
                    }
                    for at, wanted in case.expect.items()
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    run = procs.run(
        [PROMTOOL, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
