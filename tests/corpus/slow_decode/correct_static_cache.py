"""A correct alternative: a static cache allocated once per call, (R, H, P + max_new_tokens, D)
per block, written one column per step with slice assignment; a key mask of the same width
marks the columns that hold real tokens; finished rows leave through index_select; the step's
tokens are read with one .tolist()."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from slow_decode_model import TinyLM


@torch.no_grad()
def generate(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
             eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding over a preallocated KV cache."""
    results: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    if max_new_tokens < 1:
        return [results[i] for i in range(len(prompts))]
    R, P = len(prompts), max(len(p) for p in prompts)
    width = P + max_new_tokens                 # every column a request can ever need
    H, D = model.num_heads, model.head_dim

    ids = torch.zeros(R, P, dtype=torch.long)
    filled = torch.zeros(R, width, dtype=torch.bool)      # which cache columns hold tokens
    for i, p in enumerate(prompts):
        ids[i, P - len(p):] = torch.tensor(p)
        filled[i, P - len(p):P] = True
    pos = filled[:, :P].long().cumsum(1).sub(1).clamp_min(0)                   # (R, P)

    keys = [torch.zeros(R, H, width, D, dtype=torch.float64) for _ in model.blocks]
    values = [torch.zeros(R, H, width, D, dtype=torch.float64) for _ in model.blocks]
    # prefill: causal over the prompt columns, padding keys masked, a padding query sees itself
    see = torch.ones(P, P, dtype=torch.bool).tril() & filled[:, None, :P]
    see = see | torch.eye(P, dtype=torch.bool)
    h = model.embed(ids, pos)
    for b, block in enumerate(model.blocks):
        q, k, v = block.qkv(h)
        keys[b][:, :, :P] = k
        values[b][:, :, :P] = v
        bias = torch.zeros(see.shape, dtype=torch.float64).masked_fill(~see, -math.inf)
        h = h + block.merge_heads(F.softmax(q @ k.transpose(2, 3) * D ** -0.5 + bias[:, None], dim=-1) @ v)
        h = h + block.mlp(h)
    last = model.logits(h[:, P - 1:P])                                        # (R, 1, V)

    owner = list(range(R))
    next_pos = torch.tensor([len(p) for p in prompts])
    col = P
    while True:
        chosen = last[:, 0].argmax(-1)                                         # (A,)
        live = []
        for row, (req, tok) in enumerate(zip(owner, chosen.tolist())):
            results[req].append(tok)
            if tok != eos_id and len(results[req]) < max_new_tokens:
                live.append(row)
        if not live:
            break
        if len(live) != len(owner):
            sel = torch.tensor(live)
            chosen, next_pos, filled = chosen.index_select(0, sel), next_pos.index_select(0, sel), filled.index_select(0, sel)
            keys = [t.index_select(0, sel) for t in keys]
            values = [t.index_select(0, sel) for t in values]
            owner = [owner[r] for r in live]
        filled[:, col] = True
        h = model.embed(chosen[:, None], next_pos[:, None])                   # (A, 1, C)
        for b, block in enumerate(model.blocks):
            q, k, v = block.qkv(h)
            keys[b][:, :, col:col + 1] = k
            values[b][:, :, col:col + 1] = v
            K, V = keys[b][:, :, :col + 1], values[b][:, :, :col + 1]
            bias = torch.zeros(filled[:, :col + 1].shape, dtype=torch.float64).masked_fill(~filled[:, :col + 1], -math.inf)
            h = h + block.merge_heads(F.softmax(q @ K.transpose(2, 3) * D ** -0.5 + bias[:, None, None], dim=-1) @ V)
            h = h + block.mlp(h)
        last = model.logits(h)
        next_pos = next_pos + 1
        col += 1
    return [results[i] for i in range(len(prompts))]
