"""Datasets and the elastic sampler.

Any map-style dataset works: ``len(ds)`` samples, ``ds[i]`` a 1-D LongTensor of ``seq_len + 1`` token ids
(inputs are ``x[:-1]``, targets ``x[1:]``). Plug one in with ``dataset: "package.module:factory"``;
the factory is called as ``factory(cfg)``.

Data order depends only on (seed, epoch, global sample offset), never on the world size or on state held
in DataLoader workers: the sample at global position ``p`` is ``perm(seed, p // N)[p % N]``. Step ``s``
consumes positions ``[s * G, (s + 1) * G)`` for global batch G; micro-batch ``a`` of rank ``r`` at world
size ``W`` takes the slice starting at ``s * G + (a * W + r) * mb``. A resumed or resized run therefore
trains each step on exactly the samples an uninterrupted run would.
"""

from __future__ import annotations

import glob
import importlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from trainer.config import ConfigError, TrainConfig


def load_object(ref: str, key: str) -> Callable[..., Any]:
    """Resolve ``package.module:attr``; a bad reference is a config error naming the key."""
    mod_name, _, attr = ref.partition(":")
    try:
        obj = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"config error: {key}: cannot load {ref!r}: {e}") from None
    if not callable(obj):
        raise ConfigError(f"config error: {key}: {ref!r} is not callable")
    return obj


class ByteCorpus(Dataset[torch.Tensor]):
    """Files read as raw bytes (vocabulary 256), cut into non-overlapping windows of seq_len + 1."""

    def __init__(self, paths: list[str], seq_len: int) -> None:
        files = sorted({f for p in paths for f in (glob.glob(p) or [p])})
        try:
            blob = b"".join(Path(f).read_bytes() for f in files)
        except OSError as e:
            raise ConfigError(f"config error: dataPaths: cannot read {e.filename}: {e.strerror}") from None
        self.seq_len = seq_len
        self.data = torch.from_numpy(np.frombuffer(blob, dtype=np.uint8).copy())
        if len(self) < 1:
            raise ConfigError(f"config error: dataPaths: {len(blob)} bytes is less than one sample")

    def __len__(self) -> int:
        return (len(self.data) - 1) // self.seq_len

    def __getitem__(self, i: int) -> torch.Tensor:
        start = i * self.seq_len
        return self.data[start : start + self.seq_len + 1].long()


class SyntheticTokens(Dataset[torch.Tensor]):
    """Deterministic, learnable sequences: x[t+1] = (x[t] + stride) mod vocab, from a per-index seed."""

    def __init__(self, size: int, seq_len: int, vocab: int, seed: int) -> None:
        self.size, self.seq_len, self.vocab, self.seed = size, seq_len, vocab, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        start = int(torch.randint(self.vocab, (1,), generator=g))
        stride = int(torch.randint(1, 8, (1,), generator=g))
        return (start + stride * torch.arange(self.seq_len + 1)) % self.vocab


def build_dataset(cfg: TrainConfig, vocab: int) -> Dataset[torch.Tensor]:
    if cfg.dataset == "synthetic":
        return SyntheticTokens(65_536, cfg.seq_len, vocab, cfg.seed)
    if cfg.dataset == "bytes":
        if not cfg.data_paths:
            raise ConfigError("config error: dataPaths: required when dataset is 'bytes'")
        return ByteCorpus(cfg.data_paths, cfg.seq_len)
    if ":" in cfg.dataset:
        return load_object(cfg.dataset, "dataset")(cfg)
    raise ConfigError(
        f"config error: dataset: unknown {cfg.dataset!r}; use synthetic, bytes or module:function"
    )


def epoch_permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 7919 + epoch))


class ElasticSampler(Sampler[int]):
    """Yields this rank's dataset indices for steps ``start_step .. end_step`` in training order."""

    def __init__(
        self,
        n: int,
        seed: int,
        global_batch: int,
        micro_batch: int,
        world_size: int,
        rank: int,
        start_step: int,
        end_step: int,
    ) -> None:
        self.n, self.seed = n, seed
        self.gb, self.mb, self.ws, self.rank = global_batch, micro_batch, world_size, rank
        self.accum = global_batch // (micro_batch * world_size)
        self.start_step, self.end_step = start_step, end_step
        self._perm: tuple[int, torch.Tensor] | None = None

    def start_at(self, step: int) -> None:
        """Begin at optimizer step ``step`` (a resume); takes effect for the next iterator."""
        self.start_step = step

    def position_index(self, p: int) -> int:
        epoch = p // self.n
        if self._perm is None or self._perm[0] != epoch:
            self._perm = (epoch, epoch_permutation(self.n, self.seed, epoch))
        return int(self._perm[1][p % self.n])

    def __len__(self) -> int:
        return (self.end_step - self.start_step) * self.accum * self.mb

    def __iter__(self) -> Iterator[int]:
        for step in range(self.start_step, self.end_step):
            for a in range(self.accum):
                base = step * self.gb + (a * self.ws + self.rank) * self.mb
                for j in range(self.mb):
                    yield self.position_index(base + j)


class Indexed(Dataset[tuple[int, torch.Tensor]]):
    """Wraps a dataset so each batch carries the indices it was built from (for sample accounting)."""

    def __init__(self, ds: Dataset[torch.Tensor]) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor]:
        return i, self.ds[i]


def worker_init(_: int) -> None:
    """DataLoader workers ignore preemption signals: only the trainer process may act on them.

    A SIGTERM sent to the whole process group would otherwise kill a worker, and the trainer would die
    on the next batch with "DataLoader worker killed" instead of saving a checkpoint.
    """
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
