"""The model of the train-memory kata, and the fine-tuning loop whose memory grows.

`TinyLM` is a tiny decoder-only transformer (pre-norm, learned absolute positions, causal
attention, float64, weights drawn from a seed, every parameter trainable). It exposes its
pieces, so a training loop can run them one block at a time:

    x = model.embed(input_ids)          # (B, T) int64 -> (B, T, C)
    for block in model.blocks:
        x = block(x)                    # (B, T, C) -> (B, T, C), causal
    logits = model.head(x)              # (B, T, C) -> (B, T, V)

`model(input_ids)` runs all three. Attention is causal, so right padding never changes the
logits of the real tokens before it.

A batch is a pair `(input_ids, labels)`, both (B, T) int64: `labels[b, t]` is the token that
position t of sequence b must predict, or IGNORE_INDEX (-100) where nothing is predicted
(padding, prompt tokens, the last position). The loss of a batch is the cross-entropy
averaged over all its valid (not -100) labels; every batch holds at least one.

`finetune_leaky` is a correct AdamW fine-tuning loop whose memory grows with the number of
steps, written the way a first draft often is: where the memory goes is for you to find.

Legend: B batch (sequences), T time, C d_model, H heads, D head dim (C = H * D),
V vocabulary, L layers.
"""

from __future__ import annotations

import math

import torch
import torch._dynamo  # (torch.optim's first optimizer imports it, ~1.5 s: pay that here, at import)
from torch import nn
from torch.nn import functional as F

IGNORE_INDEX = -100


class Block(nn.Module):
    """One pre-norm transformer block: x + attention(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.norm1 = nn.LayerNorm(d_model, dtype=torch.float64)
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, dtype=torch.float64)
        self.out_proj = nn.Linear(d_model, d_model, dtype=torch.float64)
        self.norm2 = nn.LayerNorm(d_model, dtype=torch.float64)
        self.mlp_in = nn.Linear(d_model, 4 * d_model, dtype=torch.float64)
        self.mlp_out = nn.Linear(4 * d_model, d_model, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, T, C), position t attending to positions 0..t."""
        B, T, C = x.shape
        q, k, v = self.qkv_proj(self.norm1(x)).split(C, dim=-1)                 # 3 x (B, T, C)
        q, k, v = (t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)             # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        ctx = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v    # (B, H, T, D)
        x = x + self.out_proj(ctx.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.norm2(x))))


class TinyLM(nn.Module):
    """A tiny decoder-only transformer with float64 weights drawn from `seed`.

    Attributes: vocab_size (V), d_model (C), num_heads (H), num_layers (L), max_seq_len
    (positions 0 .. max_seq_len - 1 exist), blocks (an nn.ModuleList of Block).
    """

    def __init__(self, vocab_size: int = 32, d_model: int = 16, num_heads: int = 2,
                 num_layers: int = 2, max_seq_len: int = 16, seed: int = 0) -> None:
        super().__init__()
        self.vocab_size, self.d_model, self.num_heads = vocab_size, d_model, num_heads
        self.num_layers, self.max_seq_len = num_layers, max_seq_len
        self.token_embedding = nn.Embedding(vocab_size, d_model, dtype=torch.float64)
        self.position_embedding = nn.Embedding(max_seq_len, d_model, dtype=torch.float64)
        self.blocks = nn.ModuleList(Block(d_model, num_heads) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model, dtype=torch.float64)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False, dtype=torch.float64)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "norm" in name:
                    continue  # LayerNorm: weight 1, bias 0
                fan_in = p.shape[1] if p.dim() == 2 and "embedding" not in name else 1
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(fan_in))

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """input_ids (B, T) int64, T <= max_seq_len -> (B, T, C): token plus position."""
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        return self.token_embedding(input_ids) + self.position_embedding(positions)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) hidden states -> (B, T, V) next-token logits."""
        return self.lm_head(self.final_norm(x))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of B sequences of length T."""
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def finetune_leaky(model: TinyLM, batches: list[tuple[torch.Tensor, torch.Tensor]], *,
                   lr: float, steps: int) -> list[float]:
    """AdamW fine-tuning, correct but leaky. Step i trains on batches[i % len(batches)]: one
    update of torch.optim.AdamW(trainable parameters, lr=lr) (its other settings default) on
    the batch's loss, the cross-entropy averaged over its valid labels. Parameters with
    requires_grad=False are not trained. Returns the loss of every step (before its update)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=lr)
    losses, logits_seen, mean_logprobs = [], [], []
    for step in range(steps):
        input_ids, labels = batches[step % len(batches)]
        logits = model(input_ids)                                     # (B, T, V): the whole batch
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss)                                           # logged later
        logits_seen.append(logits)                                    # kept for debugging
        valid = labels != IGNORE_INDEX
        logprobs = logits.log_softmax(dim=-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
        mean_logprobs.append((logprobs * valid).sum() / valid.sum())  # a metric for the log
    return [loss.item() for loss in losses]
