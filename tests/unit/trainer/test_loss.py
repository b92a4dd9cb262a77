"""The fused LM head + cross-entropy (trainer/loss.py) against the plain way, and the model's use of it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trainer.loss import linear_cross_entropy
from trainer.model import GPT, gpt_config


@pytest.mark.parametrize("chunk", [1, 7, 50, 10_000])
def test_loss_and_both_gradients_are_the_plain_cross_entropys(chunk):
    g = torch.Generator().manual_seed(1)
    h = torch.randn(3, 17, 32, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(101, 32, generator=g, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, 101, (3, 17), generator=g)
    loss = linear_cross_entropy(h, w, t, chunk_tokens=chunk)
    (2.5 * loss).backward()
    fused = (loss.detach(), h.grad, w.grad)
    h.grad = w.grad = None
    ref = F.cross_entropy((h @ w.T).reshape(-1, 101), t.reshape(-1))
    (2.5 * ref).backward()
    for a, b in zip(fused, (ref.detach(), h.grad, w.grad), strict=True):
        torch.testing.assert_close(a, b)


def test_under_bf16_autocast_the_loss_is_fp32_and_close():
    g = torch.Generator().manual_seed(2)
    h, w = torch.randn(64, 16, generator=g), torch.randn(50, 16, generator=g)
    t = torch.randint(0, 50, (64,), generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = linear_cross_entropy(h, w, t, chunk_tokens=16)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, F.cross_entropy(h @ w.T, t), atol=0.05, rtol=0.01)


def test_the_models_training_forward_is_its_logits_cross_entropy_with_tied_weights():
    torch.manual_seed(0)
    model = GPT(gpt_config("tiny", 16, 0.0, {}))
    x = torch.randint(0, 256, (2, 17))
    loss = model(x[:, :-1], x[:, 1:])
    loss.backward()
    fused_grad = model.tok.weight.grad.clone()
    model.zero_grad()
    logits = model(x[:, :-1])
    ref = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(fused_grad, model.tok.weight.grad)  # head and embedding gradients both
    with torch.no_grad():
        torch.testing.assert_close(model(x[:, :-1], x[:, 1:]), ref.detach())
