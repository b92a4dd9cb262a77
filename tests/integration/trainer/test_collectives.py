"""The NCCL-test sweep on two real ranks (gloo) and its floor (tests/unit/trainer/test_collectives.py has
the rest)."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers import procs
from tests.helpers.trainer import PY, ROOT, env, free_port
from trainer.collectives import Result, find_result


def _run(*args: str) -> subprocess.CompletedProcess:
    return procs.run(
        [
            PY,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node=2",
            "--nnodes=1",
            f"--master-port={free_port()}",
            "-m",
            "trainer.collectives",
            *args,
        ],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_two_ranks_sweep_every_size_and_a_floor_above_the_peak_fails_the_run():
    # One run, two verdicts: the floor is judged on the peak the run itself reports.
    p = _run("--min-bytes", "64K", "--max-bytes", "256K", "--iters", "2", "--warmup", "1",
             "--floor-gbps", "100000")  # fmt: skip
    assert p.returncode == 1, p.stderr[-2000:]
    result = find_result(p.stdout)
    assert result is not None, p.stdout
    assert (result.collective, result.world_size, result.backend) == ("all_gather", 2, "gloo")
    assert [r.size for r in result.rows] == [64 << 10, 128 << 10, 256 << 10]
    for r in result.rows:
        # nccl-tests' definitions: algbw = bytes / time, busbw = algbw * (n-1)/n for all_gather.
        assert r.algbw_gbps == pytest.approx(r.size / (r.time_us * 1e-6) / 1e9, rel=1e-6)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 0.5, rel=1e-9)
    assert not result.passed and "BELOW FLOOR" in p.stdout
    assert Result(**{**result.__dict__, "floor_gbps": result.peak_busbw_gbps}).passed
