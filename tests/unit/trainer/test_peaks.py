"""MFU against the exact GPU part's peak, over the wall time between steps (issue 34, point 3)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
import torch

from trainer import reporting
from trainer.metrics import EventLog, Metrics
from trainer.peaks import gpu_peak
from trainer.reporting import StepReporter, StepResult


@pytest.mark.parametrize(
    ("device", "model", "tflops"),
    [
        # What torch.cuda.get_device_name reports for each part (nvidia-smi's product names).
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", "H100 NVL", 835.5),
        ("NVIDIA H200", "H200 SXM", 989.5),
        ("NVIDIA H200 NVL", "H200 NVL", 835.5),
        ("NVIDIA B200", "B200", 2250),
        ("NVIDIA GB200", "GB200", 2500),
        ("NVIDIA B300 SXM6 AC", "B300", 2250),
        ("NVIDIA GB300", "GB300", 2500),
        ("NVIDIA A100-SXM4-80GB", "A100", 312),
        ("NVIDIA L4", "L4", 121),
        ("NVIDIA L40S", "L40S", 362.05),
    ],
)
def test_each_part_gets_its_own_datasheet_peak(device, model, tflops):
    peak = gpu_peak(device)
    assert peak is not None and (peak.model, peak.tflops) == (model, tflops)


def test_a_part_not_in_the_table_gets_no_mfu_rather_than_a_neighbours_peak():
    assert [gpu_peak(n) for n in ("Tesla T4", "NVIDIA RTX 4090", "NVIDIA A10")] == [None, None, None]


def test_throughput_and_mfu_are_over_the_wall_time_between_steps(monkeypatch):
    """The second step took 1 s itself, but 4 s passed since the first one's end (a checkpoint save ran in
    between): tokens/s and MFU say 4 s, step_s keeps the step's own second."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    clock = iter([100.0, 104.0])
    monkeypatch.setattr(reporting.time, "perf_counter", lambda: next(clock))
    cfg = SimpleNamespace(global_batch_size=8, seq_len=128, log_interval=1, steps=10)
    ctx = SimpleNamespace(cuda=True, device=0, world_size=2, rank=0, local_rank=0)
    out = io.StringIO()
    reporter = StepReporter(cfg, ctx, Metrics("j"), EventLog("j", 0, out), 1e9, None)  # type: ignore[arg-type]
    for step in (0, 1):
        reporter.step_done(step, StepResult(2.0, False, 1.0, [1.0, 1.0]), lr=1e-3)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    tokens = 8 * 128
    assert (first["wall_s"], first["tokens_per_s"]) == (1.0, tokens / 1.0)
    assert (second["step_s"], second["wall_s"], second["tokens_per_s"]) == (1.0, 4.0, tokens / 4.0)
    assert second["mfu"] == round(1e9 * tokens / 4.0 / (756e12 * 2), 4)
    assert reporter.metrics.mfu._value.get() == pytest.approx(1e9 * tokens / 4.0 / (756e12 * 2))
