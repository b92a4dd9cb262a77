"""trainer/zygote.py: the launcher forks its workers from a zygote that has imported torch, and starts them
fresh where a fork cannot honour the start (the exit codes, restarts and signals through the zygote are the
rest of this folder's tests: every launcher of theirs uses it)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.helpers import procs
from tests.helpers.trainer import ENDLESS, env, launch


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _workers(run) -> list[int]:
    run.wait_for(lambda e: e["event"] == "step_done" and e["step"] >= 2)
    pids = [e["pid"] for e in run.events("start")]
    assert len(pids) == 2
    return pids


def test_workers_are_forked_from_the_zygote_in_sessions_of_their_own_and_die_with_the_launcher(tmp_path):
    run = launch(tmp_path, "run", 2, [*ENDLESS, "--checkpoint.uri", str(tmp_path / "ckpt")])
    workers = _workers(run)
    try:
        zygotes = {_ppid(p) for p in workers}
        assert len(zygotes) == 1
        (zygote,) = zygotes
        # the zygote is the launcher's child; each worker leads a session of its own, as torchrun's Popen
        # makes them (torchrun signals a worker's group); that they train at all shows each was told the
        # zygote is the parent it dies with (trainer/lifecycle.py: a worker whose parent is not the one named
        # takes its launcher for dead and stops)
        assert zygote != run.p.pid and _ppid(zygote) == run.p.pid
        assert all(os.getsid(p) == p for p in workers)
        # a SIGTERM to the launcher's group reaches the zygote too: it must not die of it (its workers would
        # die with it, before their preemption checkpoint)
        os.kill(zygote, signal.SIGTERM)
        time.sleep(0.5)
        assert procs.alive(zygote) and all(procs.alive(p) for p in workers)
        os.kill(run.p.pid, signal.SIGKILL)  # the launcher alone: the zygote, then the workers, die with it
        run.p.wait(10)
        deadline = time.monotonic() + 15
        while any(procs.alive(p) for p in [zygote, *workers]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(procs.alive(p) for p in [zygote, *workers]), (
            "the zygote or a worker outlived the launcher"
        )
    finally:
        run.kill_tree()
        for p in workers:
            if procs.alive(p):
                os.kill(p, signal.SIGKILL)


def test_a_worker_whose_startup_environment_differs_starts_fresh_and_trains(tmp_path):
    # An env script that sets LD_LIBRARY_PATH (read by the loader when a process starts, which a fork cannot
    # redo): torchrun starts the workers itself, as before the zygote, and they train.
    script = tmp_path / "env.sh"
    script.write_text(f"export LD_LIBRARY_PATH={tmp_path}\n")
    run = launch(
        tmp_path,
        "ld",
        2,
        [*ENDLESS, "--checkpoint.uri", str(tmp_path / "ckpt")],
        extra_env={"TRAINPLANE_ENV_SCRIPT": str(script)},
    )
    try:
        assert {_ppid(p) for p in _workers(run)} == {run.p.pid}
    finally:
        run.kill_tree()
        run.wait(30)


def test_a_zygote_whose_children_could_not_use_cuda_refuses_to_serve(tmp_path):
    # What torch does after a device count or CUDA init in the parent: every later fork is "bad" and refuses
    # CUDA. Faked here (a CPU build): the server must exit with the reason rather than fork broken workers.
    import sys

    code = (
        "import torch; torch.cuda._is_in_bad_fork = lambda: True\n"
        "from trainer.forkserver import serve; import os\n"
        f"serve({str(tmp_path / 'z.sock')!r}, os.getppid(), ('torch',))\n"
    )
    root = Path(__file__).resolve().parents[3]
    done = procs.run(
        [sys.executable, "-c", code], cwd=root, env=env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and not (tmp_path / "z.sock").exists()
    assert "CUDA was initialized before the fork" in done.stderr
