"""Damaged checkpoints, failing saves and changed configs (issue 14 points 2, 3, 4, 9, 10), real files."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
import zlib
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.trainer import (
    BASE,
    ENDLESS,
    SAVED_16,
    Proc,
    assert_bitwise,
    copy_checkpoints,
    final_state,
    free_port,
    launch,
    single,
)
from trainer.checkpoint import SKIPPED


def _single(tmp_path: Path, name: str, corpus: Path, *extra: str) -> Proc:
    return single(
        tmp_path, name, corpus, "--checkpoint.keep", "5", "--checkpoint.interval-steps", "4", *extra
    )


def _one_line(p: Proc) -> str:
    err = p.err.read_text().strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


def _recommit(d: Path, name: str) -> None:
    """Make the manifest agree with the file as it is now (size and CRC): damage the checks cannot see."""
    man = json.loads((d / "manifest.json").read_text())
    data = (d / name).read_bytes()
    man["files"][name] = len(data)
    if "crc32" in man:
        man["crc32"][name] = f"{zlib.crc32(data):08x}"
    (d / "manifest.json").write_text(json.dumps(man))


@pytest.mark.slow
def test_flipped_bytes_of_the_same_size_are_caught_and_the_older_checkpoint_used(
    tmp_path, corpus, single_run
):
    full = single_run(*SAVED_16)
    # the run's checkpoints up to step 12 (keep 5, every 4 steps), as if it had ended there
    ckpt = copy_checkpoints(full, tmp_path, [4, 8, 12])
    want = final_state(full / "ckpt", 16)
    # bit rot in a committed shard: same size, other bytes
    shard = max((ckpt / "step-12").glob("*.distcp"), key=lambda f: f.stat().st_size)
    blob = bytearray(shard.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    shard.write_bytes(bytes(blob))

    again = _single(tmp_path, "again", corpus, "--steps", "16")
    assert again.wait() == 0, again.tail()
    skipped = again.events("checkpoint_corrupt_skipped")
    assert [e["ckpt_step"] for e in skipped] == [12] and "CRC-32" in skipped[0]["reason"]
    assert [e["ckpt_step"] for e in again.events("resumed")] == [8]
    # never deleted: moved aside for an operator, bytes untouched, with a note saying why
    [kept] = ckpt.glob("damaged-step-12-*")
    assert skipped[0]["moved_to"] == str(kept)
    assert (kept / shard.name).read_bytes() == bytes(blob)
    assert "CRC-32" in json.loads((kept / SKIPPED).read_text())["reason"]
    # steps 9..16 redone from step 8 end exactly where the undamaged run ended
    assert_bitwise(final_state(ckpt, 16), want)


@pytest.mark.slow
def test_unloadable_checkpoint_is_skipped_by_all_ranks_and_the_older_one_used(tmp_path):
    ckpt = tmp_path / "ckpt"
    args = ["--steps", "8", "--threads", "1", "--log-interval", "1", "--checkpoint.uri", str(ckpt)]
    args += ["--checkpoint.interval-steps", "4", "--checkpoint.keep", "5"]
    first = launch(tmp_path, "first", 2, args)
    assert first.wait() == 0, first.tail()
    # a corrupted .metadata that the manifest agrees with (damage before the commit, or a buggy writer)
    meta = ckpt / "step-8" / ".metadata"
    meta.write_bytes(b"\x80\x04garbage" + meta.read_bytes()[9:])
    _recommit(ckpt / "step-8", ".metadata")

    second = launch(tmp_path, "second", 2, [*args[:1], "12", *args[2:]])
    assert second.wait() == 0, second.tail()
    skipped = second.events("checkpoint_corrupt_skipped")
    assert {(e["rank"], e["ckpt_step"]) for e in skipped} == {(0, 8), (1, 8)}
    assert "load failed" in skipped[0]["reason"]
    assert sorted((e["rank"], e["ckpt_step"]) for e in second.events("resumed")) == [(0, 4), (1, 4)]
    [kept] = ckpt.glob("damaged-step-8-*")
    assert (kept / SKIPPED).exists() and (kept / ".metadata").read_bytes().startswith(b"\x80\x04garbage")


def test_no_loadable_checkpoint_left_is_one_line_exit_2(tmp_path, corpus, single_run):
    ckpt = copy_checkpoints(single_run(*SAVED_16), tmp_path, [4])  # one checkpoint, of step 4
    shard = next((ckpt / "step-4").glob("__0_0.distcp"))
    shard.unlink()  # a shard lost, and the manifest no longer mentions it either
    man = json.loads((ckpt / "step-4" / "manifest.json").read_text())
    del man["files"][shard.name], man["crc32"][shard.name]
    (ckpt / "step-4" / "manifest.json").write_text(json.dumps(man))

    again = _single(tmp_path, "again", corpus, "--steps", "8")
    assert again.wait() == 2, again.tail()
    err = _one_line(again)
    assert err.startswith("checkpoint error: no loadable checkpoint") and "4" in err
    assert not again.events("step_done") and list(ckpt.glob("damaged-step-4-*"))


def test_changed_training_config_is_refused_naming_the_keys_unless_allowed(tmp_path, corpus, single_run):
    ckpt = copy_checkpoints(single_run(*SAVED_16), tmp_path, [4])  # one checkpoint, of step 4

    changed = _single(tmp_path, "changed", corpus, "--steps", "8", "--lr", "0.01", "--seed", "7")
    assert changed.wait() == 2, changed.tail()
    err = _one_line(changed)
    assert "lr (0.003 -> 0.01)" in err and "seed (1234 -> 7)" in err and "allowConfigChange" in err
    assert not changed.events("step_done")

    # the launcher refuses it before any worker starts, with the same line
    via_launcher = launch(
        tmp_path,
        "launcher",
        1,
        [
            *BASE,
            "--dataset",
            "bytes",
            "--data-paths",
            f"[{corpus}]",
            "--checkpoint.uri",
            str(ckpt),
            "--steps",
            "8",
            "--lr",
            "0.01",
        ],
    )
    assert via_launcher.wait() == 2 and "lr (0.003 -> 0.01)" in _one_line(via_launcher)
    assert [e["event"] for e in via_launcher.events()] == ["launcher_exit"]  # no worker started

    allowed = _single(
        tmp_path, "allowed", corpus, "--steps", "8", "--lr", "0.01", "--set", "allowConfigChange=true"
    )
    assert allowed.wait() == 0, allowed.tail()
    [ev] = allowed.events("config_change_allowed")
    assert ev["ckpt_step"] == 4 and ev["changed"] == ["lr (0.003 -> 0.01)"]
    assert [e["ckpt_step"] for e in allowed.events("resumed")] == [4]


def _scrape(port: int) -> dict[str, float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}


@pytest.mark.slow
def test_failing_saves_are_counted_and_a_failed_preemption_save_is_not_143(tmp_path):
    ckpt, port = tmp_path / "ckpt", free_port()
    run = launch(
        tmp_path,
        "run",
        2,
        [
            *ENDLESS,
            "--checkpoint.uri",
            str(ckpt),
            "--checkpoint.interval-steps",
            "2",
            "--metrics-port",
            str(port),
            "--set",
            "checkpoint.maxConsecutiveFailures=1000",
        ],
    )
    try:
        run.wait_for(lambda e: e["event"] == "checkpoint_committed")
        ckpt.rename(tmp_path / "ckpt.moved")  # the volume goes away: the root is now a regular file
        ckpt.write_text("")
        deadline = time.monotonic() + 60
        while _scrape(port).get("trainplane_checkpoint_save_failures_total", 0) < 2:
            assert time.monotonic() < deadline and run.p.poll() is None, run.tail()
            time.sleep(0.2)
    finally:
        run.signal(signal.SIGTERM)
    # the preemption checkpoint cannot be written either: a failure, not "preempted, committed"
    assert run.wait() == 74, run.tail()
    assert run.events("checkpoint_failed") and not run.events("preempted_exit")


def test_saves_failing_in_a_row_end_the_run_with_74(tmp_path):
    ckpt = tmp_path / "ckpt"
    p = Proc(
        [
            "-m",
            "trainer",
            *ENDLESS,
            "--checkpoint.uri",
            str(ckpt),
            "--checkpoint.interval-steps",
            "2",
            "--set",
            "checkpoint.maxConsecutiveFailures=3",
            "--checkpoint.async-save",
            "false",
        ],
        tmp_path,
        "p",
    )
    p.wait_for(lambda e: e["event"] == "checkpoint_committed")
    ckpt.rename(tmp_path / "ckpt.moved")
    ckpt.write_text("")
    assert p.wait() == 74, p.tail()
    assert len(p.events("checkpoint_failed")) == 3
    [ev] = p.events("checkpoint_saves_failed_exit")
    assert "3 checkpoint saves failed in a row" in ev["error"]
