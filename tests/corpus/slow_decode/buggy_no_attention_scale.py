"""Forgets the 1 / sqrt(head_dim) scale of the attention scores."""

from __future__ import annotations

import math

import torch

from slow_decode_model import TinyLM, generate_slow  # noqa: F401


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Masked attention of all heads at once: q (A, H, Tq, D), k, v (A, H, L, D)."""
    scores = q @ k.transpose(-2, -1)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(dim=-1) @ v


@torch.no_grad()
def generate(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
             eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding with a KV cache, batched requests and early stopping."""
    outputs: list[list[int]] = [[] for _ in prompts]
    if max_new_tokens == 0:
        return outputs
    lengths = [len(p) for p in prompts]
    P = max(lengths)
    ids = torch.tensor([[0] * (P - n) + list(p) for p, n in zip(prompts, lengths)])   # (R, P)
    valid = torch.tensor([[False] * (P - n) + [True] * n for n in lengths])           # (R, P)
    positions = (valid.cumsum(-1) - 1).clamp(min=0)
    causal = torch.ones(P, P, dtype=torch.bool).tril()
    allowed = (causal & valid[:, None, :]) | torch.eye(P, dtype=torch.bool)           # (R, P, P)

    x = model.embed(ids, positions)
    cache = []
    for block in model.blocks:
        q, k, v = block.qkv(x)
        cache.append([k, v])
        x = x + block.merge_heads(attend(q, k, v, allowed[:, None]))
        x = x + block.mlp(x)
    logits = model.logits(x[:, -1:])[:, -1]                                          # (R, V)

    next_pos = torch.tensor(lengths)
    rows = list(range(len(prompts)))      # the request of each batch row
    for step in range(max_new_tokens):
        tokens = logits.argmax(dim=-1)                                                 # (A,)
        host = tokens.tolist()            # the one sync of the step
        for r, t in zip(rows, host):
            outputs[r].append(t)
        if step == max_new_tokens - 1:
            break
        keep = [i for i, t in enumerate(host) if t != eos_id]
        if not keep:
            break
        if len(keep) < len(rows):
            idx = torch.tensor(keep)
            tokens, valid, next_pos = tokens[idx], valid[idx], next_pos[idx]
            cache = [[k[idx], v[idx]] for k, v in cache]
            rows = [rows[i] for i in keep]
        valid = torch.cat([valid, torch.ones(len(rows), 1, dtype=torch.bool)], dim=1)  # (A, L)
        x = model.embed(tokens[:, None], next_pos[:, None])                            # (A, 1, C)
        next_pos = next_pos + 1
        for layer, block in enumerate(model.blocks):
            q, k, v = block.qkv(x)
            k = torch.cat([cache[layer][0], k], dim=2)
            v = torch.cat([cache[layer][1], v], dim=2)
            cache[layer] = [k, v]
            x = x + block.merge_heads(attend(q, k, v, valid[:, None, None, :]))
            x = x + block.mlp(x)
        logits = model.logits(x)[:, -1]
    return outputs
