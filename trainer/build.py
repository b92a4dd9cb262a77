"""Factories for what a Trainer is made of: model, parallel wrapper, optimizer, LR schedule, data loader."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

from trainer.config import ConfigError, TrainConfig
from trainer.data import ElasticSampler, Indexed, load_object, worker_init
from trainer.distributed import DistContext
from trainer.model import GPT, gpt_config
from trainer.straggler import StepClock, attach


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """Linear warm-up, then cosine decay to min_lr_ratio; a pure function of the step."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def build_model(cfg: TrainConfig) -> nn.Module:
    if ":" in cfg.model:
        model: nn.Module = load_object(cfg.model, "model")(cfg)
        return model
    try:
        return GPT(gpt_config(cfg.model, cfg.seq_len, cfg.dropout, cfg.model_args))
    except KeyError:
        raise ConfigError(
            f"config error: model: unknown {cfg.model!r}; presets: tiny, mini, gpt-small, or module:function"
        ) from None
    except TypeError as e:
        raise ConfigError(f"config error: modelArgs: {e}") from None


def vocab_size(model: nn.Module, cfg: TrainConfig) -> int:
    """The model's vocabulary (a preset's config, or ``modelArgs.vocab_size`` for a plug-in; 256)."""
    default = int(cfg.model_args.get("vocab_size", 256))
    return int(getattr(getattr(model, "config", None), "vocab_size", default))


def uses_bf16(cfg: TrainConfig, ctx: DistContext) -> bool:
    """Whether the step computes in bf16: asked for, or `auto` on a GPU (fp32 on CPU, where bf16 is slow)."""
    return cfg.precision == "bf16" or (cfg.precision == "auto" and ctx.cuda)


def compiles(cfg: TrainConfig, ctx: DistContext) -> bool:
    """`compile` as set, else on a GPU (where it pays: fused kernels) and not on a CPU (where the compile
    time is not won back in the steps of a test or a small run)."""
    return cfg.compile if cfg.compile is not None else ctx.cuda


def fsdp_mixed_precision(cfg: TrainConfig, ctx: DistContext) -> Any:
    """FSDP2's MixedPrecisionPolicy. In bf16 it gathers the parameters in bf16 (half the all-gather bytes,
    and the matmuls need not cast them) and reduces the gradients in fp32, over fp32 sharded parameters for
    the optimizer: torchtitan's default (pytorch/torchtitan torchtitan/models/llama3/infra/parallelize.py
    apply_fsdp, with mixed_precision_param bfloat16 and mixed_precision_reduce float32). In fp32: none."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if uses_bf16(cfg, ctx):
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def wrap_model(
    model: nn.Module, cfg: TrainConfig, ctx: DistContext, clock: StepClock
) -> tuple[nn.Module, Any]:
    """``torch.compile`` per block when compiling, then DDP, or FSDP2 ``fully_shard`` per block and root.

    Compiling each block in place before wrapping, as torchtitan does (apply_compile before apply_fsdp in
    torchtitan/models/llama3/infra/parallelize.py; nanoGPT compiles before DDP too): compiling the DDP
    wrapper instead makes dynamo break the graph at every gradient bucket (DDPOptimizer), and in-place
    `Module.compile` keeps the state-dict keys (no `_orig_mod.`). A model without `blocks` (a plug-in) is
    compiled whole, in place. Returns the wrapped module (what holds the parameters, for the optimizer and
    gradient sync) and the callable the forward pass goes through.
    """
    model.to(ctx.device)
    if compiles(cfg, ctx):
        for m in getattr(model, "blocks", None) or [model]:
            m.compile(backend=cfg.compile_backend)
    if cfg.parallelism == "fsdp":
        from torch.distributed.fsdp import fully_shard

        mp = fsdp_mixed_precision(cfg, ctx)
        for m in getattr(model, "blocks", []):
            fully_shard(m, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        wrapped: nn.Module = model
    else:
        wrapped = DDP(model, device_ids=[ctx.local_rank] if ctx.cuda else None)
    attach(wrapped, clock)
    return wrapped, wrapped


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW, fused: one kernel per step for all parameters instead of one per tensor and operation
    (torch 2.13 torch/optim/adamw.py `fused`: CUDA and CPU, fp32/bf16/fp16; the default is the foreach
    implementation). The state it keeps (step, exp_avg, exp_avg_sq) is the same, so a checkpoint written by
    the unfused optimizer resumes."""
    return torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay, fused=True
    )


def build_scheduler(opt: torch.optim.Optimizer, cfg: TrainConfig) -> LambdaLR:
    return LambdaLR(opt, lambda s: lr_factor(cfg, s))


def build_loader(
    dataset: Dataset[torch.Tensor], cfg: TrainConfig, ctx: DistContext
) -> tuple[ElasticSampler, DataLoader[Any]]:
    """This rank's sampler (starting at step 0 until a resume moves it) and the loader around it."""
    sampler = ElasticSampler(
        len(dataset),  # type: ignore[arg-type]  # map-style datasets have a length
        cfg.seed,
        cfg.global_batch_size,
        cfg.micro_batch_size,
        ctx.world_size,
        ctx.rank,
        0,
        cfg.steps,
    )
    loader = DataLoader(
        Indexed(dataset),
        batch_size=cfg.micro_batch_size,
        sampler=sampler,
        num_workers=cfg.num_workers,
        worker_init_fn=worker_init,
        # its own generator: creating the iterator must not consume the training RNG
        generator=torch.Generator().manual_seed(cfg.seed),
        pin_memory=ctx.cuda,
    )
    return sampler, loader
