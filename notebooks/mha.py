# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Multi-head attention: masks, GQA and the KV cache
#
# A walkthrough of the `mha` kata with the reference implementation (`reference/mha.py`):
#
# 1. attention as a weighted average of values;
# 2. the causal mask when queries and keys differ in length, in both alignments;
# 3. the KV cache, and why decoding is memory-bound (a worked estimate for a 70B model);
# 4. how much memory grouped-query attention saves.

# %%
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import torch

ROOT = Path.cwd() if (Path.cwd() / "reference").is_dir() else Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reference.mha import KVCache, MultiHeadAttention, attention, causal_lower_right  # noqa: E402 - sys.path first

torch.manual_seed(0)
SHOW = matplotlib.get_backend().lower() != "agg"

# %% [markdown]
# ## 1. Attention is a weighted average
#
# Each query scores every key (`q·k / sqrt(D)`), the softmax turns the scores of a row into
# weights that are non-negative and sum to one, and the output is the weighted average of the
# values. With `v = identity` the output *is* the weight matrix, which is how the hidden suite
# checks that rows sum to one.

# %%
Tq, Tk, D = 4, 6, 8
q, k = torch.randn(1, 1, Tq, D), torch.randn(1, 1, Tk, D)
identity = torch.eye(Tk)[None, None]
weights = attention(q, k, identity)[0, 0]  # (Tq, Tk): v = I returns the weights
print("row sums:", weights.sum(-1))

v = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]])[None, None]  # value = key index
print("output = expected key index under the weights:", attention(q, k, v)[0, 0, :, 0])

fig, ax = plt.subplots(figsize=(4, 3))
ax.imshow(weights, cmap="viridis")
ax.set_xlabel("key j")
ax.set_ylabel("query i")
ax.set_title("attention weights (rows sum to 1)")
fig.tight_layout()

# %% [markdown]
# ## 2. The causal mask when Tq != Tk
#
# Decoding with a cache and chunked prefill run *fewer queries than keys*: the queries are the
# last Tq positions. Query i may attend key j iff `j <= i + (Tk - Tq)` (bottom-right).
# `scaled_dot_product_attention(is_causal=True)` aligns top-left instead (`j <= i`), which for
# a single decode token means "see only key 0" — the bug the kata's corpus is built around.

# %%
Tq, Tk = 3, 7
bottom_right = causal_lower_right(Tq, Tk)
top_left = torch.ones(Tq, Tk, dtype=torch.bool).tril()  # SDPA's alignment, for comparison

fig, axes = plt.subplots(1, 2, figsize=(8, 2.4))
for ax, mask, title in zip(axes, (top_left, bottom_right),
                           ("top-left (SDPA is_causal): wrong with a cache",
                            "bottom-right (this kata): query i = position i + Tk - Tq")):
    ax.imshow(mask, cmap="Greens", vmin=0, vmax=1)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
fig.tight_layout()

# One decode token after a 6-token prompt: bottom-right sees all 7 keys.
print("decode token sees keys:", causal_lower_right(1, 7).nonzero()[:, 1].tolist())

# %% [markdown]
# ## 3. The KV cache
#
# Keys and values of past tokens never change, so decoding keeps them and only projects the
# new token. The result is the same as recomputing the whole sequence:

# %%
mha = MultiHeadAttention(d_model=32, n_heads=8, n_kv_heads=2)
x = torch.randn(1, 10, 32)
with torch.no_grad():
    full = mha(x, is_causal=True)
    cache = KVCache()
    chunks = [mha(x[:, :6], is_causal=True, kv_cache=cache)]  # prompt (prefill)
    chunks += [mha(x[:, t:t + 1], is_causal=True, kv_cache=cache) for t in range(6, 10)]
cached = torch.cat(chunks, dim=1)
print("max |cached - full| =", (cached - full).abs().max().item(), "| seq_len =", cache.seq_len)

# %% [markdown]
# ### Why decoding is memory-bound: a 70B model at BF16
#
# One decode step for a batch of one token reads every weight once and does about two FLOPs
# per weight (a multiply and an add):
#
# - weights: 70e9 parameters x 2 bytes = **140 GB read per step**;
# - compute: 2 x 70e9 = **140 GFLOP per token**, so about **1 FLOP per byte**.
#
# An H100 SXM does about 989 TFLOP/s dense BF16 and reads HBM at about 3.35 TB/s: it needs
# about 295 FLOPs per byte to be compute-bound. At 1 FLOP/byte the step is limited by the
# memory: 140 GB / 3.35 TB/s = 42 ms per token (per GPU-equivalent of bandwidth; the model is
# split across GPUs in practice, which divides the time but not the ratio). Batching B
# sequences reuses each weight B times, so intensity grows with B — until the KV cache,
# which is read per sequence, dominates.

# %%
params, bytes_per_param = 70e9, 2
peak_flops, bandwidth = 989e12, 3.35e12
layers, kv_heads, head_dim = 80, 8, 128  # Llama-2-70B shapes (GQA with 8 KV heads)
kv_bytes_per_token = 2 * layers * kv_heads * head_dim * bytes_per_param  # K and V
print(f"weights read per step: {params * bytes_per_param / 1e9:.0f} GB")
print(f"time per step at batch 1, bandwidth bound: {params * bytes_per_param / bandwidth * 1e3:.0f} ms")
print(f"KV cache per token: {kv_bytes_per_token / 1024:.0f} KiB")

batch = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=torch.float64)
context = 4096
flops = 2 * params * batch
bytes_read = params * bytes_per_param + batch * context * kv_bytes_per_token
intensity = flops / bytes_read
fig, ax = plt.subplots(figsize=(5, 3))
ax.loglog(batch, intensity, marker="o", label=f"decode step, context {context}")
ax.axhline(peak_flops / bandwidth, color="red", linestyle="--", label="H100 ridge point (~295)")
ax.set_xlabel("batch size (sequences)")
ax.set_ylabel("FLOPs per byte read")
ax.set_title("decoding is memory-bound")
ax.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# ## 4. GQA's memory saving
#
# The KV cache stores `2 x layers x n_kv_heads x head_dim` numbers per token. Llama-2-70B has
# 64 query heads but only 8 KV heads: an 8x smaller cache than full multi-head attention
# (and 8x fewer bytes read per decode step), for a small loss in quality (Ainslie et al., 2023).
# Multi-query attention (one KV head) saves 64x.

# %%
tokens = torch.arange(0, 32769, 1024, dtype=torch.float64)
fig, ax = plt.subplots(figsize=(5, 3))
for n_kv in (64, 8, 1):
    gib = tokens * 2 * layers * n_kv * head_dim * bytes_per_param / 2**30
    label = {64: "MHA (64 KV heads)", 8: "GQA (8 KV heads)", 1: "MQA (1 KV head)"}[n_kv]
    ax.plot(tokens, gib, label=label)
ax.set_xlabel("tokens cached (one sequence)")
ax.set_ylabel("KV cache (GiB, BF16)")
ax.set_title("KV-cache size, 80 layers, head_dim 128")
ax.legend(fontsize=8)
fig.tight_layout()

# GQA in the reference: the cache holds n_kv_heads heads, not n_heads.
print("cached k shape (B, n_kv_heads, T, head_dim):", tuple(cache.k.shape))

if SHOW:
    plt.show()
