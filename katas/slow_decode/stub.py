"""Slow decode: find and fix the bottlenecks of a generation loop.

`generate_slow` (in slow_decode_model.py, next to this file) is correct greedy decoding
written the slow way. Write `generate`, returning exactly its tokens, fast:

Level 1  cache the keys and values: total FLOPs at most 1.2x those of a KV-cached loop.
Level 2  batch the requests: prompts of different lengths together; the torch operations
         per decoding step do not grow with the number of requests or heads.
Level 3  stop early and stay on the device: a request stops after its EOS (included), a
         finished request costs nothing; at most one host sync per decoding step.
(`kata show slow-decode` has the interviewer's words, and the answers to what you ask.)

Worked example:
    model = TinyLM(seed=0)
    generate(model, [[5, 9, 2], [7]], 6)            -> [[15, 56, 15, 56, 57, 60], [11, 39, 14, 38, 62, 48]]
    generate(model, [[5, 9, 2], [7]], 6, eos_id=56) -> [[15, 56], [11, 39, 14, 38, 62, 48]]

The model's pieces (see slow_decode_model.py):
    x = model.embed(token_ids, positions)    # (B, T), (B, T) int64 -> (B, T, C)
    q, k, v = block.qkv(x)                   # 3 x (B, H, T, D)
    x = x + block.merge_heads(ctx)           # ctx (B, H, T, D) = softmax(q k^T / sqrt(D) + mask) v
    x = x + block.mlp(x)
    logits = model.logits(x)                 # (B, T, V)

Constraints: PyTorch only; do not change the model's weights; each prompt is non-empty and
len(prompt) + max_new_tokens <= model.max_seq_len.
"""

from __future__ import annotations

import math  # noqa: F401  (1 / math.sqrt(head_dim))

import torch  # noqa: F401  (for your solution)

from slow_decode_model import TinyLM, generate_slow  # noqa: F401  (the kata's model and the slow loop)


def generate(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
             eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding with exactly generate_slow's output, fast.

    model           a TinyLM (float64); use its weights, do not change them
    prompts         R lists of token ids, each non-empty, lengths may differ
    max_new_tokens  tokens to generate per request (0 gives R empty lists)
    eos_id          None (levels 1 and 2), or a token id: a request stops right after
                    generating it (level 3)
    Returns R lists: the new tokens of each request (not the prompt), the EOS included.
    """
    # TODO level 1: the same tokens as generate_slow, within the FLOP budget.
    # TODO level 2: every request in one batch, whatever its prompt length.
    # TODO level 3: stop at the EOS, finished requests cost nothing, one sync per step.
    raise NotImplementedError
