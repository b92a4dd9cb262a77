"""Hangs and stragglers (issue 14 points 6 and 7): a plug-in model that sleeps in forward on one rank."""

from __future__ import annotations

import signal
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.trainer import PLUGIN, free_port, launch

SLEEPY = [*PLUGIN, "--model", "tests.integration.trainer.plugins:sleepy"]
# Seconds, not minutes: floor 2 s, 3 x median; armed after 3 steps of each incarnation.
WATCHDOG = [
    "--set",
    "watchdog.floorSeconds=2",
    "--set",
    "watchdog.factor=3",
    "--set",
    "watchdog.warmupSteps=3",
]


def _scrape(port: int) -> dict[tuple[str, str], float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {
        (s.name, s.labels.get("rank", "")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


@pytest.mark.slow
def test_hung_rank_dumps_stacks_exits_124_and_the_group_restarts_from_the_checkpoint(tmp_path):
    port = free_port()
    run = launch(
        tmp_path,
        "run",
        2,
        [
            *SLEEPY,
            *WATCHDOG,
            "--steps",
            "100000",
            "--checkpoint.uri",
            str(tmp_path / "ckpt"),
            "--checkpoint.interval-steps",
            "4",
            "--metrics-port",
            str(port),
            "--set",
            "watchdog.exportGraceSeconds=0",
        ],
        run_opts=["--max-restarts", "1"],
        # rank 1 hangs in its 10th forward (step 5, accumulation 2) of every incarnation
        extra_env={"HANG_RANK": "1", "HANG_AT": "10"},
    )
    # second incarnation: restarted by torchrun, resumed from the last checkpoint, the hang counted
    run.wait_for(lambda e: e["event"] == "resumed" and e["rank"] == 0, timeout=120)
    deadline, hangs = time.monotonic() + 30, 0.0
    while hangs < 1 and time.monotonic() < deadline and run.p.poll() is None:
        hangs = _scrape(port).get(("trainplane_hangs_total", ""), 0.0)
        time.sleep(0.1)
    # the restart count is exhausted when it hangs again: the launcher reports the hang, not 1 or 143
    assert run.wait(120) == 124, run.tail()
    assert hangs == 1

    first = [e for e in run.events("hang_detected") if e["step"] == 4]
    assert first and all(e["exit_code"] == 124 and e["limit_s"] >= 2 for e in first)
    hung = [e for e in first if e["rank"] == 1]
    if hung:  # the hung rank's own dump shows where it is stuck; its peer may have died first
        assert any("plugins.py" in st and "time.sleep(3600)" in st for st in hung[0]["stacks"].values())
    assert "no progress for" in run.err.read_text() and "most recent call first" in run.err.read_text()
    assert {e["restart_count"] for e in run.events("start")} == {0, 1}
    assert {e["ckpt_step"] for e in run.events("resumed")} == {4}


@pytest.mark.slow
def test_per_rank_compute_time_shows_the_straggler_then_sigusr1_exits_143(tmp_path):
    """The straggler from global rank 0's metrics; then SIGUSR1 to the launcher is forwarded to the workers,
    which agree on a preemption for it and exit 143 (the same run: one launcher and its workers)."""
    port = free_port()
    run = launch(
        tmp_path,
        "run",
        2,
        [
            *SLEEPY,
            *("--steps", "100000", "--metrics-port", str(port)),
            *("--checkpoint.uri", str(tmp_path / "ckpt")),
        ],
        extra_env={"SLOW_RANK": "1", "SLOW_S": "0.05"},
    )
    try:
        run.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 5)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = _scrape(port)
            if ("trainplane_rank_step_seconds", "1") in m:
                break
            time.sleep(0.1)
        r0, r1 = m[("trainplane_rank_step_seconds", "0")], m[("trainplane_rank_step_seconds", "1")]
        # rank 1 sleeps 2 x 50 ms per step; rank 0 waits for it, but its own compute stays small. (The
        # two clocks split the step at slightly different points, so 0.1 s can read as 0.099 s: seen once.)
        assert r1 >= 0.09 and r0 < r1 / 2, (r0, r1)
        wall = m[("trainplane_step_seconds", "")]
        assert wall >= 0.09  # everyone's wall time includes the wait: it cannot tell who is slow
    finally:
        run.signal(signal.SIGUSR1)
    assert run.wait() == 143, run.tail()
    assert {e["signal"] for e in run.events("preemption_agreed")} == {"SIGUSR1"}


def test_watchdog_limit_arms_after_warmup_gives_way_to_saves_and_fires_once():
    from trainer.config import WatchdogConfig
    from trainer.watchdog import Watchdog

    cfg = WatchdogConfig(factor=3, floor_seconds=0.2, warmup_steps=2, save_timeout_seconds=0.6)
    events, exits = [], []
    wd = Watchdog(cfg, lambda name, **f: events.append((name, f)), code=124, exit=exits.append)
    assert wd.limit() is None  # start-up, compile: not armed
    wd.step_done(0.01)
    assert wd.limit() is None
    wd.step_done(0.5)
    assert wd.limit() == 3 * 0.255  # 3 x median, above the floor
    with wd.paused("checkpoint_save"):
        assert wd.limit() == 0.6
        wd.start()
        time.sleep(0.4)  # longer than the step limit, shorter than the save limit
        assert not exits
    time.sleep(1.5)
    assert exits == [124]
    [(name, fields)] = events
    assert name == "hang_detected" and fields["during"] == "step" and fields["exit_code"] == 124
    assert any("test_watchdog.py" in stack for stack in fields["stacks"].values())  # this thread's sleep
