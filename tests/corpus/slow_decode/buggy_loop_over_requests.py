"""A KV cache, but one request at a time: a Python loop over the requests, so the
operations of a decoding step grow with the number of requests (a level-1 solution)."""

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
    """Greedy decoding with a KV cache, one request after the other."""
    outputs: list[list[int]] = []
    for prompt in prompts:
        new_tokens: list[int] = []
        if max_new_tokens == 0:
            outputs.append(new_tokens)
            continue
        T = len(prompt)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        x = model.embed(torch.tensor([prompt]), torch.arange(T)[None])              # (1, T, C)
        cache = []
        for block in model.blocks:
            q, k, v = block.qkv(x)
            cache.append([k, v])
            x = x + block.merge_heads(attend(q, k, v, causal))
            x = x + block.mlp(x)
        logits = model.logits(x[:, -1:])[:, -1]                                      # (1, V)
        for step in range(max_new_tokens):
            token = logits.argmax(dim=-1)                                            # (1,)
            new_tokens.append(token.tolist()[0])
            if step == max_new_tokens - 1 or new_tokens[-1] == eos_id:
                break
            x = model.embed(token[:, None], torch.tensor([[T + step]]))
            for layer, block in enumerate(model.blocks):
                q, k, v = block.qkv(x)
                k = torch.cat([cache[layer][0], k], dim=2)
                v = torch.cat([cache[layer][1], v], dim=2)
                cache[layer] = [k, v]
                x = x + block.merge_heads(attend(q, k, v, torch.ones(1, 1, 1, k.shape[2], dtype=torch.bool)))
                x = x + block.mlp(x)
            logits = model.logits(x)[:, -1]
        outputs.append(new_tokens)
    return outputs
