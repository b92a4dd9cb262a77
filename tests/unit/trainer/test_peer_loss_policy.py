"""Exit 75 (a peer node vanished) restarts the job without counting, in a rule of its own whose name the
JobSet webhook accepts; the elastic Job runtime ignores it the same way."""

from __future__ import annotations

import re

import pytest

from components.incluster.job_runtime import RULE_PEER_LOST, elastic_job, jobset_failure_policy
from components.outputs import PlatformOutputs
from components.spec import JobSpec
from tests.helpers.jobs import RUNNING, decide, job_object, platform_outputs
from tests.helpers.jobset_sim import PodOutcome
from trainer import contract

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

# jobset@v0.12.0 pkg/webhooks/jobset_webhook.go (the webhook fails closed)
WEBHOOK_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def test_a_survivor_of_a_lost_node_restarts_the_jobset_without_counting():
    survivor = PodOutcome("gpt-small-workers-0-1", contract.EXIT_PEER_LOST)
    assert decide(survivor, PodOutcome("p0", RUNNING)) == "RestartJobSetAndIgnoreMaxRestarts"
    # the escalated exit (the launcher's bound) is a counted crash
    assert decide(PodOutcome("p1", contract.EXIT_CRASH), PodOutcome("p0", RUNNING)) == "RestartJobSet"


def test_the_peer_loss_rule_is_its_own_and_passes_the_webhook():
    rules = jobset_failure_policy(3)["rules"]
    (rule,) = [r for r in rules if r["name"] == RULE_PEER_LOST]
    assert WEBHOOK_RULE_NAME.match(rule["name"])
    assert rule["action"] == "RestartJobSetAndIgnoreMaxRestarts"
    assert any("(75)" in p for p in rule["onJobFailureMessagePatterns"])
    assert rules[-1]["action"] == "RestartJobSet"  # before the catch-all


def test_elastic_jobs_ignore_exit_75():
    raw = job_object()
    raw["nodes"] = {"min": 1, "max": 2}
    platform = PlatformOutputs.model_validate(platform_outputs("aws-dev"))
    rules = elastic_job(JobSpec.load(raw), platform)["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "Ignore", "codes": [75]} in [
        {"action": r["action"], "codes": r["onExitCodes"]["values"]} for r in rules if "onExitCodes" in r
    ]
    assert contract.exit_action(contract.EXIT_PEER_LOST) == "retry"
