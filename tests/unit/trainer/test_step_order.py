"""trainer.train.Trainer.train_step: nothing changes the state a background checkpoint copy may still read
before the trainer has waited for that copy."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from trainer.straggler import StepClock
from trainer.train import Trainer


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def note(self, what: str) -> Any:
        return lambda *a, **k: self.calls.append(what)


def _trainer(model: nn.Module, log: _Recorder) -> Any:
    """What train_step reads of a Trainer, each call it makes recorded in order."""

    def forward_backward(x: torch.Tensor, *, last: bool) -> torch.Tensor:
        log.calls.append("forward")
        return torch.zeros(())

    return SimpleNamespace(
        clock=StepClock(cuda=False),
        ctx=SimpleNamespace(device=torch.device("cpu")),
        accum=2,
        phases=SimpleNamespace(phase=lambda name: contextlib.nullcontext()),
        _data_phase="data",
        forward_backward=forward_backward,
        reporter=SimpleNamespace(recording=False),
        cfg=SimpleNamespace(grad_clip=0.0),
        model=model,
        checkpointer=SimpleNamespace(before_state_changes=log.note("wait for the copy")),
        optimizer=SimpleNamespace(step=log.note("optimizer.step"), zero_grad=lambda **k: None),
        scheduler=SimpleNamespace(step=lambda: None, get_last_lr=lambda: [1e-3]),
        _buffers=any(True for _ in model.buffers()),
    )


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # parameters change only in optimizer.step(): the forward may run beside the copy
        (nn.Linear(2, 2), ["forward", "forward", "wait for the copy", "optimizer.step"]),
        # a buffer may change in the forward (BatchNorm's running statistics): wait before it
        (
            nn.BatchNorm1d(2),
            ["wait for the copy", "forward", "forward", "wait for the copy", "optimizer.step"],
        ),
    ],
)
def test_the_step_waits_for_a_background_copy_before_it_changes_the_saved_state(model, expected) -> None:
    log = _Recorder()
    batches = iter([(torch.tensor([0]), torch.zeros(1, 3, dtype=torch.long))] * 2)
    Trainer.train_step(_trainer(model, log), batches)
    assert log.calls == expected
