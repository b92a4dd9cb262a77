"""The compute path's choices (issue 34, point 1): fused AdamW, FSDP2 mixed precision in bf16."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from trainer.build import build_model, build_optimizer, compiles, fsdp_mixed_precision, uses_bf16
from trainer.config import TrainConfig


def test_adamw_is_fused_and_steps_on_cpu():
    cfg = TrainConfig(model="tiny")
    model = build_model(cfg)
    opt = build_optimizer(model, cfg)
    assert opt.defaults["fused"] is True
    loss = model(torch.randint(0, 256, (2, 8))).float().mean()
    loss.backward()
    before = next(model.parameters()).detach().clone()
    opt.step()
    assert not torch.equal(before, next(model.parameters()))
    assert set(opt.state_dict()["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


def test_fsdp_gathers_bf16_and_reduces_fp32_only_when_the_step_is_bf16():
    gpu, cpu = SimpleNamespace(cuda=True), SimpleNamespace(cuda=False)
    auto = TrainConfig(parallelism="fsdp")
    assert uses_bf16(auto, gpu) and not uses_bf16(auto, cpu)  # type: ignore[arg-type]
    mp = fsdp_mixed_precision(auto, gpu)  # type: ignore[arg-type]
    assert (mp.param_dtype, mp.reduce_dtype) == (torch.bfloat16, torch.float32)
    fp32 = fsdp_mixed_precision(auto, cpu)  # type: ignore[arg-type]
    assert (fp32.param_dtype, fp32.reduce_dtype) == (None, None)
    asked = fsdp_mixed_precision(TrainConfig(parallelism="fsdp", precision="bf16"), cpu)  # type: ignore[arg-type]
    assert asked.param_dtype == torch.bfloat16


def test_compile_is_on_by_default_on_a_gpu_only_and_as_set_otherwise():
    gpu, cpu = SimpleNamespace(cuda=True), SimpleNamespace(cuda=False)
    assert [compiles(TrainConfig(), c) for c in (gpu, cpu)] == [True, False]  # type: ignore[arg-type]
    assert compiles(TrainConfig(compile=True), cpu) and not compiles(TrainConfig(compile=False), gpu)  # type: ignore[arg-type]
