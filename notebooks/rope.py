# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Rotary position embeddings: rotations, frequencies, relative positions, long context
#
# This walkthrough drives the reference (`reference/rope.py`). Four pictures:
#
# 1. **The rotation.** One pair of features turns by `p * w` as the position `p` grows.
# 2. **Frequencies per dimension.** `w_i = base ** (-2i / D)` spans from one radian per
#    token to one turn per tens of thousands of tokens.
# 3. **Relative positions.** The score of a query at `m` and a key at `n` depends only on
#    `m - n`, checked numerically; and why the angles must be float32.
# 4. **Llama 3.1 scaling.** Wavelengths before and after: long ones stretched by the factor,
#    short ones kept, a smooth band between.

# %%
import math
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import torch

sys.path.insert(0, str(Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()))
from reference.rope import RotaryEmbedding, apply_rope, rope_inv_freq

torch.manual_seed(0)

# %% [markdown]
# ## 1. The rotation, drawn
#
# Take a head of dimension `D = 4` and the feature vector `[1, 0, 0, 0]`. In the rotate-half
# layout the pairs are `(x0, x2)` and `(x1, x3)`; the first pair has `w_0 = 1` rad per token,
# so positions 0, 1, 2, ... put `(x0, x2)` on the unit circle at angles 0, 1, 2, ... rad.
# A second vector `[0, 1, 0, 0]` lives in the slow pair (`w_1 = 0.01`) and barely moves.

# %%
positions = torch.arange(0, 13)
x = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])  # (2, D=4)
rotated = apply_rope(x[:, None, :].expand(2, len(positions), 4), positions)  # (2, T, 4)

fig, ax = plt.subplots(figsize=(5, 5))
circle = torch.linspace(0, 2 * math.pi, 200)
ax.plot(circle.cos(), circle.sin(), color="0.85")
fast, slow = rotated[0], rotated[1]
ax.plot(fast[:, 0], fast[:, 2], "o-", label="pair (x0, x2), w = 1 rad/token")
ax.plot(slow[:, 1], slow[:, 3], "s-", label="pair (x1, x3), w = 0.01 rad/token")
for p in (0, 1, 2, 6):
    ax.annotate(f"p={p}", (fast[p, 0].item(), fast[p, 2].item()), textcoords="offset points",
                xytext=(6, 4))
ax.set_aspect("equal")
ax.set_xlabel("first feature of the pair")
ax.set_ylabel("second feature of the pair")
ax.set_title("RoPE turns each pair by p * w")
ax.legend(loc="lower left", fontsize=8)
plt.show()

# %% [markdown]
# ## 2. Frequencies per dimension
#
# With `base = 10000` and `D = 128` (Llama), pair 0 turns once every 6.3 tokens and pair 63
# once every ~54,000 tokens: a geometric ladder of clocks. Llama 3 raised the base to 500,000,
# which slows every clock but the first.

# %%
head_dim = 128
fig, ax = plt.subplots(figsize=(7, 3.5))
for base in (10000.0, 500000.0):
    wavelength = 2 * math.pi / rope_inv_freq(head_dim, base)  # tokens per turn
    ax.semilogy(wavelength, ".", label=f"base = {base:,.0f}")
ax.axhline(8192, color="0.5", ls="--", lw=1)
ax.text(2, 8192 * 1.3, "8192 tokens (Llama 3 pre-training context)", fontsize=8)
ax.set_xlabel("pair index i")
ax.set_ylabel("wavelength 2π / w_i (tokens)")
ax.set_title("RoPE frequencies per dimension, D = 128")
ax.legend()
plt.show()

# %% [markdown]
# ## 3. The relative-position property, checked numerically
#
# For a pair rotated by angles `a` and `b`, `R(a)q · R(b)k = q · R(b - a)k`: the score of a
# query at position `m` and a key at position `n` depends only on `m - n`. Below: the score
# matrix over `m, n` in `0..31` is constant along its diagonals (a Toeplitz matrix), and the
# largest deviation from its diagonal's value is at float32 rounding level.

# %%
q, k = torch.randn(head_dim), torch.randn(head_dim)
span = torch.arange(32)
q_rot = apply_rope(q.expand(len(span), head_dim), span)  # (T, D): q at every position
k_rot = apply_rope(k.expand(len(span), head_dim), span)
scores = q_rot @ k_rot.T  # (m, n)

deviation = max((scores.diagonal(d) - scores.diagonal(d)[0]).abs().max().item()
                for d in range(-31, 32))
print(f"largest deviation along a diagonal: {deviation:.2e} (scores are O(10))")

fig, axes = plt.subplots(1, 2, figsize=(10, 4))
axes[0].imshow(scores, cmap="RdBu_r")
axes[0].set_xlabel("key position n")
axes[0].set_ylabel("query position m")
axes[0].set_title("q·k after RoPE: constant along diagonals")
offsets = torch.arange(-200, 201)
for start in (0, 1000, 20000):
    m = torch.full_like(offsets, start + 200)
    n = m - offsets
    rows = apply_rope(q.expand(len(offsets), head_dim), m)
    cols = apply_rope(k.expand(len(offsets), head_dim), n)
    axes[1].plot(offsets, (rows * cols).sum(-1), lw=1, label=f"m = {start + 200}")
axes[1].set_xlabel("distance m - n")
axes[1].set_ylabel("score")
axes[1].set_title("score against distance, three absolute offsets")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# The three curves lie on top of each other. How well they do depends on the angle
# precision: a float32 angle `p * w` is off by about `p * 1e-7`, an angle rounded to bf16
# (8 significant bits) by up to `p * 4e-3`. That is why the angles and the cos/sin table are
# float32 even when the model runs in bf16; only the final product is rounded to bf16.

# %%
p_axis = torch.tensor([10, 100, 1000, 10000, 100000], dtype=torch.float64)
w64 = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
exact = p_axis[:, None] * w64  # float64 angles (P, D/2)
fp32 = p_axis.float()[:, None] * rope_inv_freq(head_dim)  # what apply_rope computes
bf16 = fp32.to(torch.bfloat16)  # an angle table stored in bf16
for p, e32, e16 in zip(p_axis.tolist(), (fp32 - exact).abs().amax(-1).tolist(),
                       (bf16.double() - exact).abs().amax(-1).tolist()):
    print(f"position {p:>8.0f}: angle error float32 {e32:.1e} rad, bf16 {e16:.1e} rad")

# %% [markdown]
# ## 4. Llama 3.1: wavelengths before and after scaling
#
# Llama 3.1 extends an 8192-token model to 128k with `factor = 8`, `low_freq_factor = 1`,
# `high_freq_factor = 4`. Pairs whose wavelength exceeds `8192 / 1` never completed a turn
# during pre-training, so stretching them by 8 keeps them inside the range they were trained
# on (interpolation); pairs shorter than `8192 / 4 = 2048` tokens encode local order and are
# kept exactly; the band between is blended. Linear scaling (position interpolation)
# stretches every pair, which blurs local order.

# %%
llama31 = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}
linear = {"type": "linear", "factor": 8.0}
base = 500000.0
plain = 2 * math.pi / rope_inv_freq(head_dim, base)
scaled = 2 * math.pi / rope_inv_freq(head_dim, base, llama31)
stretched = 2 * math.pi / rope_inv_freq(head_dim, base, linear)

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].loglog(plain, plain, color="0.6", lw=1, label="unscaled")
axes[0].loglog(plain, stretched, "--", label="linear, factor 8")
axes[0].loglog(plain, scaled, ".-", label="llama3")
for edge, name in ((8192 / 4, "8192 / high_freq_factor"), (8192 / 1, "8192 / low_freq_factor")):
    axes[0].axvline(edge, color="0.5", ls=":", lw=1)
    axes[0].text(edge * 1.1, plain.min().item() * 2, name, rotation=90, fontsize=7)
axes[0].set_xlabel("original wavelength (tokens)")
axes[0].set_ylabel("wavelength after scaling (tokens)")
axes[0].set_title("Llama 3.1 stretches only the long wavelengths")
axes[0].legend(fontsize=8)
axes[1].semilogx(plain, scaled / plain, ".-")
axes[1].set_xlabel("original wavelength (tokens)")
axes[1].set_ylabel("stretch factor")
axes[1].set_title("1 (kept) → smooth blend → 8 (interpolated)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 5. The cos/sin cache during decoding
#
# Serving engines precompute the cos/sin table once and index it with positions. A table
# that grows on demand (doubling) does O(1) amortised work per decode step, and the result
# is the same as rotating the whole sequence at once.

# %%
embedding = RotaryEmbedding(head_dim, base, llama31)
sequence = torch.randn(1, 4, 40, head_dim)  # (B, H, T, D)
prompt_len = 8
pieces = [embedding(sequence[..., :prompt_len, :], torch.arange(prompt_len))]
table_sizes = [embedding.cached_positions]
for t in range(prompt_len, 40):
    pieces.append(embedding(sequence[..., t:t + 1, :], torch.tensor([t])))
    table_sizes.append(embedding.cached_positions)
full = apply_rope(sequence, torch.arange(40), base, scaling=llama31)
print("decoded token by token equals one pass:",
      torch.allclose(torch.cat(pieces, dim=-2), full, atol=1e-5))
print("table size after each step:", sorted(set(table_sizes)))
