"""A user's own model and dataset through the plug-in interface (``module:function``), for tests."""

from __future__ import annotations

import os
import signal
import time

import torch
from torch import nn
from torch.utils.data import Dataset

from trainer.config import TrainConfig


class Bigram(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx)


def bigram(cfg: TrainConfig) -> nn.Module:
    return Bigram(int(cfg.model_args.get("vocab_size", 16)))


def aborts_at_exit(cfg: TrainConfig) -> nn.Module:
    """The bigram, in a process that aborts in interpreter teardown (SIGABRT, as a C++ thread's
    std::terminate there does), after the run's own work is done."""
    import atexit

    atexit.register(os.abort)
    return bigram(cfg)


class Counting(Dataset[torch.Tensor]):
    """x[t+1] = x[t] + 1 mod 16: a bigram model learns it completely."""

    def __init__(self, seq_len: int) -> None:
        self.seq_len = seq_len

    def __len__(self) -> int:
        return 512

    def __getitem__(self, i: int) -> torch.Tensor:
        return (i + torch.arange(self.seq_len + 1)) % 16


def counting(cfg: TrainConfig) -> Dataset[torch.Tensor]:
    return Counting(cfg.seq_len)


class Crashing(Counting):
    """Exits the worker with a distinctive code at a given sample: a real crash for the launcher test."""

    def __getitem__(self, i: int) -> torch.Tensor:
        if os.environ.get("RANK") == "1":
            os._exit(int(os.environ.get("CRASH_CODE", "7")))
        return super().__getitem__(i)


def crashing(cfg: TrainConfig) -> Dataset[torch.Tensor]:
    return Crashing(cfg.seq_len)


class KnockOn(Counting):
    """Rank 1 crashes with a Python exception (exit 1); rank 0 dies of torchrun's SIGTERM (-15).

    Rank 0 restores the default SIGTERM action, as a worker still starting up (or a library that installs
    its own handlers) would have: the agent's teardown signal then kills it, which is what makes the crash
    look like a preemption to a launcher that prefers the signal's code.
    """

    calls = 0

    def __getitem__(self, i: int) -> torch.Tensor:
        KnockOn.calls += 1
        if os.environ.get("RANK") == "0":
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        elif os.environ.get("RANK") == "1" and KnockOn.calls == 20:  # a few steps in: rank 0 is training
            raise RuntimeError("plugin: simulated crash in rank 1's data pipeline")
        return super().__getitem__(i)


def knock_on(cfg: TrainConfig) -> Dataset[torch.Tensor]:
    return KnockOn(cfg.seq_len)


class Sleepy(Bigram):
    """A bigram model whose forward is slow on one rank and hangs there at a given call.

    ``SLOW_RANK`` sleeps ``SLOW_S`` seconds in every forward (a straggler); ``HANG_RANK`` sleeps for an
    hour in its ``HANG_AT``-th forward of each incarnation (a hung rank).
    """

    def __init__(self, vocab: int) -> None:
        super().__init__(vocab)
        self.calls = 0

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        rank = os.environ.get("RANK", "0")
        if rank == os.environ.get("SLOW_RANK"):
            time.sleep(float(os.environ.get("SLOW_S", "0.05")))
        if rank == os.environ.get("HANG_RANK") and self.calls == int(os.environ.get("HANG_AT", "0")):
            time.sleep(3600)
        return super().forward(idx)


def sleepy(cfg: TrainConfig) -> nn.Module:
    return Sleepy(int(cfg.model_args.get("vocab_size", 16)))
