"""verify idle (issue 20): does each team's idle policy reach its jobs? Each rule's defect is planted in the
plan of stacks/Pulumi.aws-h100-reserved.yaml with tests/helpers/idle_data.py's teams (research: requeue,
eval: alert with an exemption label, ops: none) and its finding asserted by the rule's name.

The controller's side (its PodMonitor for the exemption series, its Workload permissions) is the idle
controller's (branch i20-idle-ctl); `completed` makes sure the plan has them as it builds them (added where
this branch's plan lacks them), checks the plan is clean, then each test breaks one thing."""

from __future__ import annotations

import copy
import functools

import pytest

from contract import recovery as R
from contract.idle import IDLE_ALERT, IDLE_EXEMPT_METRIC, JOB_GPU_UTIL
from infra.mockcloud import run_program
from infra.verify.model import Plan, from_run
from tests.helpers import idle_data as D
from tests.helpers.plans import config_for, platform_object
from tests.helpers.verify_plans import edit, kind, lines, plan, plus, release, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NS = "gpu-operator"
POD_MONITOR = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "PodMonitor",
    "metadata": {"name": R.CONTROLLER_NAME, "namespace": NS},
    "spec": {
        "selector": {"matchLabels": {"app": R.CONTROLLER_NAME}},
        "podMetricsEndpoints": [{"port": "metrics", "interval": "30s", "honorLabels": True}],
    },
}


def platform() -> dict:
    p = platform_object("aws-h100-reserved")
    p["teams"] = copy.deepcopy(D.TEAMS)
    return p


@functools.cache
def _run():
    return run_program(config_for(platform()), "idle-test")


def bare(config: dict | None = None) -> Plan:
    """The plan as this branch builds it; `config`: the spec verify reads (the resources stay)."""
    return from_run(_run(), config or platform())


WORKLOADS = {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "patch"]}


def _workload_permissions(inputs: dict) -> None:
    inputs["rules"] = [*inputs["rules"], WORKLOADS]


def _no_workload_permissions(inputs: dict) -> None:
    inputs["rules"] = [r for r in inputs["rules"] if "workloads" not in r.get("resources", [])]


def with_monitor(plan_: Plan, honor_labels: bool = True) -> Plan:
    """The plan with (only) this PodMonitor of the controller's metrics port."""
    monitor = copy.deepcopy(POD_MONITOR)
    monitor["spec"]["podMetricsEndpoints"][0]["honorLabels"] = honor_labels
    return plus(
        plan_.replaced(lambda r: {"__drop__": True} if kind("PodMonitor", R.CONTROLLER_NAME)(r) else None),
        monitor,
    )


def completed(plan_: Plan) -> Plan:
    """The plan with the controller's Workload permissions and exemption PodMonitor, whether or not this
    branch's plan has them yet."""
    return with_monitor(edit(plan_, kind("ClusterRole", R.CONTROLLER_NAME), _workload_permissions))


def without_requeue_rbac() -> Plan:
    return edit(clean(), kind("ClusterRole", R.CONTROLLER_NAME), _no_workload_permissions)


@functools.cache
def clean() -> Plan:
    return completed(bare())


def found(plan_: Plan, rule: str, check: str = "idle") -> list[str]:
    return [line for line in lines(run(plan_, check)) if line.startswith(f"{check}: {rule}")]


def rules_edit(change):
    def apply(inputs: dict) -> None:
        for g in inputs["spec"]["groups"]:
            g["rules"] = [r for r in (change(r) for r in g["rules"]) if r is not None]

    return edit(clean(), kind("PrometheusRule", "trainplane"), apply)


def research_alert(change):
    return rules_edit(
        lambda r: change(r) if r.get("alert") == IDLE_ALERT and r["labels"]["team"] == "research" else r
    )


def test_the_completed_plan_is_clean_and_examined():
    report = run(clean(), "idle")
    assert lines(report) == []
    assert {
        "idle alert of team research",
        "idle alert of team eval",
        "requeue RBAC in namespace research",
    } <= set(report.check("idle").examined)
    assert lines(run(clean(), "observability")) == []


def test_the_plan_as_built_is_clean():
    """This branch builds the controller's side: its plan passes idle, observability and recovery as is."""
    for check in ("idle", "observability", "recovery"):
        assert [line for line in lines(run(bare(), check)) if line.startswith(f"{check}:")] == [], check


def test_reference_stacks_without_idle_policies_have_nothing_to_check():
    report = run(plan("aws-dev"), "idle")
    assert lines(report) == [] and report.check("idle").notes == [
        "no team sets an idle policy (teams[].idle)"
    ]


def test_alert_missing_for_a_team():
    got = found(research_alert(lambda r: None), "alert")
    assert len(got) == 1 and "team research sets idle" in got[0] and "labelled team=research" in got[0], got


def test_alert_with_another_threshold():
    got = found(research_alert(lambda r: {**r, "expr": r["expr"].replace("< 5)", "< 50)")}), "alert")
    assert len(got) == 1 and "threshold is 50%, the team's gpuUtilBelow 5%" in got[0], got


def test_alert_with_another_window():
    got = found(research_alert(lambda r: {**r, "for": "2h"}), "alert")
    assert len(got) == 1 and "`for` is 2h, the team's window 30m" in got[0], got


def test_alert_with_another_action():
    got = found(research_alert(lambda r: {**r, "labels": {**r["labels"], "action": "alert"}}), "alert")
    assert len(got) == 1 and "action label is alert, the team's action requeue" in got[0], got


def test_alert_that_does_not_leave_out_exempt_jobs():
    got = found(research_alert(lambda r: {**r, "expr": r["expr"].split(" unless ")[0]}), "alert")
    assert len(got) == 1 and IDLE_EXEMPT_METRIC in got[0], got


def test_alerts_off_means_the_policy_never_fires():
    config = platform()
    config["observability"] = {**config.get("observability", {}), "alerts": False}
    got = found(completed(bare(config)), "alert")
    assert len(got) == 1 and "observability.alerts is off" in got[0] and "research, eval" in got[0], got


def test_recording_rule_missing():
    got = found(rules_edit(lambda r: None if r.get("record") == JOB_GPU_UTIL else r), "recording")
    assert len(got) == 1 and JOB_GPU_UTIL in got[0], got


def test_dcgm_service_monitor_without_honor_labels():
    def change(inputs: dict) -> None:
        inputs["values"]["dcgmExporter"]["serviceMonitor"]["honorLabels"] = False

    got = found(edit(clean(), release("gpu-operator"), change), "dcgm-labels")
    assert len(got) == 1 and "dcgmExporter.serviceMonitor.honorLabels False" in got[0], got


def test_no_controller():
    broken = clean().replaced(
        lambda r: {"__drop__": True} if kind("Deployment", R.CONTROLLER_NAME)(r) else None
    )
    got = found(broken, "controller")
    assert len(got) == 1 and f"no Deployment {NS}/{R.CONTROLLER_NAME}" in got[0], got


def test_gpu_health_off():
    config = platform()
    config["gpuHealth"] = {"enabled": False}
    got = found(completed(bare(config)), "controller")
    assert len(got) == 1 and "gpuHealth is off" in got[0], got


def test_requeue_without_workload_permissions():
    # the plan without the controller's Workload permissions: research (requeue) is found, eval (alert) not
    got = found(without_requeue_rbac(), "requeue-rbac")
    assert len(got) == 1 and "team research" in got[0], got
    assert "kueue.x-k8s.io/workloads patch in namespace research" in got[0], got


def test_a_role_binding_in_the_team_namespace_grants_requeue():
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "idle-requeue", "namespace": "research"},
        "rules": [
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "patch"]}
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "idle-requeue", "namespace": "research"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "idle-requeue"},
        "subjects": [{"kind": "ServiceAccount", "name": R.CONTROLLER_NAME, "namespace": NS}],
    }
    assert found(plus(without_requeue_rbac(), role, binding), "requeue-rbac") == []
    # ...but not one in another namespace
    other = {**binding, "metadata": {**binding["metadata"], "namespace": "eval"}}
    role_other = {**role, "metadata": {**role["metadata"], "namespace": "eval"}}
    assert len(found(plus(without_requeue_rbac(), role_other, other), "requeue-rbac")) == 1


def test_exemption_series_scraped_without_honor_labels_is_found_by_observability():
    """Without honorLabels, the exemption series' namespace and job are the controller pod's and the
    PodMonitor's, so `unless on (namespace, job)` never matches a job and exempt jobs alert (the
    observability check reads `on (...)` labels of joins)."""
    broken = with_monitor(clean(), honor_labels=False)
    got = found(broken, f"PrometheusRule monitoring/trainplane rule {IDLE_ALERT}: on (", "observability")
    assert {"'namespace'", "'job'"} <= {w for line in got for w in line.split() if w.startswith("'")}, got
    assert all("honorLabels false" in line for line in got), got
