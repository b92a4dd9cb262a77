"""verify recovery (issue 19): is the GPU recovery loop wired? Each rule's defect is planted in a plan and its
finding asserted by the rule's name.

The controller's permissions and the loop's recording rules and alerts are built by other parts of issue 19;
until they are in, the reference plans lack them, so the tests complete a plan first (`completed`: the
ClusterRole granting CONTROLLER_PERMISSIONS, a PrometheusRule group with the rules) and check it is clean,
then break it.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest

from contract import recovery as R
from infra.verify.checks.recovery_pods import tolerates
from infra.verify.jobs import job_config, run_job
from infra.verify.model import Plan
from tests.helpers.verify_plans import edit, kind, lines, plan, plan_of, plus, run

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

NS = "gpu-operator"
CONTROLLER = R.CONTROLLER_NAME


def recovery(plan_: Plan) -> list[str]:
    return [line for line in lines(run(plan_, "recovery")) if line.startswith("recovery:")]


def found(plan_: Plan, rule: str) -> list[str]:
    return [line for line in recovery(plan_) if line.startswith(f"recovery: {rule}:")]


def _grant_permissions(inputs: dict) -> None:
    inputs["rules"] = [
        {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}
        for group, resource, verbs in R.CONTROLLER_PERMISSIONS
    ]


def completed(plan_: Plan) -> Plan:
    """The plan as the platform builds it: the controller's permissions and the loop's rules are the
    product's own now (issue 19), so the clean baselines are the reference stacks themselves."""
    return plan_


@functools.cache
def aws() -> Plan:
    return completed(plan("aws-dev"))


@functools.cache
def _job(elastic: bool) -> Plan:
    platform = plan("aws-dev")
    cfg = job_config(platform, platform.teams[0], next(p for p in platform.node_pools if p.gpu))
    assert cfg is not None
    if elastic:
        cfg = {**copy.deepcopy(cfg), "nodes": {"min": 1, "max": cfg["nodes"]["max"]}}
    return run_job(platform, cfg)


def test_completed_plans_have_no_recovery_findings():
    assert recovery(aws()) == []
    # GKE: the driver installer and GPUDirect DaemonSets tolerate every taint; node agents may.
    assert recovery(completed(plan("gcp-dev"))) == []
    assert recovery(_job(False)) == [] and recovery(_job(True)) == []


def test_the_check_looks_at_synthesised_jobs_their_elastic_twin_and_preflight():
    examined = run(aws(), "recovery").check("recovery").examined
    assert "tolerations JobSet research/verify-research-h100 replicatedJob workers" in examined
    assert (
        "tolerations NCCL preflight JobSet research/verify-research-h100-nccl replicatedJob workers"
        in examined
    )
    assert "eviction elastic Job research/verify-research-h100" in examined
    assert "tolerations ResourceFlavor h100-spot" in examined


# ---- controller ------------------------------------------------------------------------------------


def test_no_controller_deployment_fails():
    broken = aws().replaced(lambda r: {"__drop__": True} if kind("Deployment", CONTROLLER)(r) else None)
    assert any(f"no Deployment {NS}/{CONTROLLER}" in line for line in found(broken, "controller")), recovery(
        broken
    )


def test_a_controller_with_no_replicas_or_another_account_fails():
    def scale(inputs: dict) -> None:
        inputs["spec"]["replicas"] = 0

    def other_account(inputs: dict) -> None:
        inputs["spec"]["template"]["spec"]["serviceAccountName"] = "default"

    assert any(
        "has 0 replicas" in line
        for line in found(edit(aws(), kind("Deployment", CONTROLLER), scale), "controller")
    )
    lines_ = found(edit(aws(), kind("Deployment", CONTROLLER), other_account), "controller")
    assert any(f"runs as ServiceAccount {NS}/default, not {NS}/{CONTROLLER}" in line for line in lines_), (
        lines_
    )


def test_a_missing_permission_fails_naming_it():
    def no_eviction(inputs: dict) -> None:
        _grant_permissions(inputs)
        inputs["rules"] = [r for r in inputs["rules"] if r["resources"] != ["pods/eviction"]]

    lines_ = found(edit(aws(), kind("ClusterRole", CONTROLLER), no_eviction), "controller")
    assert lines_ and "may not core/pods/eviction create" in lines_[0], lines_
    assert f"ClusterRoles {CONTROLLER}" in lines_[0]


def test_todays_node_only_role_lacks_the_loops_permissions():
    """The ClusterRole before the recovery loop (nodes get/list/patch): the permissions it lacks are named."""
    lines_ = found(edit(aws(), kind("ClusterRole", CONTROLLER), _todays_role), "controller")
    assert lines_ and "core/nodes watch, core/nodes/status patch, core/pods get" in lines_[0], lines_


def _todays_role(inputs: dict) -> None:
    inputs["rules"] = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]


@pytest.mark.parametrize(
    "rules",
    [
        [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        [
            {"apiGroups": [""], "resources": ["nodes", "pods", "events"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["*/status", "*/eviction"], "verbs": ["patch", "create"]},
        ],
    ],
    ids=["all", "subresource-wildcards"],
)
def test_rbac_wildcards_count(rules):
    def wild(inputs: dict) -> None:
        inputs["rules"] = rules

    assert found(edit(aws(), kind("ClusterRole", CONTROLLER), wild), "controller") == []


def test_a_rule_limited_to_resource_names_does_not_count():
    def named(inputs: dict) -> None:
        _grant_permissions(inputs)
        for r in inputs["rules"]:
            if r["resources"] == ["nodes"]:
                r["resourceNames"] = ["node-a"]

    lines_ = found(edit(aws(), kind("ClusterRole", CONTROLLER), named), "controller")
    assert lines_ and "core/nodes get, core/nodes list, core/nodes watch, core/nodes patch" in lines_[0], (
        lines_
    )


def test_binding_by_the_accounts_group_counts_and_no_binding_fails():
    def by_group(inputs: dict) -> None:
        inputs["subjects"] = [{"kind": "Group", "name": f"system:serviceaccounts:{NS}"}]

    def other_account(inputs: dict) -> None:
        inputs["subjects"] = [{"kind": "ServiceAccount", "name": "someone", "namespace": NS}]

    assert found(edit(aws(), kind("ClusterRoleBinding", CONTROLLER), by_group), "controller") == []
    lines_ = found(edit(aws(), kind("ClusterRoleBinding", CONTROLLER), other_account), "controller")
    assert lines_ and "(no ClusterRoleBinding) may not core/nodes get" in lines_[0], lines_


# ---- quarantine-tolerations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "toleration, expected",
    [
        ({"key": R.QUARANTINE_TAINT, "operator": "Exists"}, True),
        ({"key": R.QUARANTINE_TAINT, "operator": "Equal", "value": "Xid79", "effect": "NoSchedule"}, True),
        ({"key": R.QUARANTINE_TAINT, "operator": "Exists", "effect": "NoExecute"}, False),
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, False),
    ],
)
def test_toleration_matching_follows_kubernetes(toleration, expected):
    assert tolerates(toleration, R.QUARANTINE_TAINT) is expected


def _flavor_tolerates(toleration: dict):
    def change(inputs: dict) -> None:
        inputs["spec"]["tolerations"] = [*inputs["spec"].get("tolerations", []), toleration]

    return change


def test_a_flavor_tolerating_the_quarantine_taint_fails():
    broken = edit(
        aws(), kind("ResourceFlavor"), _flavor_tolerates({"key": R.QUARANTINE_TAINT, "operator": "Exists"})
    )
    lines_ = found(broken, "quarantine-tolerations")
    assert lines_ and lines_[0].startswith(
        f"recovery: quarantine-tolerations: ResourceFlavor h100-spot tolerates {R.QUARANTINE_TAINT} (by key"
    ), recovery(broken)
    assert "Kueue adds it to every pod it admits" in lines_[0]


def test_a_flavor_with_a_keyless_wildcard_fails_unless_its_effect_differs():
    wildcard = edit(
        aws(), kind("ResourceFlavor"), _flavor_tolerates({"operator": "Exists", "effect": "NoSchedule"})
    )
    lines_ = found(wildcard, "quarantine-tolerations")
    assert lines_ and "key-less operator Exists" in lines_[0] and R.DIAGNOSTIC_TAINT in lines_[0], lines_
    no_execute = edit(
        aws(), kind("ResourceFlavor"), _flavor_tolerates({"operator": "Exists", "effect": "NoExecute"})
    )
    assert found(no_execute, "quarantine-tolerations") == []


def _pods_tolerate(toleration: dict):
    def change(inputs: dict) -> None:
        for rj in inputs["spec"]["replicatedJobs"]:
            pod = rj["template"]["spec"]["template"]["spec"]
            pod["tolerations"] = [*pod.get("tolerations", []), toleration]

    return change


def test_a_training_jobset_tolerating_the_diagnostic_taint_fails():
    broken = edit(
        _job(False), kind("JobSet"), _pods_tolerate({"key": R.DIAGNOSTIC_TAINT, "operator": "Exists"})
    )
    lines_ = found(broken, "quarantine-tolerations")
    assert lines_ and "JobSet research/verify-research-h100 replicatedJob workers tolerates" in lines_[0], (
        lines_
    )
    assert "it requests GPUs" in lines_[0]


def test_only_node_agents_may_tolerate():
    agent = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {
            "template": {"spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "a"}]}}
        },
    }
    assert found(plus(aws(), agent), "quarantine-tolerations") == []
    gpu_agent = copy.deepcopy(agent)
    gpu_agent["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    assert any(
        "DaemonSet kube-system/agent" in line
        for line in found(plus(aws(), gpu_agent), "quarantine-tolerations")
    )
    deployment = {**copy.deepcopy(agent), "kind": "Deployment"}
    lines_ = found(plus(aws(), deployment), "quarantine-tolerations")
    assert (
        lines_
        and "Deployment kube-system/agent pod template" in lines_[0]
        and "not a node agent" in lines_[0]
    )


# ---- eviction-uncounted ----------------------------------------------------------------------------


def _child_policy(change):
    def apply(inputs: dict) -> None:
        for rj in inputs["spec"]["replicatedJobs"]:
            change(rj["template"]["spec"]["podFailurePolicy"]["rules"])

    return apply


def test_a_jobset_child_without_the_disruption_rule_fails():
    def drop(rules: list) -> None:
        rules[:] = [r for r in rules if "onPodConditions" not in r]

    lines_ = found(edit(_job(False), kind("JobSet"), _child_policy(drop)), "eviction-uncounted")
    assert lines_ and "no podFailurePolicy rule matches DisruptionTarget" in lines_[0], lines_


def test_a_jobset_that_counts_the_disruption_restart_fails():
    def counted(inputs: dict) -> None:
        for rule in inputs["spec"]["failurePolicy"]["rules"]:
            if rule.get("name") == "PreemptionRestartsUncounted":
                rule["action"] = "RestartJobSet"

    def unmatched(inputs: dict) -> None:
        for rule in inputs["spec"]["failurePolicy"]["rules"]:
            pats = rule.get("onJobFailureMessagePatterns") or []
            rule["onJobFailureMessagePatterns"] = [p for p in pats if "DisruptionTarget" not in p] or pats

    lines_ = found(edit(_job(False), kind("JobSet"), counted), "eviction-uncounted")
    assert lines_ and "answers RestartJobSet (rule PreemptionRestartsUncounted)" in lines_[0], lines_
    lines_ = found(edit(_job(False), kind("JobSet"), unmatched), "eviction-uncounted")
    assert lines_ and "answers RestartJobSet (rule OtherFailureRestartsCounted)" in lines_[0], lines_


def test_a_jobset_child_that_ignores_the_disruption_passes():
    def ignore(rules: list) -> None:
        rules[0]["action"] = "Ignore"

    assert found(edit(_job(False), kind("JobSet"), _child_policy(ignore)), "eviction-uncounted") == []


def test_an_elastic_job_that_fails_on_disruption_or_counts_it_first_fails():
    def fail_job(inputs: dict) -> None:
        inputs["spec"]["podFailurePolicy"]["rules"][0]["action"] = "FailJob"

    def count_first(inputs: dict) -> None:
        rules = inputs["spec"]["podFailurePolicy"]["rules"]
        rules.insert(0, {"action": "Count", "onExitCodes": {"operator": "In", "values": [143]}})

    lines_ = found(edit(_job(True), kind("Job"), fail_job), "eviction-uncounted")
    assert lines_ and "rule 0 turns DisruptionTarget into FailJob" in lines_[0], lines_
    lines_ = found(edit(_job(True), kind("Job"), count_first), "eviction-uncounted")
    assert lines_ and "an earlier Count rule may match the evicted pod first" in lines_[0], lines_


# ---- rules -----------------------------------------------------------------------------------------


def test_missing_recording_rules_and_alerts_fail_by_name():
    def drop(names: tuple[str, ...]):
        def change(inputs: dict) -> None:
            for g in inputs["spec"]["groups"]:
                g["rules"] = [r for r in g["rules"] if (r.get("record") or r.get("alert")) not in names]

        return change

    lines_ = found(edit(aws(), kind("PrometheusRule"), drop((R.GOODPUT_RATIO,))), "rules")
    assert lines_ == [
        f"recovery: rules: no recording rule {R.GOODPUT_RATIO} in PrometheusRule monitoring/trainplane: goodput "
        "and stragglers are not measured"
    ]
    lines_ = found(edit(aws(), kind("PrometheusRule"), drop((R.ALERT_QUARANTINED,))), "rules")
    assert lines_ and f"no alert {R.ALERT_QUARANTINED} in PrometheusRule monitoring/trainplane" in lines_[0]


# ---- straggler-policy ------------------------------------------------------------------------------


def _platform(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(dict(plan("aws-dev").config or {}))
    raw["teams"] = [{**t, "stragglers": "quarantine"} for t in raw["teams"]]
    for key, value in changes.items():
        raw[key] = value
    return raw


def test_a_quarantine_team_without_gpu_health_or_alerts_fails():
    no_health = completed(plan_of(_platform(gpuHealth={"enabled": False})))
    lines_ = found(no_health, "straggler-policy")
    assert lines_ and "teams research set stragglers: quarantine but gpuHealth is off" in lines_[0], lines_
    assert found(no_health, "controller") == []  # no controller is wanted then
    no_alerts = plan_of(_platform(observability={**_platform()["observability"], "alerts": False}))
    lines_ = found(no_alerts, "straggler-policy")
    assert lines_ and f"observability.alerts is off: {R.ALERT_STRAGGLER} never fires" in lines_[0], lines_


def test_a_quarantine_team_whose_controller_cannot_reach_prometheus_fails():
    with_team = completed(plan_of(_platform()))
    assert found(with_team, "straggler-policy") == []
    deny = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": NS},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"]},
    }
    lines_ = found(plus(with_team, deny), "straggler-policy")
    assert lines_ and f"NetworkPolicy keeps Deployment {NS}/{CONTROLLER} from Prometheus" in lines_[0], lines_


def test_a_preflight_tolerating_the_quarantine_taint_fails(monkeypatch):
    """The NCCL preflight is built by infra/nccl_test.py, not planned: a builder that adds the toleration."""
    import infra.nccl_test as nccl

    real = nccl.build

    def tolerant(*args: Any, **kwargs: Any) -> Any:
        pre = real(*args, **kwargs)
        _pods_tolerate({"key": R.QUARANTINE_TAINT, "operator": "Exists"})(pre.manifest)
        return pre

    monkeypatch.setattr(nccl, "build", tolerant)
    lines_ = found(aws(), "quarantine-tolerations")
    assert (
        lines_
        and "NCCL preflight JobSet research/verify-research-h100-nccl replicatedJob workers" in lines_[0]
    )


def test_a_platforms_elastic_job_that_counts_evictions_fails(monkeypatch):
    """The elastic twin is the job builder's own elastic_job: a builder whose policy counts evictions."""
    from components.incluster import job_runtime

    real = job_runtime.pod_failure_policy

    def counting() -> dict[str, Any]:
        policy = real()
        policy["rules"] = [r for r in policy["rules"] if "onPodConditions" not in r]
        return policy

    monkeypatch.setattr(job_runtime, "pod_failure_policy", counting)
    lines_ = found(aws(), "eviction-uncounted")
    assert lines_ and lines_[0].startswith(
        "recovery: eviction-uncounted: elastic Job research/verify-research-h100: no podFailurePolicy rule"
    ), lines_


def test_a_binding_to_a_role_outside_the_plan_is_named_when_permissions_are_missing():
    def elsewhere(inputs: dict) -> None:
        inputs["roleRef"]["name"] = "someones-role"

    lines_ = found(edit(aws(), kind("ClusterRoleBinding", CONTROLLER), elsewhere), "controller")
    assert lines_ and "ClusterRoles someones-role are not in the plan, their rules unknown" in lines_[0], (
        lines_
    )

    def admin(inputs: dict) -> None:
        inputs["roleRef"]["name"] = "cluster-admin"

    assert found(edit(aws(), kind("ClusterRoleBinding", CONTROLLER), admin), "controller") == []


# ---- controller: idle reclaim's permissions ------------------------------------------------------------


@functools.cache
def _idle_plan() -> Plan:
    from tests.helpers.plans import platform_object

    obj = platform_object("aws-dev")
    obj["teams"][0]["idle"] = {"gpuUtilBelow": 5, "for": "30m", "action": "requeue"}
    return plan_of(obj)


def test_a_team_idle_policy_needs_the_idle_permissions():
    from contract.idle import IDLE_PERMISSIONS

    assert found(_idle_plan(), "controller") == []

    def without_idle(inputs: dict) -> None:
        _grant_permissions(inputs)  # the recovery loop's only

    lines_ = found(edit(_idle_plan(), kind("ClusterRole", CONTROLLER), without_idle), "controller")
    wanted = ", ".join(f"{g}/{r} {v}" for g, r, verbs in IDLE_PERMISSIONS for v in verbs)
    assert lines_ and f"may not {wanted}:" in lines_[0] and "IDLE_PERMISSIONS" in lines_[0], lines_
    # without an idle policy the recovery loop's permissions are enough
    assert found(edit(aws(), kind("ClusterRole", CONTROLLER), without_idle), "controller") == []


# ---- rediagnose-gate (issue 30 (4)) ---------------------------------------------------------------------


def _config(change):
    """Edit the controller's config.json in its ConfigMap."""

    def edit_cm(inputs: dict) -> None:
        config = json.loads(inputs["data"]["config.json"])
        change(config)
        inputs["data"] = {**inputs["data"], "config.json": json.dumps(config)}

    return edit(aws(), kind("ConfigMap", CONTROLLER), edit_cm)


def test_the_rediagnosis_waits_for_the_gpu_pods_on_the_reference_stacks():
    assert found(aws(), "rediagnose-gate") == []
    assert found(completed(plan("gcp-dev")), "rediagnose-gate") == []
    examined = run(aws(), "recovery").check("recovery").examined
    assert f"rediagnose-gate ConfigMap {NS}/{CONTROLLER}" in examined


def test_a_controller_config_without_the_gate_or_without_retries_fails():
    off = found(_config(lambda c: c["quarantine"].update(waitForGpuPods=False)), "rediagnose-gate")
    assert len(off) == 1 and "waitForGpuPods False" in off[0] and "still terminating" in off[0], off
    never = found(_config(lambda c: c["quarantine"].update(rediagnoseRetries=0)), "rediagnose-gate")
    assert len(never) == 1 and "rediagnoseRetries 0" in never[0] and "never retried" in never[0], never
    # No rerun at all: nothing to gate.
    assert (
        found(
            _config(lambda c: c["quarantine"].update(rediagnose=False, waitForGpuPods=False)),
            "rediagnose-gate",
        )
        == []
    )


def test_a_controller_that_cannot_see_every_namespaces_pods_fails():
    def one_namespace(inputs: dict) -> None:
        (c,) = inputs["spec"]["template"]["spec"]["containers"]
        c["args"] = [*c.get("args", []), "--namespace=gpu-operator"]

    def plain_kopf(inputs: dict) -> None:
        (c,) = inputs["spec"]["template"]["spec"]["containers"]
        c["command"], c["args"] = ["python3", "-m", "kopf", "run", "--standalone", "operator.py"], []

    assert found(aws(), "rediagnose-gate") == []
    for broken in (one_namespace, plain_kopf):
        lines_ = found(edit(aws(), kind("Deployment", CONTROLLER), broken), "rediagnose-gate")
        assert len(lines_) == 1 and "without --all-namespaces" in lines_[0], (broken.__name__, lines_)

    def no_pod_watch(inputs: dict) -> None:
        _grant_permissions(inputs)
        for r in inputs["rules"]:
            if r["resources"] == ["pods"]:
                r["verbs"] = ["get"]

    lines_ = found(edit(aws(), kind("ClusterRole", CONTROLLER), no_pod_watch), "rediagnose-gate")
    assert len(lines_) == 1 and "may not list, watch pods cluster-wide" in lines_[0], lines_
