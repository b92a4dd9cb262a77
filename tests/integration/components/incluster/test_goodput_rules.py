"""The goodput and straggler recording rules, run by `promtool test rules` on synthetic trainer series.

The rules are rendered from the real PrometheusRule groups (components/incluster/alerts.alert_groups) and
the series carry the labels the training PodMonitor gives them (tests/helpers/scrape.py). Every expected
value is worked out below by hand, with Prometheus' arithmetic where it matters: increase() extrapolates a
series that ends inside its window by half the interval between samples (promql/functions.go
extrapolatedRate), and the expected numbers repeat its float operations so they compare exactly.
"""

from __future__ import annotations

import shutil

import pytest
import yaml

from components.incluster.alerts import alert_groups
from components.incluster.goodput_rules import JOB_ALLOCATION_SECONDS, JOB_GPUS, JOB_PHASE_SECONDS
from contract.recovery import (
    BADPUT_SECONDS,
    GOODPUT_RATIO,
    GOODPUT_TEAM_RATIO,
    PHASE_SECONDS,
    PHASES,
    STRAGGLER_RATIO,
)
from tests.helpers import procs
from tests.helpers.scrape import selector, trainer_node, trainer_series

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not on PATH (CI installs Debian's prometheus)"
)
NS = "research"


def series(name: str, job: str, index: int, pod: str, **labels: str) -> str:
    s = trainer_series(labels, job=job, index=index)
    s["pod"] = pod
    return selector(name, s)


def phases(job: str, index: int, pod: str, values: dict[str, str], default: str) -> dict[str, str]:
    """One process's phase counters: `values` by phase, `default` for the others."""
    return {series(PHASE_SECONDS, job, index, pod, phase=p): values.get(p, default) for p in PHASES}


# ---- the scripted hour (interval 1m, evaluated at 60m: the window [0m, 60m]) -------------------------
# gpt-small: 2 nodes x 8 GPUs (node ranks 0 and 1 have identical timelines).
#   attempt A, pods a0/a1, started at 0m: 1 minute of start-up, then steps; the node fails after 20m
#     (its series go stale).
#   10 minutes down (rescheduled onto a new node): no process, no series.
#   attempt B, pods b0/b1, started at 30m: 1 minute of checkpoint load, 2 minutes redoing the steps A did
#     after its last checkpoint, then steps to 60m.
# llama: 1 node x 8 GPUs, steps the whole hour.
A_END = "stale"
SERIES: dict[str, str] = {}
for idx in (0, 1):
    SERIES |= phases(
        "gpt-small",
        idx,
        f"gpt-small-workers-0-{idx}-aaaaa",
        {"startup": f"0 60x19 {A_END}", "step": f"0 0 60+60x18 {A_END}"},
        f"0x20 {A_END}",
    )
    SERIES |= phases(
        "gpt-small",
        idx,
        f"gpt-small-workers-0-{idx}-bbbbb",
        {"checkpoint_load": "_x30 0 60x29", "redone": "_x30 0 0 60 120x27", "step": "_x30 0 0 0 0 60+60x26"},
        "_x30 0x30",
    )
    SERIES[series("trainplane_world_size", "gpt-small", idx, f"gpt-small-workers-0-{idx}-aaaaa")] = (
        "16x20 stale"
    )
    SERIES[series("trainplane_world_size", "gpt-small", idx, f"gpt-small-workers-0-{idx}-bbbbb")] = (
        "_x30 16x30"
    )
SERIES |= phases("llama", 0, "llama-workers-0-0-ccccc", {"step": "0+60x60"}, "0x60")
SERIES[series("trainplane_world_size", "llama", 0, "llama-workers-0-0-ccccc")] = "8x60"

# Attempt A's counters: 21 samples over 0m..20m (sampled interval 1200 s, 60 s apart), first value 0 (no
# extrapolation before it), the window ends 40m after the last one: extrapolated by 30 s at the end.
A_SCALE = (1200 + 30) / 1200
A_STARTUP, A_STEP = 60 * A_SCALE, 1140 * A_SCALE
# Attempt B's: 0m..30m of its own inside the window, first value 0, last at the window's end: exact.
B_LOAD, B_REDONE, B_STEP = 60.0, 120.0, 1620.0
# Each node rank adds its two attempts; the job is the mean of its node ranks (identical here).
GPT = {
    "startup": A_STARTUP,
    "data": 0.0,
    "step": A_STEP + B_STEP,
    "checkpoint_save": 0.0,
    "checkpoint_load": B_LOAD,
    "redone": B_REDONE,
}
# Allocation: the earliest process start in the window (A at 0m) to the last sample (60m).
GPT_ALLOCATION = 3600.0
# Down: what no process accounted for: the 10 minutes between A and B, less A's 30 s of extrapolation.
GPT_SPENT = GPT["startup"] + GPT["step"] + GPT["checkpoint_load"] + GPT["redone"]
GPT_DOWN = GPT_ALLOCATION - GPT_SPENT
LLAMA_STEP = 3600.0  # 0..3600 over exactly the window


def sample(name: str, value: float, **labels: str) -> dict:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"labels": f"{name}{{{inner}}}", "value": value}


def expr_test(expr: str, at: str, samples: list[dict]) -> dict:
    return {"expr": expr, "eval_time": at, "exp_samples": samples}


def run_promtool(tmp_path, input_series: dict[str, str], tests: list[dict]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": alert_groups()}))
    spec = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in input_series.items()],
                "promql_expr_test": tests,
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    run = procs.run(
        [PROMTOOL, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_scripted_hour_is_consistent():
    # the synthetic counters add up to each process's age, as the trainer's do (trainer/goodput.py)
    assert 60 + 1140 == 20 * 60 and 60 + 120 + 1620 == 30 * 60
    assert 540 < GPT_DOWN < 600  # 10 minutes down, less the 30 s increase() adds to A's end


def test_job_phases_allocation_badput_and_goodput(tmp_path):
    job = {"namespace": NS, "job": "gpt-small"}
    llama = {"namespace": NS, "job": "llama"}
    run_promtool(
        tmp_path,
        SERIES,
        [
            expr_test(
                f'{JOB_PHASE_SECONDS}{{job="gpt-small"}}',
                "60m",
                [sample(JOB_PHASE_SECONDS, v, phase=p, **job) for p, v in GPT.items()],
            ),
            expr_test(
                JOB_ALLOCATION_SECONDS,
                "60m",
                [
                    sample(JOB_ALLOCATION_SECONDS, GPT_ALLOCATION, **job),
                    sample(JOB_ALLOCATION_SECONDS, 3600, **llama),
                ],
            ),
            # Before B started, the job's allocation ended at A's last sample (20m): no down time yet.
            expr_test(
                f'{JOB_ALLOCATION_SECONDS}{{job="gpt-small"}}',
                "25m",
                [sample(JOB_ALLOCATION_SECONDS, 1200, **job)],
            ),
            expr_test(JOB_GPUS, "60m", [sample(JOB_GPUS, 16, **job), sample(JOB_GPUS, 8, **llama)]),
            expr_test(
                f'{BADPUT_SECONDS}{{job="gpt-small"}}',
                "60m",
                [
                    sample(BADPUT_SECONDS, GPT["startup"], cause="startup", **job),
                    sample(BADPUT_SECONDS, 0, cause="data", **job),
                    sample(BADPUT_SECONDS, 0, cause="checkpoint_save", **job),
                    sample(BADPUT_SECONDS, B_LOAD, cause="checkpoint_load", **job),
                    sample(BADPUT_SECONDS, B_REDONE, cause="redone", **job),
                    sample(BADPUT_SECONDS, GPT_DOWN, cause="down", **job),
                ],
            ),
            expr_test(
                f'{BADPUT_SECONDS}{{job="llama", cause="down"}}',
                "60m",
                [sample(BADPUT_SECONDS, 0, cause="down", **llama)],
            ),
            expr_test(
                GOODPUT_RATIO,
                "60m",
                [
                    sample(GOODPUT_RATIO, GPT["step"] / GPT_ALLOCATION, **job),
                    sample(GOODPUT_RATIO, LLAMA_STEP / 3600, **llama),
                ],
            ),
            # The team: productive GPU-seconds over allocated GPU-seconds (gpt-small 16 GPUs, llama 8).
            expr_test(
                GOODPUT_TEAM_RATIO,
                "60m",
                [
                    sample(
                        GOODPUT_TEAM_RATIO,
                        (GPT["step"] * 16 + LLAMA_STEP * 8) / (3600 * 16 + 3600 * 8),
                        namespace=NS,
                    )
                ],
            ),
        ],
    )


def test_a_torchrun_restart_inside_the_pod_resets_the_counter_and_is_still_counted(tmp_path):
    # One pod, one series: torchrun restarts the process right after the 30m scrape (counters back to 0);
    # at 31m the new process has stepped for 60 s, at 60m for 1800 s.
    pod = "opt-workers-0-0-ddddd"
    values = {"step": "0+60x30 60+60x29"}
    run_promtool(
        tmp_path,
        phases("opt", 0, pod, values, "0x61"),
        # increase() over the reset: 1800 before it, then 60 (a value after a reset counts whole) + 1740
        [
            expr_test(
                f'{JOB_PHASE_SECONDS}{{phase="step"}}',
                "60m",
                [sample(JOB_PHASE_SECONDS, 3600, namespace=NS, job="opt", phase="step")],
            )
        ],
    )


def test_straggler_ratio_is_a_ranks_compute_time_over_its_jobs_median(tmp_path):
    # gpt-small: 2 pods x 2 GPUs, each node's exporter publishes its own ranks; rank 3 is slow.
    step_s = {"0": 1.0, "1": 1.0, "2": 1.25, "3": 1.5}
    inputs = {
        series("trainplane_rank_step_seconds", "gpt-small", int(r) // 2, f"p{int(r) // 2}", rank=r): f"{v}x20"
        for r, v in step_s.items()
    }
    # median of 1, 1, 1.25, 1.5: halfway between the 2nd and 3rd (Prometheus' quantile interpolates)
    median = 1.0 * 0.5 + 1.25 * 0.5
    assert median == 1.125
    run_promtool(
        tmp_path,
        inputs,
        [
            expr_test(
                STRAGGLER_RATIO,
                "10m",
                [
                    sample(
                        STRAGGLER_RATIO,
                        v / median,
                        namespace=NS,
                        job="gpt-small",
                        rank=r,
                        node=trainer_node(int(r) // 2),
                    )
                    for r, v in step_s.items()
                ],
            )
        ],
    )
