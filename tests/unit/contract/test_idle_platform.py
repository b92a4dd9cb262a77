"""Idle reclaim in the stack files and the plan: the spec rules (one line each, exit 2), a job's
`idleExempt`, and what a team's idle policy adds to the GPU health controller (config, RBAC, metrics port,
PodMonitor)."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from components.incluster.gpu_health_controller import METRICS_PORT
from components.spec import ConfigError, PlatformSpec
from contract.idle import IDLE_EXEMPT_LABEL, IDLE_PERMISSIONS
from contract.recovery import CONTROLLER_PERMISSIONS
from tests.helpers import procs
from tests.helpers.cli import cli
from tests.helpers.gpu_health import objects
from tests.helpers.jobs import JOBSET, job_object, plan_job, the
from tests.helpers.plans import ROOT, plan_object, platform_object

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

IDLE = {"gpuUtilBelow": 5, "for": "30m", "action": "requeue", "exemptLabels": {"tier": "interactive"}}


def with_idle(stack="aws-dev", **changes):
    obj = platform_object(stack)
    obj["teams"][0]["idle"] = dict(IDLE)
    for key, value in changes.items():
        obj[key] = value
    return obj


def problems_of(raw):
    with pytest.raises(ConfigError) as info:
        PlatformSpec.load(raw)
    return info.value.problems


def test_idle_policy_with_gpu_health_off_is_one_line():
    assert problems_of(with_idle(gpuHealth={"enabled": False})) == [
        "platform.teams[0].idle: team 'research' sets an idle policy but gpuHealth is disabled: its "
        "controller runs idle reclaim"
    ]


def test_requeue_without_kueue_is_one_line_and_alert_is_fine():
    assert problems_of(with_idle(queueing={"enabled": False})) == [
        "platform.teams[0].idle.action: requeue deactivates the job's Kueue Workload, but queueing is "
        "disabled (no Kueue): use action alert or enable queueing"
    ]
    obj = with_idle(queueing={"enabled": False})
    obj["teams"][0]["idle"]["action"] = "alert"
    PlatformSpec.load(obj)


def test_cli_refuses_idle_without_gpu_health_with_exit_2(tmp_path):
    sf = yaml.safe_load((ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text())
    sf["config"]["trainplane:platform"] = with_idle(gpuHealth={"enabled": False})
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(sf))
    proc = cli("plan", str(bad), env={"COLUMNS": "160"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"{bad}: 1 problem(s)",
        "platform.teams[0].idle: team 'research' sets an idle policy but gpuHealth is disabled: its controller "
        "runs idle reclaim",
    ]


@pytest.mark.parametrize("elastic", [False, True], ids=["jobset", "elastic-job"])
def test_idle_exempt_job_labels_its_jobset_or_job_not_its_pods(elastic):
    job = job_object()
    job["idleExempt"] = True
    if elastic:
        job["nodes"] = {"min": 1, "max": 2}
    obj = the(plan_job(job), "kubernetes:batch/v1:Job" if elastic else JOBSET)
    assert obj["metadata"]["labels"][IDLE_EXEMPT_LABEL] == "true"
    assert IDLE_EXEMPT_LABEL not in json.dumps(obj["spec"])


def test_a_job_is_not_exempt_by_default():
    obj = the(plan_job(job_object()), JOBSET)
    assert IDLE_EXEMPT_LABEL not in obj["metadata"]["labels"]


@pytest.mark.integration  # starts a process (tests/helpers/tiers.py)
def test_idle_policy_gives_the_controller_its_config_rbac_metrics_port_and_podmonitor(tmp_path):
    result = plan_object(with_idle())
    (role,) = objects(result, "rbac.authorization.k8s.io/v1:ClusterRole").values()
    granted = {
        (r["apiGroups"][0], res, v) for r in role["rules"] for res in r["resources"] for v in r["verbs"]
    }
    wanted = {(g, res, v) for g, res, verbs in CONTROLLER_PERMISSIONS + IDLE_PERMISSIONS for v in verbs}
    assert granted == wanted
    (cm,) = [c for n, c in objects(result, "core/v1:ConfigMap").items() if n == "trainplane-gpu-health"]
    config = json.loads(cm["data"]["config.json"])
    assert config["idle"]["teams"] == [
        {
            "team": "research",
            "namespace": "research",
            "action": "requeue",
            "exemptLabels": {"tier": "interactive"},
            "gpuUtilBelow": 5,
            "forMinutes": 30,
        }
    ]
    assert set(cm["data"]) == {"config.json"}  # idle reclaim's code is the controller image's
    deployment = objects(result, "apps/v1:Deployment")["trainplane-gpu-health"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "metrics", "containerPort": METRICS_PORT}]
    (pm,) = [
        r.inputs
        for r in result.resources
        if r.type == "kubernetes:monitoring.coreos.com/v1:PodMonitor"
        and r.inputs["metadata"]["name"] == "trainplane-gpu-health"
    ]
    assert pm["metadata"]["namespace"] == "gpu-operator"
    assert pm["spec"]["selector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
    assert pm["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    # valid against prometheus-operator's PodMonitor CRD (../shared/checks/crd_validate.py)
    (tmp_path / "pm.json").write_text(json.dumps(pm))
    checker = ROOT.parent / "shared" / "checks" / "crd_validate.py"
    got = procs.run([sys.executable, str(checker), str(tmp_path / "pm.json")], capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr
