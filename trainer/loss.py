"""The LM head and its cross-entropy in one pass over chunks of tokens: full logits never exist.

The plain way, `F.cross_entropy(head(h).float(), targets)`, materialises the logits of every token of the
micro-batch, and an fp32 copy of them, and keeps the log-softmax for the backward: for gpt-small
(vocabulary 50304) at 8 x 1024 tokens that is 1.6 GB in fp32 before the first gradient. Here the tokens are
taken a chunk at a time: the chunk's logits (in the step's compute dtype), their log-sum-exp in fp32, the
loss, and at once the gradient of the loss with respect to the chunk's hidden states and to the head's
weight (softmax minus the one-hot target, times the other operand). Only those gradients are kept for the
backward, which scales them by the incoming gradient: the memory of one chunk's logits instead of all, and
no recomputation. This is the "fused linear cross-entropy" of Liger-Kernel (linkedin/Liger-Kernel
src/liger_kernel/ops/fused_linear_cross_entropy.py), written with torch ops so it runs on any device and
under torch.compile.

Example (the loss and gradients are those of the plain way):
    >>> import torch
    >>> import torch.nn.functional as F
    >>> g = torch.Generator().manual_seed(0)
    >>> h = torch.randn(2, 5, 8, generator=g, requires_grad=True)
    >>> w = torch.randn(11, 8, generator=g, requires_grad=True)
    >>> t = torch.randint(0, 11, (2, 5), generator=g)
    >>> loss = linear_cross_entropy(h, w, t, chunk_tokens=3)
    >>> ref = F.cross_entropy((h @ w.T).reshape(-1, 11), t.reshape(-1))
    >>> bool(torch.allclose(loss, ref, atol=1e-6))
    True
"""

from __future__ import annotations

from typing import Any

import torch

# Tokens per chunk: 4096 x 50304 logits are 400 MB in bf16 (and as much again for their gradient), a
# bounded slice of a large GPU, while each chunk's matmuls stay large enough to run at full speed.
CHUNK_TOKENS = 4096


def linear_cross_entropy(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk_tokens: int = CHUNK_TOKENS
) -> torch.Tensor:
    """Mean cross-entropy of `hidden @ weight.T` against `targets` (hidden: [..., d], weight: [vocab, d])."""
    dtype = torch.get_autocast_dtype(hidden.device.type) if torch.is_autocast_enabled() else hidden.dtype
    loss: torch.Tensor = _LinearCrossEntropy.apply(
        hidden.reshape(-1, hidden.size(-1)), weight, targets.reshape(-1), chunk_tokens, dtype
    )
    return loss


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        chunk_tokens: int,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        grads = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]  # none under no_grad (evaluation)
        with torch.autocast(hidden.device.type, enabled=False):
            n = targets.numel()
            acc = torch.promote_types(dtype, torch.float32)  # softmax and sums: fp32 at least
            w = weight.to(dtype)
            grad_hidden = torch.empty_like(hidden)
            grad_weight = torch.zeros(weight.shape, dtype=acc, device=weight.device)
            total = torch.zeros((), dtype=acc, device=hidden.device)
            for start in range(0, n, chunk_tokens):
                h = hidden[start : start + chunk_tokens].to(dtype)
                t = targets[start : start + chunk_tokens]
                logits = (h @ w.T).to(acc)
                lse = torch.logsumexp(logits, dim=-1)
                total += (lse - logits.gather(1, t[:, None]).squeeze(1)).sum()
                if not grads:
                    continue
                # d(sum of losses)/d(logits) = softmax - one-hot; the mean's 1/n is applied once below.
                grad_logits = torch.exp(logits - lse[:, None])
                grad_logits[torch.arange(t.numel(), device=t.device), t] -= 1
                grad_logits = grad_logits.to(dtype)
                grad_hidden[start : start + chunk_tokens] = (grad_logits @ w).to(hidden.dtype)
                grad_weight += (grad_logits.T @ h).to(acc)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.scale = 1.0 / n
        ctx.weight_dtype = weight.dtype
        return total / n

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        grad_hidden, grad_weight = ctx.saved_tensors
        scale = grad_output * ctx.scale
        return (
            grad_hidden * scale.to(grad_hidden.dtype),
            (grad_weight * scale).to(ctx.weight_dtype),
            None,
            None,
            None,
        )
