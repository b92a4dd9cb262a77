"""The launcher's exit code tells the truth (issue 14 points 0, 1, 2, 5): real processes, signals, files."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest

from tests.helpers import procs
from tests.helpers.trainer import ENDLESS, PLUGIN, Proc, launch
from trainer.checkpoint import ENV_FAULT_COMMIT_DELAY
from trainer.launch import failure_code


def _one_line(p: Proc) -> str:
    err = p.err.read_text().strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.slow
def test_crash_whose_peer_dies_of_torchruns_sigterm_is_not_143(tmp_path):
    # rank 1 raises (exit 1); torchrun then SIGTERMs rank 0, which dies of it (-15). The crash must win:
    # 143 would tell Kubernetes "preempted, checkpoint committed" and retry the crash forever.
    run = launch(
        tmp_path,
        "run",
        2,
        [*PLUGIN, "--dataset", "tests.integration.trainer.plugins:knock_on", "--steps", "50"],
    )
    assert run.wait() == 1, run.tail()
    assert "simulated crash" in run.err.read_text()


def test_a_teardown_crash_after_the_run_cannot_change_its_exit_code(tmp_path):
    # A finished rank whose interpreter teardown aborts (a C++ thread's std::terminate: SIGABRT, -6; seen once
    # in CI after `finished`) must still exit 0: torchrun would otherwise restart the group (trainer/__main__.py).
    run = Proc(
        [
            "-m",
            "trainer",
            *PLUGIN,
            *("--model", "tests.integration.trainer.plugins:aborts_at_exit", "--steps", "3"),
            *("--checkpoint.uri", str(tmp_path / "ckpt"), "--checkpoint.async-save", "false"),
        ],
        tmp_path,
        "run",
    )
    assert run.wait() == 0, run.tail()
    assert [e["step"] for e in run.events("finished")] == [3]


def test_failure_code_prefers_the_first_real_failure():
    def f(pid: int, code: int, ts: int = 100) -> SimpleNamespace:
        return SimpleNamespace(pid=pid, exitcode=code, timestamp=ts)

    crash_then_sigterm = {0: f(10, -15), 1: f(11, 1)}
    assert failure_code(crash_then_sigterm, {11}, preempted=False, finished=False) == 1
    hang_then_knock_on = {0: f(10, 1), 1: f(11, 124)}
    assert failure_code(hang_then_knock_on, {10, 11}, preempted=False, finished=False) == 124
    assert failure_code({0: f(10, -9)}, {10}, preempted=False, finished=False) == 137
    # a local worker's crash and its local peer's broken collective (75): the crash, counted
    crash_then_peer_lost = {0: f(10, 1, 100), 1: f(11, 75, 99)}
    assert failure_code(crash_then_peer_lost, {10, 11}, preempted=False, finished=False) == 1
    # a remote node gone: the local workers' 75 wins over an abort from NCCL's watchdog
    assert failure_code({0: f(10, 75), 1: f(11, -6, 99)}, {10, 11}, preempted=False, finished=False) == 75
    # a worker that exits 143 without the committed-preemption marker is not a preemption
    assert failure_code({0: f(10, 143)}, {10}, preempted=False, finished=False) == 1
    assert failure_code({0: f(10, -15)}, {10}, preempted=True, finished=False) == 143
    assert failure_code({0: f(10, -6)}, {10}, preempted=False, finished=True) == 0


@pytest.mark.slow
def test_sigterm_while_the_final_checkpoint_is_written_exits_0(tmp_path):
    # The pod is deleted as the run ends: SIGTERM arrives while rank 0 commits the final checkpoint.
    ckpt = tmp_path / "ckpt"
    run = launch(
        tmp_path,
        "run",
        2,
        ["--steps", "6", "--threads", "1", "--log-interval", "1", "--checkpoint.uri", str(ckpt)],
        extra_env={ENV_FAULT_COMMIT_DELAY: "3"},
    )
    run.wait_for(lambda e: e["event"] == "fault_commit_delay" and e["ckpt_step"] == 6)
    run.signal(signal.SIGTERM)
    assert run.wait() == 0, run.tail()
    assert (ckpt / "step-6" / "manifest.json").exists()
    assert len(run.events("finished")) == 2 and not run.events("preempted_exit")


@pytest.fixture
def denied_bucket(moto_s3):
    """A moto bucket whose policy denies PutObject to everyone."""
    import json

    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=moto_s3["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    s3.create_bucket(Bucket="locked")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Resource": "arn:aws:s3:::locked/*",
            }
        ],
    }
    s3.put_bucket_policy(Bucket="locked", Policy=json.dumps(policy))
    return moto_s3


@pytest.mark.parametrize(
    ("root", "needle"),
    [
        ("{tmp}/a-file/ckpt", "NotADirectoryError"),  # a path under a regular file
        ("/proc/trainplane-ckpt", "cannot write to /proc/trainplane-ckpt"),  # a directory that cannot exist
        ("s3://no-such-bucket/run", "s3://no-such-bucket/run"),  # a missing bucket
    ],
)
def test_unwritable_checkpoint_root_is_one_line_exit_2_before_workers_start(tmp_path, request, root, needle):
    (tmp_path / "a-file").write_text("not a directory")
    uri = root.format(tmp=tmp_path)
    # moto_server only where the root is on S3 (a server start is seconds of CPU)
    s3_env = request.getfixturevalue("moto_s3") if uri.startswith("s3://") else None
    run = launch(
        tmp_path,
        "run",
        2,
        ["--steps", "4", "--threads", "1", "--checkpoint.uri", uri],
        extra_env=s3_env,
    )
    assert run.wait() == 2, run.tail()
    err = _one_line(run)
    assert err.startswith("config error: checkpoint.uri:") and needle in err
    assert [e["event"] for e in run.events()] == ["launcher_exit"]  # no worker started


def test_bucket_that_denies_writes_is_one_line_exit_2(tmp_path, denied_bucket):
    run = launch(
        tmp_path, "run", 2, ["--steps", "4", "--checkpoint.uri", "s3://locked/run"], extra_env=denied_bucket
    )
    code = run.wait()
    if code == 0:
        pytest.skip("this moto_server does not enforce bucket policies")  # the missing-bucket case still runs
    assert code == 2, run.tail()
    assert "s3://locked/run" in _one_line(run)


def test_unwritable_root_in_a_plain_worker_is_one_line_exit_2(tmp_path):
    (tmp_path / "a-file").write_text("x")
    p = Proc(
        ["-m", "trainer", "--steps", "4", "--checkpoint.uri", str(tmp_path / "a-file" / "c")], tmp_path, "w"
    )
    assert p.wait() == 2, p.tail()
    assert _one_line(p).startswith("config error: checkpoint.uri:")
    assert not p.events("step_done")


def test_missing_data_path_is_one_line_exit_2_before_workers_start(tmp_path):
    missing = tmp_path / "no-such-corpus.txt"
    run = launch(tmp_path, "run", 2, ["--dataset", "bytes", "--data-paths", f"[{missing}]"])
    assert run.wait() == 2, run.tail()
    assert _one_line(run) == f"config error: dataPaths: no such file: {missing}"
    assert [e["event"] for e in run.events()] == ["launcher_exit"]  # no worker started


@pytest.mark.slow
def test_workers_die_with_a_launcher_killed_by_sigkill(tmp_path):
    run = launch(tmp_path, "run", 2, [*ENDLESS, "--checkpoint.uri", str(tmp_path / "ckpt")])
    run.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 2)
    workers = [e["pid"] for e in run.events("start")]
    assert len(workers) == 2
    try:
        os.kill(run.p.pid, signal.SIGKILL)  # the launcher alone, not its session
        run.p.wait(10)
        deadline = time.monotonic() + 15
        while any(procs.alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(procs.alive(p) for p in workers), "workers outlived their launcher"
    finally:
        for p in workers:
            if procs.alive(p):
                os.kill(p, signal.SIGKILL)
