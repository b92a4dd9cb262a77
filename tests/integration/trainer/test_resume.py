"""Exact resume: SIGTERM or kill -9 mid-run, resume, and end bitwise equal to an uninterrupted run."""

from __future__ import annotations

import os
import random
import shutil
import signal

import pytest

from tests.helpers.trainer import (
    assert_bitwise,
    events,
    final_state,
    finished,
    launch,
    preempted,
    run_args,
    samples_by_step,
)
from trainer.contract import ENV_CKPT_STAGING

STEPS = 24
pytestmark = pytest.mark.slow


def assert_matches_reference(run, ref):
    """The run's final checkpoint equals the uninterrupted reference's bit for bit, and each step trained on
    the same samples."""
    assert_bitwise(final_state(run / "ckpt", STEPS), final_state(ref / "ckpt", STEPS))
    assert samples_by_step(run / "samples") == samples_by_step(ref / "samples")


def test_sigterm_at_random_step_then_resume_is_bitwise_exact(tmp_path, corpus, reference):
    # dropout > 0 makes the result depend on the restored per-rank RNG streams, not only on the weights.
    # The ranks agree every 4 steps (voteEverySteps; on a GPU the default is about a second of steps; the
    # reference run votes at every step, the default on a CPU, as the other preemption tests do): the signal
    # waits for the next vote and the preemption save is at that step, so no step is lost, and each step's
    # logged loss is the one a vote at every step gives.
    every = 4
    ref = reference(2, STEPS, ("--dropout", "0.1"))
    # signalled once step `stop` is reported (at a vote), acted on at the next vote or the one after: before
    # the last step, where a signal is no preemption
    stop = random.Random().randint(2, STEPS - 3 * every)
    args = run_args(
        corpus,
        tmp_path,
        "--dropout",
        "0.1",
        "--checkpoint.interval-steps",
        "5",
        "--vote-every-steps",
        str(every),
        steps=STEPS,
        samples=True,
    )
    first = preempted(tmp_path, "first", 2, args, stop)
    exits = first.events("preempted_exit")
    assert len(exits) == 2 and exits[0]["ckpt_step"] < STEPS
    preempt_step = exits[0]["ckpt_step"]
    assert (preempt_step - 1) % every == 0, f"preempted after step {preempt_step}: not a vote step"

    second = finished(tmp_path, "second", 2, args)
    resumed = second.events("resumed")
    assert {e["ckpt_step"] for e in resumed} == {preempt_step} and len(resumed) == 2

    assert_matches_reference(tmp_path, ref)

    def losses(evs: list[dict]) -> dict[int, float]:
        return {e["step"]: e["loss"] for e in evs if e["event"] == "step_done" and e["rank"] == 0}

    reported = {**losses(first.events()), **losses(second.events())}
    assert sorted(reported) == list(range(1, STEPS + 1))  # every step reported once it was agreed
    assert reported == losses(events(ref / "ref.out"))


def test_kill9_of_one_worker_restarts_from_last_checkpoint_bitwise(tmp_path, corpus, reference):
    ref = reference(2, STEPS, ("--dropout", "0.1"))
    args = run_args(
        corpus,
        tmp_path,
        "--dropout",
        "0.1",
        "--checkpoint.interval-steps",
        "4",
        "--checkpoint.async-save",
        "false",
        steps=STEPS,
        samples=True,
    )
    run = launch(tmp_path, "run", 2, args, run_opts=["--max-restarts", "1"])
    run.wait_for(lambda e: e["event"] == "checkpoint_committed" and e["ckpt_step"] >= 8)
    victim = next(e["pid"] for e in run.events("start") if e["rank"] == 1)
    # let it train past the checkpoint so work is really lost and must be redone
    run.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 10)
    os.kill(victim, signal.SIGKILL)
    assert run.wait() == 0, run.tail()
    starts = run.events("start")
    assert {e["restart_count"] for e in starts} == {0, 1}
    resumed = run.events("resumed")
    assert resumed and all(e["ckpt_step"] >= 8 for e in resumed)
    assert_matches_reference(tmp_path, ref)


def test_resume_from_a_background_staged_async_save_is_bitwise_exact(tmp_path, corpus, reference):
    """The GPU's staging path on CPU (TRAINPLANE_CKPT_STAGING=background): DCP copies the state in its staging
    thread while the next step's forward and backward run, and the trainer waits for the copy only before
    optimizer.step. Resumed from such a save (the ones after it dropped), the run ends bitwise equal to an
    uninterrupted one, dropout streams (each rank's own RNG key) and data position included."""
    ref = reference(2, STEPS, ("--dropout", "0.1"))
    env = {ENV_CKPT_STAGING: "background"}
    args = run_args(
        corpus,
        tmp_path,
        "--dropout",
        "0.1",
        "--checkpoint.interval-steps",
        "4",
        "--checkpoint.async-save",
        "true",
        "--checkpoint.keep",
        "99",
        steps=STEPS,
        samples=True,
    )
    first = finished(tmp_path, "first", 2, args, extra_env=env)
    started = [e for e in first.events("checkpoint_save_started") if e["mode"] == "async"]
    assert started and {e["staging"] for e in started} == {"background"}
    committed = {e["ckpt_step"]: e for e in first.events("checkpoint_committed")}
    for e in started:  # the full figure (the wait before the optimizer step added) is never below the start's
        if e["rank"] == 0:
            assert committed[e["ckpt_step"]]["blocking_s"] >= e["blocking_s"]
    for d in (tmp_path / "ckpt").glob("step-*"):
        if int(d.name.removeprefix("step-")) > 8:
            shutil.rmtree(d)
    second = finished(tmp_path, "second", 2, args, extra_env=env)
    resumed = second.events("resumed")
    assert {e["ckpt_step"] for e in resumed} == {8} and len(resumed) == 2
    assert not second.events("rng_reseeded")
    assert_matches_reference(tmp_path, ref)
