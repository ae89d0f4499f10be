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
# # FlashAttention: tiles, online softmax, split-K decoding
#
# A walkthrough of the `flash-attn` kata with the reference implementation
# (`reference/flash_attn.py`), compared with the dense attention of the `mha` kata
# (`reference/mha.py`):
#
# 1. the online softmax, step by step, on the statement's worked example;
# 2. **memory vs sequence length**: the largest temporary tensor of dense and of tiled attention;
# 3. how many tile pairs causal attention skips;
# 4. merging partial results with their log-sum-exp, and FlashDecoding over a paged cache.

# %%
import math
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import torch

ROOT = Path.cwd() if (Path.cwd() / "reference").is_dir() else Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.worker.measure import measure  # noqa: E402  (the storages meter the suite uses)
from reference.flash_attn import combine_partials, flash_attention, flash_decode, split_ranges  # noqa: E402 - sys.path first
from reference.mha import attention as dense_attention  # noqa: E402 - sys.path first

torch.manual_seed(0)
SHOW = matplotlib.get_backend().lower() != "agg"

# %% [markdown]
# ## 1. The online softmax
#
# One query, keys [0, 1, 2], values [10, 20, 30], tiles of two keys. After each tile the
# running max m, the running sum l of exp(score - m) and the accumulator acc are rescaled by
# exp(m_old - m_new) when the max grows. The result equals the softmax over all keys.

# %%
scores, values = torch.tensor([0.0, 1.0, 2.0]), torch.tensor([10.0, 20.0, 30.0])
m, l, acc = -math.inf, 0.0, 0.0
for start in (0, 2):
    s, v = scores[start:start + 2], values[start:start + 2]
    m_new = max(m, s.max().item())
    rescale = math.exp(m - m_new)
    p = torch.exp(s - m_new)
    l, acc, m = l * rescale + p.sum().item(), acc * rescale + (p * v).sum().item(), m_new
    print(f"after keys {start}..{start + len(s) - 1}: m = {m:.0f}, l = {l:.4f}, acc = {acc:.3f}")
print(f"out = acc / l = {acc / l:.3f}; lse = m + ln l = {m + math.log(l):.4f}")
out, lse = flash_attention(torch.ones(1, 1, 1, 1), scores.view(1, 1, 3, 1), values.view(1, 1, 3, 1),
                           scale=1.0, block_k=2)
print("flash_attention:", out.item(), lse.item(), "| softmax:", (torch.softmax(scores, 0) @ values).item())

# %% [markdown]
# ## 2. Memory vs sequence length
#
# Dense attention materialises the (T, T) score matrix of every head; tiled attention only a
# (block_q, block_k) tile at a time, plus accumulators of the output's size. We measure every
# tensor each call creates (the same storages meter the hidden suite uses) and plot the largest
# temporary — outputs and output-shaped accumulators aside — and the total allocated.

# %%
B, H, D, BLOCK = 1, 4, 32, 64
lengths = [128, 256, 512, 1024, 2048]
largest = {"dense (mha kata)": [], "tiled (flash-attn)": []}
for T in lengths:
    q, k, v = (torch.randn(B, H, T, D) for _ in range(3))
    out_shape = (B, H, T, D)
    for name, fn in (("dense (mha kata)", lambda: dense_attention(q, k, v, is_causal=True)),
                     ("tiled (flash-attn)", lambda: flash_attention(q, k, v, causal=True, block_q=BLOCK,
                                                                    block_k=BLOCK))):
        storages = measure(fn, "storages").storages
        temporaries = [n for n, shape, _ in storages if shape not in (out_shape, (B, H, T))]
        largest[name].append(4 * max(temporaries) / 2**20)  # float32 bytes, MiB
limit = B * H * (BLOCK * BLOCK + 2 * BLOCK * D) * 4 / 2**20
for name, sizes in largest.items():
    print(f"{name:20s}", " ".join(f"{x:8.2f}" for x in sizes), "MiB")

fig, ax = plt.subplots(figsize=(5.5, 3.5))
for name, sizes in largest.items():
    ax.plot(lengths, sizes, marker="o", label=name)
ax.axhline(limit, color="grey", ls="--", lw=1, label="the kata's memory limit")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("sequence length T")
ax.set_ylabel("largest temporary tensor (MiB)")
ax.set_title("dense grows as T², tiles stay constant")
ax.legend(fontsize=8)
fig.tight_layout()

# %% [markdown]
# At T = 2048 the dense score matrix of 4 heads is 64 MiB; at 128k tokens and 32 heads it
# would be 2 TiB. The tiled version's largest temporary does not depend on T at all: that is
# why FlashAttention made long context practical (and why it is faster: the scores never
# travel to HBM and back).

# %% [markdown]
# ## 3. Causal attention skips about half the tiles
#
# A (q-tile, k-tile) pair whose keys are all in the future of every query of the tile is never
# computed. For Tq = Tk the computed fraction tends to 1/2 (plus the diagonal tiles).

# %%
def visible_fraction(T: int, block: int) -> float:
    tiles = math.ceil(T / block)
    visible = sum(min(tiles, (min(T, (i + 1) * block) - 1) // block + 1) for i in range(tiles))
    return visible / tiles**2


for T in (256, 1024, 4096):
    print(f"T={T:5d}, tiles of 64: {visible_fraction(T, 64):.3f} of the tile pairs computed")

# %% [markdown]
# ## 4. Log-sum-exp merges, and FlashDecoding
#
# Attention over two disjoint key sets merges exactly: weight each part by exp(lse_part - lse).
# FlashDecoding uses this to split one long sequence's keys across many thread blocks.

# %%
q, k, v = torch.randn(1, 2, 1, 16), torch.randn(1, 2, 100, 16), torch.randn(1, 2, 100, 16)
whole, whole_lse = flash_attention(q, k, v)
parts = [flash_attention(q, k[:, :, a:b], v[:, :, a:b]) for a, b in ((0, 37), (37, 100))]
merged, merged_lse = combine_partials(torch.stack([p[0][:, :, 0] for p in parts]),
                                      torch.stack([p[1][:, :, 0] for p in parts]))
print("max |merged - whole| =", (merged - whole[:, :, 0]).abs().max().item())

# A paged cache: 3 sequences of different lengths in shuffled blocks of 16 tokens.
lens = torch.tensor([5, 40, 77])
block_size, max_blocks = 16, 5
table = torch.randperm(15).reshape(3, max_blocks)
k_cache, v_cache = torch.randn(15, block_size, 2, 16), torch.randn(15, block_size, 2, 16)
q = torch.randn(3, 4, 16)
out = flash_decode(q, k_cache, v_cache, table, lens, num_splits=4)
starts, sizes = split_ranges(lens, 4)
print("split sizes per sequence:", sizes.tolist())
b = 2  # check one sequence against dense attention over its own tokens
keys = k_cache[table[b]].reshape(-1, 2, 16)[: lens[b]].transpose(0, 1)  # (H_kv, T, D)
vals = v_cache[table[b]].reshape(-1, 2, 16)[: lens[b]].transpose(0, 1)
dense = dense_attention(q[b][None, :, None], keys.repeat_interleave(2, 0)[None], vals.repeat_interleave(2, 0)[None])
print("sequence 2: max |flash_decode - dense| =", (out[b] - dense[0, :, 0]).abs().max().item())

if SHOW:
    plt.show()
