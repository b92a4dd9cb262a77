"""What a checkpoint holds, as ``Stateful`` objects (torch.distributed.checkpoint.stateful.Stateful).

The checkpoint is ``{"model": ModelState, "optim": OptimizerState, "sched": LRScheduler, "train":
TrainState}``; each object hands DCP its state dict at save time and takes one back at load time. The
keys and the layout inside them are those of every checkpoint written so far (manifest formats 1 and 2).
Model and optimizer go through ``torch.distributed.checkpoint.state_dict``, so DDP and FSDP2 both
reshard on load.
"""

from __future__ import annotations

import hashlib
import pickle
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)


@dataclass
class TrainState:
    """Progress of the job, carried across restarts and resizes.

    Each rank saves its own RNG states (pickled, ``own_rng``) under its own key ``rng_rank_<rank>``, so
    that a resume at the same world size gives each rank back exactly its own streams without gathering
    them: DCP keeps one copy of items with the same key across ranks (its planner dedups by key, torch
    2.13 torch/distributed/checkpoint/_dedup_save_plans.py, called by default_planner.py
    ``create_global_plan``), and each rank's key is its own. ``rng`` is the older layout, every rank's
    states gathered into one pickled list: still loaded from checkpoints that have it, never saved.

    >>> from torch.distributed.checkpoint.stateful import Stateful
    >>> ts = TrainState(world_size=2, rank=1, own_rng=b"r1")
    >>> ts.advance(5, global_batch_size=8)
    >>> sorted(ts.state_dict())
    ['preemptions', 'resumes', 'rng_rank_1', 'samples', 'step', 'world_size']
    >>> again = TrainState(rank=1)
    >>> again.load_state_dict(ts.state_dict())
    >>> isinstance(ts, Stateful), again == ts, again.samples, again.own_rng
    (True, True, 40, b'r1')
    """

    step: int = 0
    samples: int = 0  # global sample offset: step x globalBatchSize
    world_size: int = 1
    preemptions: int = 0
    resumes: int = 0
    rng: bytes = b""  # an older checkpoint's gathered RNG states of every rank (loaded, never saved)
    own_rng: bytes = b""  # this rank's pickled RNG states, set just before each save
    rank: int = field(default=0, compare=False)  # this process's rank: which RNG key is its own

    @property
    def rng_key(self) -> str:
        return f"rng_rank_{self.rank}"

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "samples": self.samples,
            "world_size": self.world_size,
            "preemptions": self.preemptions,
            "resumes": self.resumes,
            self.rng_key: self.own_rng,
        }

    def load_layout(self, saved: set[str], prefix: str = "train.") -> dict[str, Any]:
        """What to load from a checkpoint whose keys are ``saved``: the RNG keys it has (this rank's own,
        the older gathered list), never one it lacks (a rank beyond its world size, an older layout)."""
        sd = self.state_dict()
        if prefix + self.rng_key not in saved:
            del sd[self.rng_key]
        if prefix + "rng" in saved:
            sd["rng"] = b""
        return sd

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.step, self.samples = int(sd["step"]), int(sd["samples"])
        self.world_size = int(sd["world_size"])
        self.preemptions, self.resumes = int(sd["preemptions"]), int(sd["resumes"])
        self.rng = bytes(sd.get("rng", b""))
        self.own_rng = bytes(sd.get(self.rng_key, b""))

    def advance(self, step: int, global_batch_size: int) -> None:
        """``step`` optimizer steps are done."""
        self.step, self.samples = step, step * global_batch_size

    def saved_rng(self) -> dict[str, Any]:
        """The RNG states this rank had at the save: its own key, else the older gathered list (raises if
        neither is there or the blob does not unpickle)."""
        if self.own_rng:
            own: dict[str, Any] = pickle.loads(self.own_rng)
            return own
        if not self.rng:
            raise KeyError(f"no RNG states saved for rank {self.rank}")
        states: list[dict[str, Any]] = pickle.loads(self.rng)
        return states[self.rank]


class ModelState:
    """The model's parameters and buffers, as DCP sees them (full FQNs, sharded under FSDP)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict[str, Any]:
        return get_model_state_dict(self.model)

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        set_model_state_dict(self.model, sd)


class OptimizerState:
    """The optimizer's state keyed by parameter FQN (not by position), so it reshards like the model."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:
        return get_optimizer_state_dict(self.model, self.optimizer)

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        set_optimizer_state_dict(self.model, self.optimizer, sd)


def rng_state() -> dict[str, Any]:
    """This process's RNG states: Python, NumPy, torch CPU and (if present) CUDA."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(s: dict[str, Any]) -> None:
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if s["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


def seed_rank(seed: int, step: int, rank: int) -> None:
    """Derive a per-rank RNG stream from (seed, step, rank): used at a fresh start and after a resize."""
    s = int.from_bytes(hashlib.sha256(f"{seed}/{step}/{rank}".encode()).digest()[:8], "little") >> 1
    random.seed(s)
    np.random.seed(s % 2**32)
    torch.manual_seed(s)
