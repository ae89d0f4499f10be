"""Buggy slow-decode solution (corpus): a copy of the reference with one mistake.

Mistake: no break after the last token: the loop runs one more decoding step whose token is thrown
away (about +10% FLOPs at 8 new tokens, but 1.35x to 2x at max_new_tokens = 1, over the 1.2x
budget).
"""

from __future__ import annotations

import math

import torch

try:
    from slow_decode_model import TinyLM, generate_slow  # noqa: F401  (the kata's support file)
except ModuleNotFoundError:  # outside the grader (a notebook, the project's tests)
    from grader.catalog import KATAS_DIR
    from grader.worker.loading import import_from_path

    import_from_path(KATAS_DIR / "slow_decode" / "slow_decode_model.py", "slow_decode_model")
    from slow_decode_model import TinyLM, generate_slow  # noqa: F401


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Masked softmax attention of every head at once. q (A, H, Tq, D), k and v (A, H, L, D),
    allowed broadcastable to (A, H, Tq, L); every query row allows at least one key."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])          # (A, H, Tq, L)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(dim=-1) @ v                                   # (A, H, Tq, D)


@torch.no_grad()
def generate(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
             eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding: exactly generate_slow's tokens, with a KV cache, batched requests and
    early stopping. Returns the new tokens of each request (the EOS included when generated)."""
    outputs: list[list[int]] = [[] for _ in prompts]
    if max_new_tokens <= 0 or not prompts:
        return outputs
    lengths = [len(p) for p in prompts]
    P = max(lengths)
    # Left padding puts every request's newest token in the last column: one decoding step
    # appends one column to every cache row.
    token_ids = torch.tensor([[0] * (P - n) + list(p) for p, n in zip(prompts, lengths)])  # (R, P)
    key_valid = torch.tensor([[False] * (P - n) + [True] * n for n in lengths])             # (R, P)
    positions = (key_valid.cumsum(dim=-1) - 1).clamp(min=0)        # padding does not count
    next_positions = torch.tensor(lengths)                            # (R,)

    # Prefill: the whole prompts once. A padding query attends to itself only, so it stays
    # finite (no NaN leaks into the cache); real queries never see padding keys.
    causal = torch.ones(P, P, dtype=torch.bool).tril()
    allowed = (causal & key_valid[:, None, :]) | torch.eye(P, dtype=torch.bool)   # (R, P, P)
    x = model.embed(token_ids, positions)                                          # (R, P, C)
    cache: list[tuple[torch.Tensor, torch.Tensor]] = []
    for block in model.blocks:
        q, k, v = block.qkv(x)                                                     # (R, H, P, D)
        cache.append((k, v))
        x = x + block.merge_heads(_attend(q, k, v, allowed[:, None]))
        x = x + block.mlp(x)
    logits = model.logits(x[:, -1:])                                               # (R, 1, V)

    active = list(range(len(prompts)))   # the request of each batch row
    for step in range(max_new_tokens):
        next_ids = logits[:, -1].argmax(dim=-1)                                    # (A,)
        for request, token in zip(active, next_ids.tolist()):   # the one sync of the step
            outputs[request].append(token)
        keep = [row for row, request in enumerate(active) if outputs[request][-1] != eos_id]
        if not keep:
            break
        if len(keep) < len(active):
            # Finished requests leave the batch: they cost nothing from the next step on.
            rows = torch.tensor(keep)
            next_ids, key_valid, next_positions = next_ids[rows], key_valid[rows], next_positions[rows]
            cache = [(k[rows], v[rows]) for k, v in cache]
            active = [active[row] for row in keep]
        # Decode: one new token per active request, attending over its cache.
        key_valid = torch.cat([key_valid, torch.ones(len(active), 1, dtype=torch.bool)], dim=1)  # (A, L)
        x = model.embed(next_ids[:, None], next_positions[:, None])                # (A, 1, C)
        next_positions = next_positions + 1
        for i, block in enumerate(model.blocks):
            q, k, v = block.qkv(x)                                                 # (A, H, 1, D)
            k = torch.cat([cache[i][0], k], dim=2)                                 # (A, H, L, D)
            v = torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)
            x = x + block.merge_heads(_attend(q, k, v, key_valid[:, None, None, :]))
            x = x + block.mlp(x)
        logits = model.logits(x)                                                   # (A, 1, V)
    return outputs
