"""A GPT-style decoder in one readable file (pre-norm, tied embeddings, causal SDPA attention).

Presets range from ``tiny`` (tests, ~0.1M parameters) to ``gpt-small`` (GPT-2 small, ~124M).
A user's own model plugs in through ``model: "package.module:factory"``: the factory is called as
``factory(cfg)`` with the TrainConfig and returns an ``nn.Module`` mapping token ids ``(B, T)`` to logits
``(B, T, vocab)``. The trainer computes the next-token cross-entropy itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainer.loss import linear_cross_entropy


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 256
    seq_len: int = 64
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    dropout: float = 0.0

    def flops_per_token(self) -> float:
        """Training FLOPs per token (6N plus attention), as in the PaLM appendix, for MFU."""
        n = 12 * self.n_layer * self.d_model**2 + self.vocab_size * self.d_model
        return 6 * n + 12 * self.n_layer * self.d_model * self.seq_len


PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(vocab_size=256, n_layer=2, n_head=2, d_model=64),
    "mini": GPTConfig(vocab_size=256, n_layer=4, n_head=4, d_model=256),
    # ~124M parameters with the GPT-2 vocabulary padded to a multiple of 64; byte corpora use ids < 256.
    "gpt-small": GPTConfig(vocab_size=50304, n_layer=12, n_head=12, d_model=768),
}


class Block(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.n_head = c.n_head
        self.dropout = c.dropout
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.fc = nn.Linear(c.d_model, 4 * c.d_model)
        self.fc_out = nn.Linear(4 * c.d_model, c.d_model)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.fc_out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.config = c
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.seq_len, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied, as in GPT-2
        self.apply(self._init)
        # GPT-2: scale residual projections by depth so the residual stream does not grow with layers.
        for name, p in self.named_parameters():
            if name.endswith(("proj.weight", "fc_out.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """The logits; or, given the targets, the mean cross-entropy, without materialising the logits
        (trainer/loss.py): what training calls, so the loss is part of the forward the wrappers see."""
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for block in self.blocks:
            x = block(x)
        if targets is not None:
            return linear_cross_entropy(self.ln_f(x), self.head.weight, targets)
        return self.head(self.ln_f(x))


def gpt_config(name: str, seq_len: int, dropout: float, overrides: dict[str, Any]) -> GPTConfig:
    if name not in PRESETS:
        raise KeyError(name)
    return replace(PRESETS[name], seq_len=seq_len, dropout=dropout, **overrides)
