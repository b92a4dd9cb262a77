"""What the trainer and its launcher log, from real runs: strict JSON lines whose numbers are true."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.trainer import BASE, PLUGIN, Proc, launch


def _strict(line: str) -> dict[str, Any]:
    """json.loads that rejects NaN and Infinity, as RFC 8259 (and jq, Loki's json stage) do."""

    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(line, parse_constant=refuse)


def _lines(p: Proc) -> list[dict[str, Any]]:
    return [_strict(line) for line in p.out.read_text().splitlines() if line.startswith("{")]


def _run(tmp_path: Path, name: str, ckpt: Path) -> Proc:
    args = [*BASE, "--steps", "4", "--job-name", "logs", "--checkpoint.uri", str(ckpt)]
    run = launch(tmp_path, name, 2, [*args, "--checkpoint.interval-steps", "2"])
    assert run.wait() == 0, run.tail()
    return run


@pytest.mark.slow
def test_a_run_and_its_rerun_log_true_numbers_in_strict_json(tmp_path):
    """Rank 1 logged `"bytes": 0` for the shards it wrote; a resumed run logged `"step": 0` beside
    `ckpt_step`; a finished job started again logged `"loss": NaN` (not JSON); the launcher said nothing
    of its own. Now each rank reports its own shard bytes, `resumed` carries the step training continues
    from, a run without steps logs `"loss": null`, and the launcher ends with one summary line."""
    ckpt = tmp_path / "ckpt"
    first = _run(tmp_path, "first", ckpt)
    lines = _lines(first)  # every line strict JSON

    shards = [e for e in lines if e["event"] == "checkpoint_shards_written"]
    assert {e["rank"] for e in shards} == {1} and {e["ckpt_step"] for e in shards} == {2, 4}
    for e in shards:
        step_dir = ckpt / f"step-{e['ckpt_step']}"
        if step_dir.exists():  # retention may have removed step-2
            own = sum(f.stat().st_size for f in step_dir.glob("__1_*.distcp"))
            assert e["bytes"] == own > 0
    (committed,) = [e for e in lines if e["event"] == "checkpoint_committed" and e["ckpt_step"] == 4]
    assert committed["bytes"] == json.loads((ckpt / "step-4" / "manifest.json").read_text())["bytes"]

    again = _run(tmp_path, "again", ckpt)
    lines = _lines(again)
    resumed = [e for e in lines if e["event"] == "resumed"]
    assert len(resumed) == 2 and all(e["step"] == e["ckpt_step"] == 4 for e in resumed)
    finished = [e for e in lines if e["event"] == "finished"]
    assert len(finished) == 2 and all(e["loss"] is None for e in finished)

    summary = lines[-1]
    assert summary["event"] == "launcher_exit" and summary["job"] == "logs"
    assert (summary["exit_code"], summary["meaning"], summary["action"]) == (0, "complete", "success")
    assert summary["restarts"] == 0 and summary["duration_s"] > 0


def test_launcher_summary_counts_worker_group_restarts(tmp_path):
    """Also the launcher's exit code after a worker's crash: the worker's own code (7), once the restarts
    are spent."""
    run = launch(
        tmp_path,
        "run",
        2,
        [*PLUGIN, "--dataset", "tests.integration.trainer.plugins:crashing", "--steps", "5"],
        run_opts=["--max-restarts", "1"],
        extra_env={"CRASH_CODE": "7"},
    )
    assert run.wait() == 7, run.tail()
    summary = _lines(run)[-1]
    assert summary["event"] == "launcher_exit"
    assert (summary["exit_code"], summary["meaning"], summary["action"]) == (
        7,
        "a worker's own exit code",
        "count",
    )
    assert summary["restarts"] == 1


# The launcher's summary after a config error: test_launch.py::test_launcher_bad_config_exit_2_before_workers_start
# (the same launcher run).


def test_event_log_writes_no_nan_even_when_a_value_is_not_finite():
    """A diverged loss (nan) or an infinite throughput stays strict JSON: null."""
    import io

    from trainer.metrics import EventLog

    out = io.StringIO()
    EventLog("j", 0, out)(
        "step_done", loss=float("nan"), tokens_per_s=float("inf"), losses=[1.0, float("-inf")]
    )
    rec = _strict(out.getvalue())
    assert (rec["loss"], rec["tokens_per_s"], rec["losses"]) == (None, None, [1.0, None])
