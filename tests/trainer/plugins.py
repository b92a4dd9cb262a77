"""A user's own model and dataset through the plug-in interface (``module:function``), for tests."""

from __future__ import annotations

import os

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
