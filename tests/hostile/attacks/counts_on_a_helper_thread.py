# mha's attention with a Python loop over batch and heads, run on a helper thread: torch's
# modes are per thread, so the worker's operation count of the calling thread sees none of
# the loop's operations.
import math
import threading

import torch


def _attention_looped(q, k, v, attn_mask=None, scale=None, is_causal=False):
    B, H, Tq, D = q.shape
    Tk = k.shape[-2]
    scale = 1 / math.sqrt(D) if scale is None else scale
    out = torch.empty(B, H, Tq, v.shape[-1], dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            scores = (q[b, h].float() @ k[b, h].float().T) * scale
            if is_causal:
                keep = torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq)
                scores = scores.masked_fill(~keep, float("-inf"))
            out[b, h] = (scores.softmax(-1) @ v[b, h].float()).to(q.dtype)
    return out


def attention(q, k, v, attn_mask=None, scale=None, is_causal=False):
    box = []
    worker = threading.Thread(target=lambda: box.append(_attention_looped(q, k, v, attn_mask, scale, is_causal)))
    worker.start()
    worker.join()
    return box[0]
