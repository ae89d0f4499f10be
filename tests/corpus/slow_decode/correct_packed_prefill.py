"""A correct alternative: each prompt is prefilled on its own (no padding, a loop over the
requests before decoding starts), then the caches are packed right-aligned into one
zero-padded batch; decoding is batched with scaled_dot_product_attention and a boolean key
mask; finished requests are removed with integer indexing."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from slow_decode_model import TinyLM


def _prefill(model: TinyLM, prompt: list[int]):
    """Run one unpadded prompt: per-block (k, v) of shape (1, H, n, D) and the last logits (V,)."""
    n = len(prompt)
    x = model.embed(torch.tensor([prompt]), torch.arange(n).unsqueeze(0))
    kv = []
    for block in model.blocks:
        q, k, v = block.qkv(x)
        kv.append((k, v))
        x = x + block.merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        x = x + block.mlp(x)
    return kv, model.logits(x[:, -1:])[0, 0]


@torch.no_grad()
def generate(model: TinyLM, prompts: list[list[int]], max_new_tokens: int,
             eos_id: int | None = None) -> list[list[int]]:
    """Greedy decoding: separate prefills, one batched decode loop."""
    out = [[] for _ in prompts]
    if max_new_tokens <= 0:
        return out
    R, longest = len(prompts), max(map(len, prompts))
    H, D = model.num_heads, model.head_dim
    K = [torch.zeros(R, H, longest, D, dtype=torch.float64) for _ in model.blocks]
    V = [torch.zeros(R, H, longest, D, dtype=torch.float64) for _ in model.blocks]
    mask = torch.zeros(R, longest, dtype=torch.bool)
    first = []
    for r, prompt in enumerate(prompts):
        kv, logits = _prefill(model, prompt)
        for b, (k, v) in enumerate(kv):
            K[b][r, :, longest - len(prompt):] = k[0]
            V[b][r, :, longest - len(prompt):] = v[0]
        mask[r, longest - len(prompt):] = True
        first.append(logits)
    logits = torch.stack(first)                                    # (R, V)
    where = torch.tensor([len(p) for p in prompts])                 # position of the next token
    who = list(range(R))
    for produced in range(1, max_new_tokens + 1):
        nxt = logits.argmax(-1)
        values = nxt.tolist()
        for req, tok in zip(who, values):
            out[req].append(tok)
        if produced == max_new_tokens:
            break
        stay = [i for i, tok in enumerate(values) if eos_id is None or tok != eos_id]
        if not stay:
            break
        if len(stay) < len(who):
            index = torch.tensor(stay, dtype=torch.long)
            nxt, where, mask = nxt[index], where[index], mask[index]
            K = [k[index] for k in K]
            V = [v[index] for v in V]
            who = [who[i] for i in stay]
        mask = F.pad(mask, (0, 1), value=True)
        x = model.embed(nxt.unsqueeze(1), where.unsqueeze(1))
        for b, block in enumerate(model.blocks):
            q, k, v = block.qkv(x)
            K[b] = torch.cat((K[b], k), dim=2)
            V[b] = torch.cat((V[b], v), dim=2)
            ctx = F.scaled_dot_product_attention(q, K[b], V[b], attn_mask=mask[:, None, None, :])
            x = x + block.merge_heads(ctx)
            x = x + block.mlp(x)
        logits = model.logits(x)[:, 0]
        where = where + 1
    return out
