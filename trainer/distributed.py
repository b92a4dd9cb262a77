"""This process's place in the job (from torchrun's environment) and the process groups it trains in."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    """Rank, world and device of this process. torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and
    TORCHELASTIC_RESTART_COUNT; a plain process is rank 0 of 1. RANK is not stable across restarts."""

    rank: int
    world_size: int
    local_rank: int
    restart_count: int
    cuda: bool
    device: torch.device

    @classmethod
    def from_env(cls) -> DistContext:
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        cuda = torch.cuda.is_available()
        return cls(
            rank=int(os.environ.get("RANK", 0)),
            world_size=int(os.environ.get("WORLD_SIZE", 1)),
            local_rank=local_rank,
            restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)),
            cuda=cuda,
            device=torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu"),
        )


def init_process_groups(ctx: DistContext) -> dist.ProcessGroup:
    """Join the job's default group; return a gloo group for checkpoint collectives.

    gloo next to nccl: async checkpoint collectives run on CPU in a background thread.
    """
    if ctx.cuda:
        torch.cuda.set_device(ctx.device)
    backend = "cpu:gloo,cuda:nccl" if ctx.cuda else "gloo"
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # torchrun's agent store outlives a group restart, and gloo's address exchange would read the
        # dead group's keys (seen here: restarted ranks dialling the killed worker's port). A prefix
        # per restart gives each incarnation a clean namespace.
        base = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            world_size=ctx.world_size,
            is_master=False,
            timeout=timedelta(minutes=10),
        )
        store = dist.PrefixStore(f"trainplane/restart-{ctx.restart_count}", base)
        dist.init_process_group(backend, store=store, rank=ctx.rank, world_size=ctx.world_size)
    elif "MASTER_ADDR" in os.environ:
        dist.init_process_group(backend)
    else:  # a plain single process: a group of one keeps one code path
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    group = dist.new_group(backend="gloo")
    assert group is not None  # every rank is a member
    return group
