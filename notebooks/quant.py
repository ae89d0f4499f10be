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
# # Quantization: INT8 per channel, INT4 groups, FP8 with delayed scaling
#
# This walkthrough drives the reference (`reference/quant.py`). Four pictures:
#
# 1. **Per channel vs per tensor.** One scale per output row keeps small rows precise; a
#    single scale for the whole matrix does not.
# 2. **Group size.** INT4 error falls as groups shrink, and the bytes per weight grow.
# 3. **Outliers.** One large activation channel ruins per-tensor INT8 of the activations:
#    why LLM.int8() and SmoothQuant exist.
# 4. **Delayed scaling.** A stream whose amax jumps: the FP8 scale lags, values saturate,
#    then the history catches up.

# %%
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import torch

sys.path.insert(0, str(Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()))
from reference.quant import (FP8Scaler, dequantize_int4, dequantize_int8, fp8_matmul,
                             int8_linear, quantize_int4, quantize_int8)

gen = torch.Generator().manual_seed(0)

# %% [markdown]
# ## 1. Per output channel vs per tensor
#
# Rows of a real weight matrix have different magnitudes. Give every row its own scale
# (LLM.int8()'s vector-wise absmax) and a small row keeps all 255 codes; one scale for the
# matrix leaves it a handful.

# %%
row_magnitudes = torch.logspace(-2, 0, 64)  # rows from 0.01 to 1.0
w = torch.randn(64, 256, generator=gen) * row_magnitudes[:, None]
q, scale = quantize_int8(w)
per_channel_err = (dequantize_int8(q, scale) - w).abs().mean(dim=1) / w.abs().mean(dim=1)
tensor_scale = w.abs().max() / 127
per_tensor = torch.round(w / tensor_scale).clamp(-127, 127) * tensor_scale
per_tensor_err = (per_tensor - w).abs().mean(dim=1) / w.abs().mean(dim=1)

fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.loglog(row_magnitudes, per_channel_err, "o", ms=3, label="one scale per row")
ax.loglog(row_magnitudes, per_tensor_err, "s", ms=3, label="one scale per tensor")
ax.set_xlabel("row magnitude")
ax.set_ylabel("mean relative error")
ax.legend()
plt.tight_layout()
plt.show()
print(f"relative error of the smallest row: per channel {per_channel_err[0]:.4f}, "
      f"per tensor {per_tensor_err[0]:.4f}")

x = torch.randn(4, 256, generator=gen, dtype=torch.float32).to(torch.bfloat16)
y = int8_linear(x, q, scale)
exact = x.float() @ w.T
print("int8_linear:", tuple(y.shape), y.dtype,
      f"relative error vs x @ w.T: {((y.float() - exact).norm() / exact.norm()):.4f}")

# %% [markdown]
# ## 2. INT4: the group size trades bytes for error
#
# Every group stores a float32 scale and a 4-bit zero point here (checkpoints use FP16
# scales: 0.125 + 2.5 / group_size bytes per weight with 4-bit zeros). Smaller groups fit
# the local range better.

# %%
w = torch.randn(256, 1024, generator=gen) * 0.02
rows = []
for group_size in (16, 32, 64, 128, 256, 1024):
    packed, scales, zeros = quantize_int4(w, group_size)
    err = (dequantize_int4(packed, scales, zeros, group_size) - w).pow(2).mean().sqrt() / w.pow(2).mean().sqrt()
    bytes_per_weight = 0.5 + (2 + 0.5) / group_size  # fp16 scale + 4-bit zero per group
    rows.append((group_size, float(err), bytes_per_weight))
    print(f"group_size {group_size:5d}: relative RMS error {float(err):.4f}, {bytes_per_weight:.4f} bytes/weight")

fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.plot([r[2] for r in rows], [r[1] for r in rows], "o-")
for size, error, nbytes in rows:
    ax.annotate(str(size), (nbytes, error), textcoords="offset points", xytext=(4, 4))
ax.set_xlabel("bytes per weight")
ax.set_ylabel("relative RMS error")
ax.set_title("INT4, by group size")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Activation outliers
#
# From a few billion parameters on, a handful of hidden dimensions carry activations 20-100x
# larger than the rest. Quantize activations per tensor to INT8 and the scale is set by the
# outliers: the ordinary channels are left with a few codes. LLM.int8() runs the outlier
# columns in FP16; SmoothQuant divides them by a per-channel factor and folds it into the
# weights.

# %%
acts = torch.randn(128, 512, generator=gen)
acts[:, :4] *= 60.0  # four outlier channels
scale_t = acts.abs().max() / 127
deq = torch.round(acts / scale_t).clamp(-127, 127) * scale_t
normal = slice(4, None)
print(f"per-tensor INT8 of activations: relative error of the normal channels "
      f"{((deq - acts)[:, normal].norm() / acts[:, normal].norm()):.3f}")
smooth = acts.abs().amax(dim=0).clamp(min=1e-5).sqrt()  # SmoothQuant with alpha = 0.5 (weights ~1)
smoothed = acts / smooth
scale_s = smoothed.abs().max() / 127
deq_s = (torch.round(smoothed / scale_s).clamp(-127, 127) * scale_s) * smooth
print(f"after SmoothQuant-style smoothing: {((deq_s - acts)[:, normal].norm() / acts[:, normal].norm()):.3f}")

# %% [markdown]
# ## 4. Delayed scaling when the amax jumps
#
# A stream of activations whose magnitude jumps 8x at step 20. The scale of each step comes
# from the history of earlier steps, so at the jump the scale is still the old one and the
# large values saturate at 448; from the next step the history holds the large amax. When the
# magnitude falls back at step 40 the large amax stays in the 4-step window for four more
# steps: the small values get a scale 8x too small, and lose three bits of precision.

# %%
scaler = FP8Scaler(history_len=4)
steps, scales_seen, saturated = [], [], []
for step in range(60):
    magnitude = 8.0 if 20 <= step < 40 else 1.0
    x = torch.randn(4096, generator=gen) * magnitude
    x_fp8, s = scaler.quantize(x)
    steps.append(step)
    scales_seen.append(float(s))
    saturated.append(float((x_fp8.float().abs() == 448).float().mean()))

fig, ax1 = plt.subplots(figsize=(6, 3.5))
ax1.semilogy(steps, scales_seen, "o-", ms=3, label="scale")
ax1.set_xlabel("step")
ax1.set_ylabel("scale")
ax2 = ax1.twinx()
ax2.plot(steps, saturated, "r.", label="saturated fraction")
ax2.set_ylabel("fraction at ±448", color="r")
plt.tight_layout()
plt.show()
print("saturated fraction at steps 19..22:", [round(v, 4) for v in saturated[19:23]])

a_full, b_full = torch.randn(64, 128, generator=gen), torch.randn(128, 32, generator=gen) * 0.05
(a_fp8, sa), (b_fp8, sb) = FP8Scaler().quantize(a_full), FP8Scaler().quantize(b_full)
exact = a_full @ b_full
print("fp8_matmul (E4M3 operands, float32 accumulation) relative error vs the float32 product:",
      f"{((fp8_matmul(a_fp8, sa, b_fp8, sb, torch.float32) - exact).norm() / exact.norm()):.2e}")
