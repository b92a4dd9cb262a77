"""The GPU bench (tests/benchmarks/bench_gpu.py, `make bench-gpu`) runs end to end before a GPU is lent:
its dry mode takes every part through the same code on the CPU (issue 34, point 4)."""

from __future__ import annotations

import json
import os
import sys

from tests.conftest import ROOT
from tests.helpers import procs


def test_the_dry_bench_runs_every_part_and_writes_its_json_and_table(tmp_path):
    out, table = tmp_path / "bench.json", tmp_path / "bench.md"
    # One trainer run that takes the compiled FSDP2 path of the larger workload, plus the bare loop, the
    # checkpoint stall beside its copy floor and the collectives sweep: the rest are the same function.
    cmd = [sys.executable, "tests/benchmarks/bench_gpu.py", "--dry", "--runs", "gpt-1b fsdp compiled"]
    # OMP_NUM_THREADS as a pod with more than one GPU has it (torchrun's default for its workers): the
    # launchers' workers are forked from their zygote (trainer/zygote.py), as they would be there.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = procs.run([*cmd, "--json", str(out), "--markdown", str(table)], cwd=ROOT, capture_output=True,
                     text=True, timeout=400, env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["dry"] is True and list(result["runs"]) == ["gpt-1b fsdp compiled"]
    run = result["runs"]["gpt-1b fsdp compiled"]
    assert run["steps_measured"] == 3 and run["tokens_per_s"] > 0 and run["mfu"] is None  # no GPU peak on CPU
    assert result["bare_ddp"]["step_s"] > 0
    ckpt = result["checkpoint"]
    assert ckpt["blocking_s_steady_median"] > 0 and ckpt["state_bytes"] > 0
    assert result["collectives"]["backend"] == "gloo"
    md = table.read_text()
    assert "| gpt-1b fsdp compiled |" in md and "bare DDP loop" in md and "async save: training blocked" in md


def test_without_a_gpu_the_real_bench_refuses_in_one_line():
    done = procs.run([sys.executable, "tests/benchmarks/bench_gpu.py"], cwd=ROOT, capture_output=True, text=True,
                     timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "bench_gpu: no CUDA device here; --dry runs the same parts on the CPU"
    ]
