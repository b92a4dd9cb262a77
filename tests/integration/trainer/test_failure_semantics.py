"""The trainer's real launcher exits drive the same JobSet decisions (real processes;
tests/unit/trainer/test_failure_semantics.py has the rest)."""

from __future__ import annotations

import signal

import pytest

from tests.helpers.jobs import RUNNING, jobset
from tests.helpers.jobset_sim import JobSetState, PodOutcome, run_attempt
from trainer import contract


@pytest.mark.slow
def test_the_trainers_real_launcher_exits_drive_the_same_decisions(tmp_path):
    """Two pods of one job as real launcher processes (torchrun + trainer workers), run side by side:
    pod 0 is preempted (SIGTERM after a step: it checkpoints and exits 143), pod 1's worker crashes
    (exit 7); a third launcher gets a config it refuses (exit 2). Their real exit codes, fed to the
    controllers' rules: crash -> whole set restarts, counted; 143 -> restart not counted; 2 -> fail now.
    A hang (124) is the launcher's watchdog exit (tests/integration/trainer/test_watchdog.py runs it for real)."""
    from tests.helpers.trainer import launch

    plugin = [
        *("--model", "tests.integration.trainer.plugins:bigram", "--seq-len", "16", "--threads", "1"),
        *(
            "--global-batch-size",
            "4",
            "--micro-batch-size",
            "2",
            "--log-interval",
            "1",
            "--warmup-steps",
            "0",
        ),
    ]
    ckpt = str(tmp_path / "ckpt")
    pod0 = launch(
        tmp_path,
        "pod0",
        1,
        [
            *plugin,
            "--dataset",
            "tests.integration.trainer.plugins:counting",
            "--steps",
            "100000",
            "--checkpoint.uri",
            ckpt,
        ],
    )
    pod1 = launch(
        tmp_path,
        "pod1",
        2,
        [*plugin, "--dataset", "tests.integration.trainer.plugins:crashing", "--steps", "5"],
        extra_env={"CRASH_CODE": "7"},
    )
    bad = launch(tmp_path, "bad", 3, ["--global-batch-size", "8", "--micro-batch-size", "2"])
    try:
        pod0.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 2)
        pod0.signal(signal.SIGTERM)
        codes = {"pod0": pod0.wait(), "pod1": pod1.wait(), "bad": bad.wait()}
    finally:
        for p in (pod0, pod1, bad):
            p.kill_tree()
    assert codes == {"pod0": 143, "pod1": 7, "bad": 2}, [p.tail() for p in (pod0, pod1, bad)]
    assert pod0.events("preempted_exit"), pod0.tail()  # 143 only after a committed checkpoint

    js = jobset(max_restarts=3)
    state = JobSetState(max_restarts=3)
    # Attempt 1: pod 1 crashes while pod 0 waits in the collective -> everything restarts, counted.
    assert (
        run_attempt(js, [PodOutcome("p1", codes["pod1"]), PodOutcome("p0", RUNNING)], state)
        == "RestartJobSet"
    )
    # Attempt 2: the node of pod 0 is reclaimed: SIGTERM, checkpoint, 143 -> restart, not counted.
    preempted = PodOutcome("p0", codes["pod0"], ("DisruptionTarget",))
    assert (
        run_attempt(js, [preempted, PodOutcome("p1", RUNNING)], state) == "RestartJobSetAndIgnoreMaxRestarts"
    )
    # Attempt 3: a drain without the condition still exits 143 -> not counted either.
    assert run_attempt(js, [PodOutcome("p0", codes["pod0"])], state) == "RestartJobSetAndIgnoreMaxRestarts"
    # Attempt 4: a hang -> counted.
    assert run_attempt(js, [PodOutcome("p1", contract.EXIT_HANG)], state) == "RestartJobSet"
    assert (state.restarts, state.restarts_count_towards_max) == (4, 2)
    # Attempt 5: the config is broken (a changed trainer block) -> fails at once, restarts left or not.
    assert run_attempt(js, [PodOutcome("p0", codes["bad"]), PodOutcome("p1", RUNNING)], state) == "FailJobSet"
    assert state.failed_reason == "FailJobSetAction"
