"""The trainer's exit contract as the JobSet runtime enforces it: one pod fails -> the whole job restarts
(counted); 143 or a disruption -> restarts without counting; exit 2 -> the job fails at once.

The decisions come from the JobSet manifest the job builder produces (job_runtime.training_jobset), run
through a simulator of the Job and JobSet controllers' rule evaluation (tests/helpers/jobset_sim.py), fed
with exit codes of the trainer's real launcher processes.
"""

from __future__ import annotations

import pytest

from tests.helpers.jobs import RUNNING, decide, jobset
from tests.helpers.jobset_sim import JobSetState, PodOutcome, run_attempt
from trainer import contract

# The plans tier: these tests run the Pulumi program under the mock engine (make test-fast skips them).
pytestmark = pytest.mark.plans

ACTION = {
    # contract.exit_action -> the JobSet action that implements it
    "retry": "RestartJobSetAndIgnoreMaxRestarts",
    "fail": "FailJobSet",
    "count": "RestartJobSet",
}


@pytest.mark.parametrize("code", [1, 2, 7, 74, 124, 137, 139, 143, 255])
def test_every_exit_code_gets_the_action_the_contract_names(code):
    """The other pod is still running: the first failed pod decides for the whole JobSet."""
    assert (
        decide(PodOutcome("gpt-small-workers-0-1", code), PodOutcome("p0", RUNNING))
        == ACTION[contract.exit_action(code)]
    )


@pytest.mark.parametrize("code", [1, 2, 137, 143])
def test_a_disrupted_pod_restarts_the_job_without_counting_whatever_its_exit_code(code):
    """DisruptionTarget (eviction, Kueue or kubelet preemption, node reclaim) is never the job's fault."""
    pod = PodOutcome("gpt-small-workers-0-0", code, conditions=("DisruptionTarget",))
    assert decide(pod) == "RestartJobSetAndIgnoreMaxRestarts"


def test_restarts_count_against_max_restarts_and_preemptions_do_not():
    js = jobset(max_restarts=2)
    state = JobSetState(max_restarts=js["spec"]["failurePolicy"]["maxRestarts"])
    crash = [PodOutcome("p1", contract.EXIT_CRASH), PodOutcome("p0", RUNNING)]
    preempted = [PodOutcome("p0", contract.EXIT_PREEMPTED, ("DisruptionTarget",))]
    for pods in (crash, preempted, preempted, crash, preempted):
        run_attempt(js, pods, state)
    assert (state.restarts, state.restarts_count_towards_max, state.failed_reason) == (5, 2, None)
    run_attempt(js, [PodOutcome("p0", contract.EXIT_HANG)], state)
    assert state.failed_reason == "ReachedMaxRestarts"


def test_exit_2_fails_the_jobset_at_once_even_with_restarts_left():
    state = JobSetState(max_restarts=20)
    run_attempt(jobset(), [PodOutcome("p0", RUNNING), PodOutcome("p1", contract.EXIT_CONFIG)], state)
    assert (state.failed_reason, state.restarts) == ("FailJobSetAction", 0)
