"""The NCCL preflight's sweep (trainer.collectives): real ranks under torchrun (gloo on CPU here), the
bus-bandwidth arithmetic of nccl-tests, and the floor verdict the CLI reads from the pod log."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers.trainer import PY, ROOT, env, free_port
from trainer.collectives import RESULT_PREFIX, Result, Row, bus_factor, find_result, main, table


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
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


def test_all_reduce_uses_its_own_bus_factor():
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_gather", 8) == 7 / 8
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("broadcast", 2)


def test_the_result_line_round_trips_and_the_last_one_wins():
    r = Result("all_reduce", 16, "nccl", [Row(1 << 30, 9000.0, 119.3, 223.7)], 189.0)
    log = "\n".join(["noise", f"{RESULT_PREFIX} {r.to_json()}", "more noise"])
    assert find_result(log) == r and r.passed
    low = Result("all_reduce", 16, "nccl", [Row(1 << 30, 9000.0, 50.0, 93.7)], 189.0)
    assert find_result(log + f"\n{RESULT_PREFIX} {low.to_json()}") == low and not low.passed
    assert find_result("the pod died before the sweep") is None
    assert "peak busbw 93.70 GB/s, floor 189.0 GB/s: BELOW FLOOR" in table(low)


def test_a_bad_sweep_is_a_config_error_not_a_crash(capsys):
    assert main(["--min-bytes", "8M", "--max-bytes", "1M"]) == 2
    assert "bad sweep" in capsys.readouterr().err
