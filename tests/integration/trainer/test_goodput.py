"""Goodput of real trainer processes: the phases add up to each process's wall time, and a restarted
attempt counts exactly the steps it computes again (the high-water mark in the checkpoint root)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from contract.recovery import PHASES
from tests.helpers.trainer import events, finished, launch, run_args
from trainer.contract import ENV_HIGH_WATER_INTERVAL
from trainer.goodput import HIGH_WATER_FILE

pytestmark = pytest.mark.slow
STEPS = 16


def test_phases_add_up_to_each_process_wall_time(reference):
    # the session's cached 24-step reference run (conftest.py), with the times its launcher started and
    # returned; its one checkpoint is the final one
    ref = reference(2, 24)
    times = json.loads((ref / "times.json").read_text())
    launched, ended = times["launched"], times["ended"]
    starts = {e["rank"]: e for e in events(ref / "ref.out", "start")}
    phases = {e["rank"]: e for e in events(ref / "ref.out", "phases")}
    assert set(phases) == {0, 1}
    for rank, ev in phases.items():
        seconds = ev["seconds"]
        assert set(seconds) == set(PHASES)
        total = sum(seconds.values())
        # Bounds from outside the clock: the process started after the launch and before its `start`
        # event, and logged its phases before the launcher returned.
        assert ev["ts"] - starts[rank]["ts"] - 0.01 <= total <= ev["ts"] - launched + 0.01
        assert total <= ended - launched
        assert abs(total - ev["wall_s"]) < 0.05, ev
        # a fresh run: every phase but the redone one took time; steps dominate a 24-step run
        assert seconds["redone"] == 0 and ev["steps_redone"] == 0
        assert seconds["startup"] > 0 and seconds["data"] > 0 and seconds["checkpoint_save"] > 0
        assert seconds["checkpoint_load"] > 0 and seconds["step"] > seconds["data"]


def test_a_restart_counts_exactly_the_steps_it_redoes(tmp_path, corpus):
    args = run_args(
        corpus, tmp_path, "--checkpoint.interval-steps", "4", "--checkpoint.async-save", "false", steps=STEPS
    )
    run = launch(
        tmp_path,
        "run",
        2,
        args,
        run_opts=["--max-restarts", "1"],
        extra_env={ENV_HIGH_WATER_INTERVAL: "0"},
    )
    run.wait_for(lambda e: e["event"] == "checkpoint_committed" and e["ckpt_step"] >= 4)
    mark = tmp_path / "ckpt" / HIGH_WATER_FILE
    deadline = time.monotonic() + 60
    while not (mark.exists() and json.loads(mark.read_text())["step"] >= 5):
        assert time.monotonic() < deadline, run.tail()
        time.sleep(0.02)
    victim = next(e["pid"] for e in run.events("start") if e["rank"] == 1)
    os.kill(victim, signal.SIGKILL)
    assert run.wait() == 0, run.tail()
    redos = {e["rank"]: e for e in run.events("redoing_steps")}
    assert set(redos) == {0, 1} and redos[0]["high_water"] == redos[1]["high_water"]
    redo = redos[0]
    first_reached = max(e["step"] for e in run.events("step_done") if e["rank"] == 0 and e["step"] <= STEPS)
    resumed = run.events("resumed")
    ckpt = resumed[0]["ckpt_step"]
    high = redo["high_water"]
    # the mark is what the first attempt reached (at least the 5 we waited for), past the checkpoint
    assert 5 <= high <= first_reached and ckpt < high, (redo, resumed)
    assert redo["steps"] == high - ckpt
    final = {e["rank"]: e for e in run.events("phases")}
    assert {r: e["steps_redone"] for r, e in final.items()} == {0: high - ckpt, 1: high - ckpt}
    assert all(e["seconds"]["redone"] > 0 for e in final.values())
    assert json.loads(mark.read_text())["step"] == STEPS


def test_a_garbled_mark_means_nothing_redone_with_a_warning(tmp_path, corpus):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / HIGH_WATER_FILE).write_text('{"step": "twelve"')
    run = finished(
        tmp_path, "run", 1, run_args(corpus, tmp_path, "--checkpoint.interval-steps", "8", steps=STEPS)
    )
    warned = run.events("high_water_unreadable")
    assert len(warned) == 1 and warned[0]["assumed"] == 0
    assert not run.events("redoing_steps")
    assert run.events("phases")[0]["steps_redone"] == 0
    assert json.loads((tmp_path / "ckpt" / HIGH_WATER_FILE).read_text())["step"] == STEPS
