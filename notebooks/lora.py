# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # LoRA: what it saves, what merging costs, and why servers keep adapters unmerged
#
# This walkthrough uses the kata's reference (`reference/lora.py`):
#
# 1. parameter and memory counts of LoRA against full fine-tuning for a 7B-shaped model;
# 2. the layer itself: it starts equal to the base, and merging does not change its output;
# 3. the merge trade-off: latency of the merged and unmerged forward, measured on this machine;
# 4. multi-tenant serving: one base, many adapters, one batch, with the batched gather drawn.

# %%
import time

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyArrowPatch, Rectangle
from torch import nn

from reference.lora import LoRALinear, MultiLoRALinear

torch.manual_seed(0)
torch.set_num_threads(1)  # steadier timings on a shared machine

# %% [markdown]
# ## 1. Parameters and memory: a 7B-shaped model
#
# Llama-2-7B shapes: 32 layers, hidden size 4096, MLP size 11008, vocabulary 32000. LoRA
# trains `r * (in + out)` parameters per adapted matrix. We adapt either the attention
# projections (q, k, v, o) or every linear layer (attention and MLP).
#
# Memory for training with Adam in mixed precision, per parameter: full fine-tuning keeps a
# bf16 weight and gradient (2 + 2 bytes), an fp32 master copy (4) and two fp32 Adam moments
# (8): 16 bytes. With LoRA the frozen base costs only its bf16 weight (2 bytes); the 16 bytes
# apply to the adapter parameters alone. Activations are left out: they depend on the batch.

# %%
NUM_LAYERS, HIDDEN, MLP, VOCAB = 32, 4096, 11008, 32000
ATTENTION = [(HIDDEN, HIDDEN)] * 4  # q, k, v, o: (in, out)
MLP_MATS = [(HIDDEN, MLP), (HIDDEN, MLP), (MLP, HIDDEN)]  # gate, up, down
base_params = NUM_LAYERS * (sum(i * o for i, o in ATTENTION + MLP_MATS) + 2 * HIDDEN) \
    + 2 * VOCAB * HIDDEN + HIDDEN
BYTES_FULL, BYTES_FROZEN = 16, 2


def lora_params(r: int, mats: list[tuple[int, int]]) -> int:
    return NUM_LAYERS * sum(r * (i + o) for i, o in mats)


ranks = [8, 16, 32, 64]
rows = []
for r in ranks:
    for label, mats in (("attention", ATTENTION), ("all linear", ATTENTION + MLP_MATS)):
        n = lora_params(r, mats)
        mem_gb = (base_params * BYTES_FROZEN + n * BYTES_FULL) / 1e9
        rows.append((r, label, n, 100 * n / base_params, mem_gb))
full_gb = base_params * BYTES_FULL / 1e9
print(f"base parameters: {base_params / 1e9:.2f} B; full fine-tuning state: {full_gb:.0f} GB")
print(f"{'r':>3} {'adapted':>11} {'trainable':>12} {'% of base':>10} {'train state GB':>15}")
for r, label, n, pct, gb in rows:
    print(f"{r:>3} {label:>11} {n / 1e6:>10.1f} M {pct:>9.2f}% {gb:>15.1f}")

# %%
fig, (ax_params, ax_mem) = plt.subplots(1, 2, figsize=(11, 4))
for label, marker in (("attention", "o"), ("all linear", "s")):
    xs = [r for r, lab, *_ in rows if lab == label]
    ax_params.plot(xs, [n / 1e6 for r, lab, n, *_ in rows if lab == label], marker=marker,
                   label=f"LoRA on {label}")
    ax_mem.plot(xs, [gb for r, lab, n, pct, gb in rows if lab == label], marker=marker,
                label=f"LoRA on {label}")
ax_params.axhline(base_params / 1e6, color="k", ls="--", label="full fine-tuning")
ax_params.set(xscale="log", yscale="log", xlabel="rank r", ylabel="trainable parameters (M)",
              title="Trainable parameters")
ax_mem.axhline(full_gb, color="k", ls="--", label="full fine-tuning")
ax_mem.set(xscale="log", xlabel="rank r", ylabel="GB (weights + grads + Adam)",
           title="Training state memory")
for ax in (ax_params, ax_mem):
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Even at r = 64 on every linear layer the adapter is a few percent of the base. What remains
# is the frozen bf16 base (about 13.5 GB), which is why QLoRA goes on to quantise it.
#
# ## 2. The layer: starts at the base, merges without changing the output

# %%
base = nn.Linear(64, 32)
layer = LoRALinear(base, r=8, alpha=16.0)
x = torch.randn(4, 64)
with torch.no_grad():
    print("starts equal to base:", torch.equal(layer(x), base(x)))
    layer.lora_B.normal_()  # pretend we trained
    unmerged = layer(x)
    layer.merge()
    merged = layer(x)
    layer.unmerge()
print("max |merged - unmerged| =", (merged - unmerged).abs().max().item())
print("rank of delta_weight:", torch.linalg.matrix_rank(layer.delta_weight().detach()).item())
print("trainable:", [n for n, p in layer.named_parameters() if p.requires_grad])

# %% [markdown]
# ## 3. The merge trade-off, measured here
#
# Unmerged, every forward pays two extra thin matmuls (`x @ A.T`, then `@ B.T`) and an add.
# Merged, the forward is a plain linear layer, but the adapter is baked into the weight: one
# tenant per weight copy, and switching adapters means merging and unmerging again.

# %%


def median_ms(fn, repeats: int = 5, loops: int = 3) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - t0) / loops * 1e3)
    return sorted(samples)[len(samples) // 2]


size, tokens = 512, 64
timings = {}
x = torch.randn(tokens, size)
for r in (8, 16, 64):
    layer = LoRALinear(nn.Linear(size, size), r=r, alpha=2.0 * r).eval()
    with torch.no_grad():
        layer.lora_B.normal_()
        unmerged_ms = median_ms(lambda: layer(x))
        layer.merge()
        merged_ms = median_ms(lambda: layer(x))
    timings[r] = (unmerged_ms, merged_ms)
    print(f"r={r:>2}: unmerged {unmerged_ms:.3f} ms, merged {merged_ms:.3f} ms "
          f"(+{100 * (unmerged_ms / merged_ms - 1):.0f}%)")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
labels = [f"r={r}" for r in timings]
pos = range(len(timings))
ax.bar([p - 0.2 for p in pos], [u for u, _ in timings.values()], width=0.4, label="unmerged")
ax.bar([p + 0.2 for p in pos], [m for _, m in timings.values()], width=0.4, label="merged")
ax.set_xticks(list(pos), labels)
ax.set(ylabel="ms per forward", title=f"{tokens} tokens through a {size}x{size} layer (CPU)")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 4. Many tenants, one base: why servers keep adapters unmerged
#
# With K tenants, merging means K copies of every adapted weight, or re-merging whenever the
# batch switches tenant, and a batch can then hold only one tenant. Unmerged, one base serves
# everybody: a mixed batch runs the base matmul once for all rows, then each row gathers its
# own adapter by slot and the low-rank products run as one batched matmul (BGMV).

# %%
num_tenants = [1, 4, 16, 64, 256]
weight_mb = HIDDEN * HIDDEN * 2 / 1e6  # one bf16 4096 x 4096 projection
adapter_mb = 16 * (HIDDEN + HIDDEN) * 2 / 1e6  # r = 16
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(num_tenants, [k * weight_mb for k in num_tenants], marker="o",
        label="one merged copy per tenant")
ax.plot(num_tenants, [weight_mb + k * adapter_mb for k in num_tenants], marker="s",
        label="one base + unmerged adapters (r=16)")
ax.set(xscale="log", yscale="log", xlabel="tenants", ylabel="MB for one 4096x4096 projection",
       title="Memory per adapted projection")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
layer = MultiLoRALinear(nn.Linear(16, 8), max_rank=4)
slots = {name: layer.add_adapter(name, torch.randn(r, 16), torch.randn(8, r), alpha=2.0 * r)
         for name, r in (("acme", 4), ("globex", 2), ("initech", 1))}
adapter_ids = torch.tensor([slots["acme"], -1, slots["initech"], slots["acme"], slots["globex"],
                            -1])
x = torch.randn(len(adapter_ids), 16)
with torch.no_grad():
    out = layer(x, adapter_ids)
print("slots:", slots, "adapter_ids:", adapter_ids.tolist(), "out:", tuple(out.shape))

# %%
palette = ("tab:blue", "tab:orange", "tab:green")
colors = {-1: "lightgrey", **dict(zip(slots.values(), palette))}
ranks_by_slot = {slots["acme"]: 4, slots["globex"]: 2, slots["initech"]: 1}
fig, ax = plt.subplots(figsize=(9, 4))
for n, slot in enumerate(adapter_ids.tolist()):
    ax.add_patch(Rectangle((0, 5 - n), 2.2, 0.8, color=colors[slot]))
    ax.text(1.1, 5.4 - n, f"row {n}: id {slot}", ha="center", va="center", fontsize=8)
for k, (name, slot) in enumerate(slots.items()):
    r = ranks_by_slot[slot]
    ax.add_patch(Rectangle((6, 4.6 - 2 * k), 3 * r / 4, 1.4, color=colors[slot]))
    ax.add_patch(Rectangle((6 + 3 * r / 4, 4.6 - 2 * k), 3 * (1 - r / 4), 1.4, fill=False,
                           hatch="//"))
    ax.text(7.5, 5.3 - 2 * k, f"slot {slot}: {name} (r={r}, padded to 4)", ha="center", fontsize=8)
for n, slot in enumerate(adapter_ids.tolist()):
    if slot >= 0:
        k = list(slots.values()).index(slot)
        ax.add_patch(FancyArrowPatch((2.2, 5.4 - n), (6, 5.3 - 2 * k), arrowstyle="->",
                                     mutation_scale=10, color=colors[slot]))
ax.text(1.1, 6.2, "mixed batch", ha="center")
ax.text(7.5, 6.2, "stacked adapters A (S, R, in), B (S, out, R)", ha="center")
ax.text(11.5, 3.3, "gather A[ids], B[ids]\n-> bmm, bmm\n-> y = base(x) + scaling * delta\n"
        "(-1 rows: scaling 0)", ha="center", va="center", fontsize=9)
ax.set(xlim=(-0.5, 14), ylim=(-1.8, 6.6))
ax.axis("off")
ax.set_title("BGMV: each row gathers its adapter by slot; one batched matmul for all rows")
fig.tight_layout()
plt.show()

# %% [markdown]
# The gathered weights cost N · max_rank · (in + out) numbers per call, small next to the
# base weight, and the padding to `max_rank` is the price of a single batched matmul. Real
# servers (Punica's SGMV, S-LoRA) avoid materialising the gather with custom kernels and group
# rows by adapter when a few tenants dominate the batch.
