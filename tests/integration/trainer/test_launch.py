"""Launcher exit codes from real runs (0, 143, 2, crash codes) and the training basics."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from tests.helpers import procs
from tests.helpers.trainer import BASE, ENDLESS, PLUGIN, ROOT, Proc, events, finished, launch, run_args


@pytest.mark.slow
def test_loss_falls_on_byte_corpus_and_exit_0(tmp_path, corpus):
    run = launch(
        tmp_path,
        "run",
        2,
        [*BASE, "--dataset", "bytes", "--data-paths", f"[{corpus}]", "--steps", "60", "--seq-len", "64"],
    )
    assert run.wait() == 0, run.tail()
    losses = [e["loss"] for e in run.events("step_done") if e["rank"] == 0]
    assert len(losses) == 60
    # from ~ln(256) = 5.5 for uniform bytes to well below 3 (English letters and spaces)
    assert sum(losses[:3]) / 3 > 5.0
    assert sum(losses[-5:]) / 5 < 3.0
    assert len(run.events("finished")) == 2


@pytest.mark.slow
def test_fsdp2_trains_and_matches_ddp_loss(tmp_path, corpus, reference):
    # the DDP side is the session's cached reference run (tests/integration/trainer/conftest.py): the same
    # trajectory-defining arguments, 2 workers, 24 steps
    ddp = reference(2, 24)
    fsdp = finished(
        tmp_path,
        "fsdp",
        2,
        run_args(corpus, tmp_path, "--parallelism", "fsdp", "--checkpoint.interval-steps", "12", steps=24),
    )
    a = [e["loss"] for e in events(ddp / "ref.out", "step_done") if e["rank"] == 0]
    b = [e["loss"] for e in fsdp.events("step_done") if e["rank"] == 0]
    assert len(a) == len(b) == 24 and a[-1] < a[0]
    assert b == pytest.approx(a, rel=1e-4)
    assert (tmp_path / "ckpt" / "step-24" / "manifest.json").exists()


def test_user_model_and_dataset_plugins(tmp_path):
    run = Proc(["-m", "trainer", *PLUGIN, "--steps", "40", "--model-args", "{vocab_size: 16}"], tmp_path, "p")
    assert run.wait() == 0, run.tail()
    losses = [e["loss"] for e in run.events("step_done")]
    assert losses[0] > 2.0 and losses[-1] < losses[0] / 3  # a bigram table learns +1 mod 16


# SIGTERM to the launcher (exit 143 after a committed checkpoint) is checked on the run that
# test_s3_and_metrics.py::test_metrics_endpoint_scraped_then_sigterm_exits_143_after_commit scrapes, SIGUSR1
# (forwarded, exit 143) on the straggler run of test_watchdog.py, and a worker's own crash code (returned
# by the launcher) on the run of test_logs.py::test_launcher_summary_counts_worker_group_restarts: one
# launcher and its workers each instead of two.


@pytest.mark.slow
def test_worker_killed_by_signal_gives_128_plus_n(tmp_path):
    run = launch(tmp_path, "run", 2, ENDLESS)
    run.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 2)
    os.kill(next(e["pid"] for e in run.events("start") if e["rank"] == 1), signal.SIGKILL)
    assert run.wait() == 137, run.tail()


def _one_line_error(p: Proc) -> str:
    err = p.err.read_text().strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--global-batch-size", "7"], "globalBatchSize"),
        (["--steps", "zero"], "steps"),
        (["--bogus-key", "1"], "bogusKey"),
        (["--set", "checkpoint.keep=1"], "checkpoint.keep"),
        (["--model", "gpt-huge"], "model"),
        (["--parallelism", "tp"], "parallelism"),
    ],
)
def test_bad_config_is_one_line_exit_2(tmp_path, args, key):
    p = Proc(["-m", "trainer", *args], tmp_path, "bad")
    assert p.wait() == 2
    err = _one_line_error(p)
    assert err.startswith("config error:") and key in err


def test_a_bad_config_is_refused_before_torch_is_imported(tmp_path):
    # Every rank of a job with a bad config pays this process start: without torch it is a fraction of it.
    done = procs.run(
        [sys.executable, "-X", "importtime", "-m", "trainer", "--bogus-key", "1"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "trainer.config" in imported and "torch" not in imported
    assert any(line.startswith("config error:") and "bogusKey" in line for line in done.stderr.splitlines())


def test_launcher_bad_config_exit_2_before_workers_start(tmp_path):
    # 8 = 2 x accumulation x 3 has no solution: refused before any worker starts
    p = launch(tmp_path, "bad", 3, ["--global-batch-size", "8", "--micro-batch-size", "2"])
    assert p.wait() == 2
    err = _one_line_error(p)
    assert "globalBatchSize" in err and "world size 3" in err
    assert [e["event"] for e in p.events()] == ["launcher_exit"]  # no worker started
    # the launcher's summary line names the error, in strict JSON (no NaN: test_logs.py)
    (line,) = [ln for ln in p.out.read_text().splitlines() if ln.startswith("{")]
    summary = json.loads(line, parse_constant=lambda token: pytest.fail(f"not JSON: {token}"))
    assert summary["event"] == "launcher_exit" and summary["exit_code"] == 2
    assert summary["meaning"] == "configuration error" and summary["action"] == "fail"


def test_dataloader_workers_do_not_swallow_a_process_group_sigterm(tmp_path):
    # SIGTERM to the whole process group reaches the DataLoader workers too; they must not die on it
    p = Proc(
        [
            "-m",
            "trainer",
            "--steps",
            "100000",
            "--num-workers",
            "2",
            "--threads",
            "1",
            "--log-interval",
            "1",
            "--checkpoint.uri",
            str(tmp_path / "ckpt"),
        ],
        tmp_path,
        "dl",
        new_session=True,
    )
    p.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 3)
    os.killpg(p.p.pid, signal.SIGTERM)
    assert p.wait() == 143, p.tail()
    step = p.events("preempted_exit")[0]["ckpt_step"]
    assert (tmp_path / "ckpt" / f"step-{step}" / "manifest.json").exists()


@pytest.mark.slow
def test_demo_shows_exact_resume(tmp_path):
    p = Proc(["-m", "trainer.demo"], tmp_path, "demo")
    assert p.wait() == 0, p.tail()
    lines = p.out.read_text().splitlines()
    assert any("launcher exit code 143" in ln for ln in lines)
    assert "resumed run MATCHES the uninterrupted run bitwise" in lines[-1]


@pytest.mark.slow
def test_torch_compile_trains_and_checkpoints_clean_keys(tmp_path):
    from tests.helpers.trainer import final_state

    p = Proc(
        [
            "-m",
            "trainer",
            "--compile",
            "true",
            # aot_eager: dynamo traces each block (compiled in place: no `_orig_mod.` names) as inductor
            # does, without generating and compiling C++ (inductor on CPU made this a 105 s test)
            "--compile-backend",
            "aot_eager",
            "--steps",
            "4",
            "--threads",
            "1",
            "--log-interval",
            "1",
            "--checkpoint.uri",
            str(tmp_path / "ckpt"),
        ],
        tmp_path,
        "compiled",
    )
    assert p.wait() == 0, p.tail()
    keys = final_state(tmp_path / "ckpt", 4)["model"].keys()
    assert "tok.weight" in keys and not any("_orig_mod" in k or "module." in k for k in keys)


def test_progress_bar_only_on_a_terminal(tmp_path):
    import pty
    import subprocess
    import sys

    from tests.helpers.trainer import env

    args = [sys.executable, "-m", "trainer", "--steps", "6", "--log-interval", "3", "--threads", "1"]
    leader, follower = pty.openpty()
    with procs.spawn(args, stdout=follower, stderr=subprocess.DEVNULL, env=env(), cwd=tmp_path) as tty_run:
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO once the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert tty_run.wait() == 0
    os.close(leader)
    on_tty = b"".join(chunks).decode(errors="replace")
    piped = Proc(args[1:], tmp_path, "piped")
    assert piped.wait() == 0
    assert "6/6" in on_tty and "loss" in on_tty  # rich's bar: completed/total and the loss column
    assert "6/6" not in piped.out.read_text()
    assert all(line.startswith("{") for line in piped.out.read_text().splitlines())
