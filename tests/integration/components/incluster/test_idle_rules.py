"""The idle recording rule and the per-team idle alerts, rendered from the planned PrometheusRule of
stacks/Pulumi.aws-h100-reserved.yaml with the teams of tests/helpers/idle_data.py (research: below 5% for
30m, requeue; eval: below 10% for 1h, alert; ops: no policy), run by `promtool test rules` on its synthetic
DCGM, kube-state-metrics and exemption series. promtool's alert tests list every firing alert of the name
at an instant, so each expected list is also the proof that no other job alerts."""

from __future__ import annotations

import shutil

import pytest
import yaml

from components.incluster.idle_rules import GROUP
from contract.idle import IDLE_ALERT, JOB_GPU_UTIL
from tests.helpers import idle_data as D
from tests.helpers import procs
from tests.helpers.cost_data import promtool_series
from tests.helpers.plans import plan_object, platform_object

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not on PATH (CI installs Debian's prometheus)"
)
POLICY = {"research": ("5", "30m"), "eval": ("10", "1h")}


def idle_platform() -> dict:
    platform = platform_object("aws-h100-reserved")
    platform["teams"] = D.TEAMS
    return platform


@pytest.fixture(scope="module")
def idle_rule_groups() -> list[dict]:
    (cr,) = [r for r in plan_object(idle_platform()).resources if r.type.endswith("PrometheusRule")]
    groups = [g for g in cr.inputs["spec"]["groups"] if g["name"] == GROUP]
    assert groups, f"the stack's PrometheusRule has no {GROUP} group"
    return groups


def alert(ns: str, job: str) -> dict:
    below, window = POLICY[ns]
    action = D.ACTION[ns]
    summary = (
        f"Training job {ns}/{job}'s GPUs averaged under {below}% for {window} (team {ns}'s idle policy, "
        f"action {action})"
        + (": its Workload is requeued to give the GPUs back" if action == "requeue" else "")
    )
    labels = {"namespace": ns, "job": job, "team": ns, "action": action, "severity": "warning"}
    return {"exp_labels": {**labels, "platform": "trainplane"}, "exp_annotations": {"summary": summary}}


def firing_at(minute: int, *jobs: tuple[str, str]) -> dict:
    return {"eval_time": f"{minute}m", "alertname": IDLE_ALERT, "exp_alerts": [alert(*j) for j in jobs]}


def run(tmp_path, groups: list[dict], alerts: list[dict], exprs: list[dict] | None = None) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    test = {
        "interval": "1m",
        "input_series": promtool_series(D.series()),
        "alert_rule_test": alerts,
        "promql_expr_test": exprs or [],
    }
    spec = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [test]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    got = procs.run(
        [PROMTOOL, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, got.stdout + got.stderr


IDLE_GPT, BLIP, EV = ("research", "idle-gpt"), ("research", "blip"), ("eval", "ev")


def test_the_plan_has_an_alert_per_team_with_an_idle_policy_only(idle_rule_groups):
    (group,) = idle_rule_groups
    alerts = [r for r in group["rules"] if r.get("alert") == IDLE_ALERT]
    assert [(a["labels"]["team"], a["for"], a["labels"]["action"]) for a in alerts] == [
        ("research", "30m", "requeue"),
        ("eval", "1h", "alert"),
    ]
    assert [r["record"] for r in group["rules"] if "record" in r] == [JOB_GPU_UTIL]


def test_job_gpu_util_is_the_mean_of_the_jobs_gpus(idle_rule_groups, tmp_path):
    def util(minute: int, values: dict[tuple[str, str], float]) -> dict:
        return {
            "expr": JOB_GPU_UTIL,
            "eval_time": f"{minute}m",
            "exp_samples": [
                {"labels": f'{JOB_GPU_UTIL}{{job="{j}",namespace="{ns}",team="{ns}"}}', "value": v}
                for (ns, j), v in values.items()
            ],
        }

    steady = {
        IDLE_GPT: 2.0,  # 0, 0, 0 and 8 over two pods of two Jobs of one JobSet
        BLIP: 1.0,
        ("research", "busy"): 90.0,
        ("research", "light"): 7.0,
        ("research", "exempt-job"): 0.0,
        EV: 7.0,  # an elastic job: its own Job, no JobSet
        ("ops", "ops-job"): 0.0,
        # no series for the bare pod `notebook` nor the GPU no pod holds
    }
    run(tmp_path, idle_rule_groups, [], [util(10, steady), util(20, {**steady, BLIP: 45.5})])


def test_an_idle_job_alerts_after_exactly_its_teams_window_and_not_before(idle_rule_groups, tmp_path):
    run(tmp_path, idle_rule_groups, [firing_at(29), firing_at(30, IDLE_GPT), firing_at(45, IDLE_GPT)])


def test_a_blip_above_the_threshold_resets_the_window(idle_rule_groups, tmp_path):
    # blip: idle from 0, busy at minute 20: without the reset it would fire at 30 with idle-gpt
    run(
        tmp_path,
        idle_rule_groups,
        [firing_at(30, IDLE_GPT), firing_at(50, IDLE_GPT), firing_at(51, IDLE_GPT, BLIP)],
    )


def test_two_teams_have_their_own_threshold_and_window(idle_rule_groups, tmp_path):
    # eval/ev at 7% is idle under eval's 10% and alerts after eval's hour; research/light at 7% is not idle
    # under research's 5%, ever.
    run(
        tmp_path,
        idle_rule_groups,
        [
            firing_at(59, IDLE_GPT, BLIP),
            firing_at(60, IDLE_GPT, BLIP, EV),
            firing_at(120, IDLE_GPT, BLIP, EV),
        ],
    )


def test_exempt_busy_and_policy_less_jobs_never_alert(idle_rule_groups, tmp_path):
    # research/exempt-job (0%, exempt), research/busy (90%), ops/ops-job (0%, no policy) and the bare pod
    # research/notebook are missing from every instant's list (promtool compares the whole list).
    run(tmp_path, idle_rule_groups, [firing_at(m, IDLE_GPT, BLIP, EV) for m in (60, 90, 120)])


def test_the_exemption_series_alone_suppresses_the_alert(idle_rule_groups, tmp_path):
    groups = yaml.safe_load(yaml.safe_dump(idle_rule_groups))
    rows = [r for r in D.series() if r[0] != "trainplane_job_idle_exempt"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    exempt_job = ("research", "exempt-job")
    test = {
        "interval": "1m",
        "input_series": promtool_series(rows),
        "alert_rule_test": [
            {
                "eval_time": "30m",
                "alertname": IDLE_ALERT,
                "exp_alerts": [alert(*IDLE_GPT), alert(*exempt_job)],
            }
        ],
    }
    spec = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [test]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    got = procs.run(
        [PROMTOOL, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, got.stdout + got.stderr
