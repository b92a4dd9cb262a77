"""trainer/zygote.py: which worker starts the zygote makes, and which it leaves to torchrun (no process)."""

from __future__ import annotations

import sys

import pytest

from trainer.zygote import Zygote, initial_env, startup_env

TORCHRUN = [sys.executable, "-u", "-m", "trainer", "--steps", "3"]


def test_off_means_no_zygote_and_nothing_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPLANE_ZYGOTE", "0")
    assert Zygote.fork() == (None, "")


@pytest.mark.parametrize(
    "args, env_change",
    [
        (TORCHRUN, {"LD_LIBRARY_PATH": "/opt/efa/lib"}),  # the loader read another value at start
        (TORCHRUN, {"OMP_NUM_THREADS": "1"}),  # torchrun's default, when the launcher started without one
        (["/usr/bin/numactl", "--cpunodebind=0", *TORCHRUN], {}),  # a NUMA binding wraps the interpreter
        ([sys.executable, "-u", "train.py"], {}),  # a script, not -m
    ],
)
def test_a_start_a_fork_cannot_honour_is_left_to_torchrun(
    args: list[str], env_change: dict[str, str]
) -> None:
    base = {k: v for k, v in initial_env().items() if k not in env_change}
    zygote = Zygote("/nonexistent/zygote.sock", 0, base)  # never reached: decided before any connection
    assert zygote.start(args, {**base, **env_change}, (None, None)) is None


def test_what_torchrun_sets_for_nccls_process_group_does_not_count_as_startup() -> None:
    env = {"OMP_NUM_THREADS": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "LOCAL_RANK": "0"}
    assert startup_env(env) == {"OMP_NUM_THREADS": "1"}


def test_the_initial_environment_is_the_one_the_process_started_with(monkeypatch: pytest.MonkeyPatch) -> None:
    before = initial_env()
    monkeypatch.setenv("TRAINPLANE_SET_AFTER_START", "1")  # as an env script or torchrun would
    assert "TRAINPLANE_SET_AFTER_START" not in initial_env() and initial_env() == before
