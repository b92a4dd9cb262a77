"""The goodput phase clock and the high-water mark, in one process (trainer/goodput.py)."""

from __future__ import annotations

import json
import time

from contract.recovery import PHASE_SECONDS, PHASES, STEPS_REDONE
from trainer.goodput import HIGH_WATER_FILE, HighWater, PhaseClock, process_started_at, redone_until
from trainer.metrics import Metrics


def test_the_phases_partition_the_time_since_the_process_started():
    slices: list[tuple[str, float]] = []
    clock = PhaseClock(lambda p, s: slices.append((p, s)), started_at=time.time() - 2.0)
    time.sleep(0.05)
    clock.switch("step")
    with clock.phase("data"):
        time.sleep(0.02)
    with clock.phase("checkpoint_save"):
        time.sleep(0.03)
    totals = clock.snapshot()
    wall = time.time() - clock.started_at
    assert abs(sum(totals.values()) - wall) < 0.01
    assert totals["startup"] >= 2.0 and totals["data"] >= 0.02 and totals["checkpoint_save"] >= 0.03
    assert clock.current == "step"  # a phase() block returns to the phase it interrupted
    # every slice was exported, and they add up to the same totals
    exported = {p: sum(s for q, s in slices if q == p) for p in PHASES}
    assert all(abs(exported[p] - totals[p]) < 1e-3 for p in PHASES)


def test_the_process_start_comes_from_the_os():
    started = process_started_at()
    # this test process started before now and (pytest included) within the last day
    assert time.time() - 86400 < started <= time.time()


def test_redone_steps_lie_between_the_checkpoint_and_the_mark():
    assert redone_until(high_water=11, resumed_at=8, steps=24) == 11  # steps 9..11 again
    assert redone_until(high_water=8, resumed_at=8, steps=24) == 8  # nothing to redo
    assert redone_until(high_water=0, resumed_at=8, steps=24) == 8  # no mark (first attempt)
    assert redone_until(high_water=30, resumed_at=8, steps=24) == 24  # a mark of a longer run


def test_metrics_export_every_phase_from_the_start():
    text = "\n".join(
        f"{s.name}{s.labels} {s.value}" for fam in Metrics("j").registry.collect() for s in fam.samples
    )
    for phase in PHASES:
        assert f"{PHASE_SECONDS}{{'phase': '{phase}'}} 0.0" in text
    assert f"{STEPS_REDONE}{{}} 0.0" in text


def test_the_mark_is_written_atomically_and_only_upwards(tmp_path):
    events: list[tuple[str, dict]] = []
    hw = HighWater(str(tmp_path), lambda e, **f: events.append((e, f)), interval_s=0)
    assert hw.read() == 0 and events == []  # no file: a first attempt, no warning
    for step in (1, 2, 3):
        hw.record(step)
    hw.close()
    assert json.loads((tmp_path / HIGH_WATER_FILE).read_text())["step"] == 3
    assert [p.name for p in tmp_path.iterdir()] == [HIGH_WATER_FILE]  # no temp file left behind
    again = HighWater(str(tmp_path), lambda e, **f: None, interval_s=0)
    assert again.read() == 3
    again.record(2)  # a later attempt below the mark never lowers it
    again.close()
    assert json.loads((tmp_path / HIGH_WATER_FILE).read_text())["step"] == 3


def test_writes_are_rate_limited(tmp_path):
    hw = HighWater(str(tmp_path), lambda e, **f: None, interval_s=60)
    hw.record(1)
    deadline = time.monotonic() + 5
    while hw.written < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    hw.record(2)
    time.sleep(0.2)
    # the first write is immediate, the second waits for the interval
    assert json.loads((tmp_path / HIGH_WATER_FILE).read_text())["step"] == 1
    t0 = time.monotonic()
    hw.close()  # ...or for the end of the process, which writes the newest at once
    assert time.monotonic() - t0 < 2
    assert json.loads((tmp_path / HIGH_WATER_FILE).read_text())["step"] == 2


def test_a_garbled_or_unreadable_mark_is_zero_with_a_warning(tmp_path):
    for content in ('{"step": 4', '{"step": -1}', '{"step": true}', "[]", '{"time": 1}'):
        (tmp_path / HIGH_WATER_FILE).write_text(content)
        seen: list[str] = []
        assert HighWater(str(tmp_path), lambda e, seen=seen, **f: seen.append(e)).read() == 0, content
        assert seen == ["high_water_unreadable"], content


def test_a_failed_write_is_logged_not_raised(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    events: list[tuple[str, dict]] = []
    hw = HighWater(str(blocker / "ckpt"), lambda e, **f: events.append((e, f)), interval_s=0)
    hw.record(5)
    hw.close()
    assert [e for e, _ in events] == ["high_water_write_failed"]
