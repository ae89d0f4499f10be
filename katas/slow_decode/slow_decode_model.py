"""The model of the slow-decode kata, and the slow generator you are asked to speed up.

`TinyLM` is a tiny decoder-only transformer (pre-norm, learned absolute positions, float64,
weights drawn from a seed). It exposes its pieces, so a generator can run them on any
sequence layout (padded, cached) it likes:

    x = model.embed(token_ids, positions)      # (B, T) int64, (B, T) int64 -> (B, T, C)
    for block in model.blocks:
        q, k, v = block.qkv(x)                  # (B, T, C) -> 3 x (B, H, T, D)
        ctx = <attention of q over k, v>         # softmax(q k^T / sqrt(D) + mask) v: (B, H, T, D)
        x = x + block.merge_heads(ctx)          # (B, H, T, D) -> (B, T, C)
        x = x + block.mlp(x)                    # (B, T, C) -> (B, T, C)
    logits = model.logits(x)                    # (B, T, C) -> (B, T, V)

Position p of a sequence is its p-th token, counted from 0 at its first token. Attention is
causal: position p sees positions 0..p of its own sequence.

`generate_slow` is correct greedy decoding, written the slow way: where its time goes is for
you to find.

Legend: B batch, T time, C d_model, H heads, D head dim (C = H * D), V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import nn


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

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T, C) -> queries, keys, values, each (B, H, T, D); norm1 is applied here."""
        B, T, C = x.shape
        q, k, v = self.qkv_proj(self.norm1(x)).split(C, dim=-1)          # 3 x (B, T, C)
        return tuple(t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))

    def merge_heads(self, ctx: torch.Tensor) -> torch.Tensor:
        """(B, H, T, D) attention output -> (B, T, C), through the output projection."""
        B, H, T, D = ctx.shape
        return self.out_proj(ctx.transpose(1, 2).reshape(B, T, H * D))

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, T, C); norm2 is applied here."""
        return self.mlp_out(torch.nn.functional.gelu(self.mlp_in(self.norm2(x))))


class TinyLM(nn.Module):
    """A tiny decoder-only transformer with float64 weights drawn from `seed`.

    Attributes: vocab_size (V), d_model (C), num_heads (H), head_dim (D), num_layers,
    max_seq_len (positions 0 .. max_seq_len - 1 exist), blocks (an nn.ModuleList of Block).
    """

    def __init__(self, vocab_size: int = 64, d_model: int = 32, num_heads: int = 4,
                 num_layers: int = 2, max_seq_len: int = 32, seed: int = 0) -> None:
        super().__init__()
        self.vocab_size, self.d_model, self.num_heads = vocab_size, d_model, num_heads
        self.head_dim = d_model // num_heads
        self.num_layers, self.max_seq_len = num_layers, max_seq_len
        self.token_embedding = nn.Embedding(vocab_size, d_model, dtype=torch.float64)
        self.position_embedding = nn.Embedding(max_seq_len, d_model, dtype=torch.float64)
        self.blocks = nn.ModuleList(Block(d_model, num_heads) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model, dtype=torch.float64)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False, dtype=torch.float64)
        self._init_weights(seed)
        self.requires_grad_(False)   # inference only
        self.eval()

    def _init_weights(self, seed: int) -> None:
        # Unit-variance embeddings and 1/sqrt(fan_in) matrices: the logits spread over a few
        # units, so greedy choices are decisive and continuations differ between prompts.
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("embedding.weight"):
                    p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
                elif p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(p.shape[1]))
                elif "norm" in name:
                    continue  # LayerNorm: weight 1, bias 0
                else:
                    p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.1)

    def embed(self, token_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """token_ids (B, T) int64, positions (B, T) int64 in [0, max_seq_len) -> (B, T, C)."""
        return self.token_embedding(token_ids) + self.position_embedding(positions)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) hidden states -> (B, T, V) next-token logits."""
        return self.lm_head(self.final_norm(x))

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of B unpadded sequences of the same length T (a full recompute)."""
        B, T = token_ids.shape
        positions = torch.arange(T).expand(B, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        x = self.embed(token_ids, positions)
        for block in self.blocks:
            q, k, v = block.qkv(x)                                          # (B, H, T, D)
            scores = q @ k.transpose(-2, -1) / math.sqrt(block.head_dim)     # (B, H, T, T)
            scores = scores.masked_fill(~causal, float("-inf"))
            x = x + block.merge_heads(scores.softmax(dim=-1) @ v)
            x = x + block.mlp(x)
        return self.logits(x)


@torch.no_grad()
def generate_slow(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
                  eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding, the slow way. Returns the new tokens of each request (not the prompt):
    max_new_tokens of them, or fewer when the request generates eos_id (the EOS included).
    Each prompt is non-empty and len(prompt) + max_new_tokens <= model.max_seq_len."""
    outputs = []
    for prompt in prompts:                                   # slow: one request at a time
        if not prompt or len(prompt) + max_new_tokens > model.max_seq_len:
            raise ValueError("each prompt needs 1 <= len(prompt) <= max_seq_len - max_new_tokens")
        tokens = list(prompt)
        new_tokens: list[int] = []
        for _ in range(max_new_tokens):
            T = len(tokens)
            ids = torch.tensor([tokens])                     # (1, T) slow: all of it, every step
            x = model.embed(ids, torch.arange(T)[None])      # (1, T, C)
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            for block in model.blocks:
                q, k, v = block.qkv(x)                       # (1, H, T, D)
                heads = []
                for h in range(block.num_heads):             # slow: one head at a time
                    scores = q[:, h] @ k[:, h].transpose(-2, -1) / math.sqrt(block.head_dim)  # (1, T, T)
                    scores = scores.masked_fill(~causal, float("-inf"))
                    heads.append(scores.softmax(dim=-1) @ v[:, h])                        # (1, T, D)
                x = x + block.merge_heads(torch.stack(heads, dim=1))
                x = x + block.mlp(x)
            next_id = model.logits(x[:, -1:])[0, -1].argmax().item()   # slow: a sync per token
            new_tokens.append(next_id)
            tokens.append(next_id)
            if eos_id is not None and next_id == eos_id:
                break
        outputs.append(new_tokens)
    return outputs
