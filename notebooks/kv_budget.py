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
# # The serving ledger: Llama-3 on H100 and H200
#
# A walkthrough of the `kv-budget` kata with the reference (`reference/kv_budget.py`):
#
# 1. where Llama-3-8B's 8,030,261,248 parameters are;
# 2. **the ledger table**: Llama-3-8B and 70B on H100 and H200, BF16, per tensor-parallel degree —
#    weights and KV per GPU, KV tokens, 8k-token sequences, decode and prefill times;
# 3. the roofline of decode against the batch size, and where it turns compute-bound.

# %%
import sys
from dataclasses import replace
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

ROOT = Path.cwd() if (Path.cwd() / "reference").is_dir() else Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reference.kv_budget import (H100_SXM, H200, LLAMA3_70B, LLAMA3_8B, decode_step_time,  # noqa: E402 - sys.path first
                                 kv_bytes_per_token, max_concurrent_seqs, max_kv_tokens, param_count,
                                 prefill_time, weight_bytes)

SHOW = matplotlib.get_backend().lower() != "agg"

# %% [markdown]
# ## 1. Where the parameters are
#
# Two thirds of Llama-3-8B is MLP; the 128k-token vocabulary puts another eighth in the
# embedding and lm_head. GQA (8 KV heads for 32 query heads) barely changes the count but
# divides the KV cache by 4.

# %%
spec = LLAMA3_8B
d, L = spec.d_model, spec.n_layers
parts = {
    "embedding + lm_head": 2 * spec.vocab_size * d,
    "attention (q, k, v, o)": L * (2 * d * spec.n_heads * spec.head_dim + 2 * d * spec.n_kv_heads * spec.head_dim),
    "MLP (gate, up, down)": L * 3 * d * spec.d_ff,
    "norms": (2 * L + 1) * d,
}
total = param_count(spec)
for name, n in parts.items():
    print(f"{name:24s} {n:>14,d}  {100 * n / total:5.1f} %")
print(f"{'total':24s} {total:>14,d}")
mha_spec = replace(spec, n_kv_heads=spec.n_heads)
print(f"KV bytes per token, BF16: GQA {kv_bytes_per_token(spec, 2):,.0f}, "
      f"without GQA {kv_bytes_per_token(mha_spec, 2):,.0f}; parameters without GQA {param_count(mha_spec):,d}")

# %% [markdown]
# ## 2. The ledger table
#
# BF16 weights and KV cache, a 10 % reserve, blocks of 16 tokens, 8192-token conversations,
# decode at batch 32 with 8192 tokens of context, prefill of one 8192-token prompt. "—" marks a
# tensor-parallel degree where the weights do not fit.

# %%
rows = []
for model_name, model in (("Llama-3-8B", LLAMA3_8B), ("Llama-3-70B", LLAMA3_70B)):
    for gpu_name, gpu in (("H100", H100_SXM), ("H200", H200)):
        for tp in (1, 2, 4, 8):
            row = {"model": model_name, "gpu": gpu_name, "tp": tp,
                   "weights GB": weight_bytes(model, 2, tp) / 1e9,
                   "KV KiB/token": kv_bytes_per_token(model, 2, tp) / 1024}
            try:
                row["KV tokens"] = max_kv_tokens(model, gpu, 2, 2, tp, block_size=16)
                row["8k seqs"] = max_concurrent_seqs(model, gpu, 8192, 2, 2, tp)
            except ValueError:
                row["KV tokens"] = row["8k seqs"] = None
            fits = row["KV tokens"] is not None
            row["decode ms"] = f"{1e3 * decode_step_time(model, gpu, 32, 8192, 2, 2, tp):.2f}" if fits else "—"
            row["prefill ms"] = f"{1e3 * prefill_time(model, gpu, 8192, 2, tp):.1f}" if fits else "—"
            rows.append(row)

header = f"{'model':12s} {'gpu':4s} {'tp':>2s} {'weights GB':>10s} {'KV KiB/tok':>10s} {'KV tokens':>10s} " \
         f"{'8k seqs':>7s} {'decode ms':>9s} {'prefill ms':>10s}"
print(header)
for r in rows:
    tokens = "—" if r["KV tokens"] is None else f"{r['KV tokens']:,d}"
    seqs = "—" if r["8k seqs"] is None else str(r["8k seqs"])
    print(f"{r['model']:12s} {r['gpu']:4s} {r['tp']:2d} {r['weights GB']:10.2f} {r['KV KiB/token']:10.0f} "
          f"{tokens:>10s} {seqs:>7s} {r['decode ms']:>9s} {r['prefill ms']:>10s}")

# %% [markdown]
# Read across a row: on one H100, 8B in BF16 leaves room for 52 conversations of 8k tokens;
# 70B needs tp=4 on H100 (tp=2 misses by under a gigabyte with the reserve) but fits tp=2 on
# an H200. Every doubling of tp halves both the weights and the KV per GPU (apart from the
# replicated embeddings), so the KV capacity grows faster than 2x.

# %% [markdown]
# ## 3. The decode roofline
#
# Decode time against the batch size for Llama-3-8B on one H100: flat while reading the weights
# dominates, then growing with each sequence's KV cache; with a short context it turns
# compute-bound near batch ≈ 296, with 8k tokens of context it never does.

# %%
batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
fig, ax = plt.subplots(figsize=(5.5, 3.5))
for context in (1, 1024, 8192):
    times = [1e3 * decode_step_time(LLAMA3_8B, H100_SXM, b, context, 2, 2) for b in batches]
    ax.plot(batches, times, marker="o", label=f"context {context}")
    per_token_us = [1e6 * t / 1e3 / b for t, b in zip(times, batches)]
    print(f"context {context:5d}: µs per generated token at batch 1 / 1024 = "
          f"{per_token_us[0]:8.1f} / {per_token_us[-1]:6.1f}")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("batch (sequences decoded together)")
ax.set_ylabel("decode step (ms)")
ax.set_title("Llama-3-8B, H100, BF16")
ax.legend(fontsize=8)
fig.tight_layout()

if SHOW:
    plt.show()
