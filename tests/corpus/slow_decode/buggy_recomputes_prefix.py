"""Batches the requests (left padding, masks, positions) but keeps no cache: every step
runs the whole padded sequence through the model again, so the FLOPs grow with the square
of the length."""

from __future__ import annotations

import math

import torch

from slow_decode_model import TinyLM, generate_slow  # noqa: F401


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Masked attention of all heads at once: q (A, H, Tq, D), k, v (A, H, L, D)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(dim=-1) @ v


@torch.no_grad()
def generate(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
             eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding of all requests at once, recomputing the sequence at every step."""
    outputs: list[list[int]] = [[] for _ in prompts]
    lengths = [len(p) for p in prompts]
    P = max(lengths)
    ids = torch.tensor([[0] * (P - n) + list(p) for p, n in zip(prompts, lengths)])   # (R, P)
    valid = torch.tensor([[False] * (P - n) + [True] * n for n in lengths])           # (R, P)
    rows = list(range(len(prompts)))
    for step in range(max_new_tokens):
        T = ids.shape[1]
        positions = (valid.cumsum(-1) - 1).clamp(min=0)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        allowed = (causal & valid[:, None, :]) | torch.eye(T, dtype=torch.bool)
        x = model.embed(ids, positions)
        for block in model.blocks:
            q, k, v = block.qkv(x)
            x = x + block.merge_heads(attend(q, k, v, allowed[:, None]))
            x = x + block.mlp(x)
        tokens = model.logits(x[:, -1:])[:, -1].argmax(dim=-1)                      # (A,)
        host = tokens.tolist()
        for r, t in zip(rows, host):
            outputs[r].append(t)
        keep = [i for i, t in enumerate(host) if t != eos_id]
        if not keep:
            break
        if len(keep) < len(rows):
            idx = torch.tensor(keep)
            tokens, ids, valid = tokens[idx], ids[idx], valid[idx]
            rows = [rows[i] for i in keep]
        ids = torch.cat([ids, tokens[:, None]], dim=1)
        valid = torch.cat([valid, torch.ones(len(rows), 1, dtype=torch.bool)], dim=1)
    return outputs
