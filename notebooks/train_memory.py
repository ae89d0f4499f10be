# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Train memory: where the bytes of a fine-tuning step go
#
# A walkthrough of `reference/train_memory.py` against the kata's `finetune_leaky`: the
# ledger of weights, gradients and optimizer state; the peak of live tensor bytes as the
# steps go by (the leak); as the batch grows, with and without micro-batches; and as the
# model deepens, with and without activation checkpointing. Both loops are imported; this
# notebook only measures and plots them, with the grader's own `peak_bytes` measurement.

# %%
import matplotlib.pyplot as plt  # figures show inline in a notebook; run headless with MPLBACKEND=Agg
import torch

from grader.worker.measure import measuring
from reference.train_memory import finetune, training_state_bytes  # also makes train_memory_model importable
from train_memory_model import IGNORE_INDEX, TinyLM, finetune_leaky

torch.set_num_threads(1)


def peak(fn, *args, **kwargs):
    """The most bytes of tensors created by fn(...) alive at once."""
    with measuring("peak_bytes") as m:
        fn(*args, **kwargs)
    return m.peak_bytes


def batch(num_sequences, T=12, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 32, (num_sequences, T), generator=gen)
    labels = torch.cat([ids[:, 1:], torch.full((num_sequences, 1), IGNORE_INDEX)], dim=1)
    return ids, labels


# %% [markdown]
# ## The ledger: 16 bytes a parameter
#
# Mixed-precision AdamW keeps a bf16 weight and gradient (2 + 2 bytes), and m, v and a
# float32 master weight (4 + 4 + 4): 16 bytes a parameter before any activation. ZeRO shards
# the 12 bytes of optimizer state first, then the gradients, then the weights.

# %%
n = 7_000_000_000
for stage in range(4):
    print(f"7B, ZeRO stage {stage}, dp=8: {training_state_bytes(n, n, zero_stage=stage, dp=8) / 1e9:6.1f} GB")
print(f"7B, LoRA (4M trainable): {training_state_bytes(n, 4_000_000) / 1e9:.2f} GB")

# %% [markdown]
# ## The leak: peak bytes against steps
#
# `finetune_leaky` keeps each step's logits and a metric's graph: its peak grows by a few
# (B, T, V) tensors a step. `finetune` keeps nothing of a step.

# %%
steps = [1, 2, 4, 8]
batches = [batch(4, seed=s) for s in range(2)]
leaky = [peak(finetune_leaky, TinyLM(seed=0), batches, lr=1e-2, steps=s) for s in steps]
fixed = [peak(finetune, TinyLM(seed=0), batches, lr=1e-2, steps=s) for s in steps]
plt.plot(steps, leaky, "o-", label="finetune_leaky")
plt.plot(steps, fixed, "o-", label="finetune")
plt.xlabel("steps")
plt.ylabel("peak live tensor bytes")
plt.legend()
plt.show()

# %% [markdown]
# ## Micro-batches: memory follows the micro-batch
#
# With micro-batches of 2 sequences the peak stops growing with the batch; the update is the
# same, because each micro-batch's summed loss is divided by the whole batch's valid tokens.

# %%
sizes = [2, 4, 8, 16]
whole = [peak(finetune, TinyLM(seed=0), [batch(b)], lr=1e-2, steps=2) for b in sizes]
micro = [peak(finetune, TinyLM(seed=0), [batch(b)], lr=1e-2, steps=2, micro_batch_size=2) for b in sizes]
plt.plot(sizes, whole, "o-", label="whole batch")
plt.plot(sizes, micro, "o-", label="micro_batch_size=2")
plt.xlabel("sequences in the batch")
plt.ylabel("peak live tensor bytes")
plt.legend()
plt.show()

# %% [markdown]
# ## Checkpointing: memory per layer
#
# Without checkpointing every layer adds its activations; with it, a layer adds its training
# state and one saved input.

# %%
layers = [1, 2, 4]
plain = [peak(finetune, TinyLM(num_layers=L, seed=0), [batch(8, T=16)], lr=1e-2, steps=2) for L in layers]
ckpt = [peak(finetune, TinyLM(num_layers=L, seed=0), [batch(8, T=16)], lr=1e-2, steps=2, checkpoint=True)
        for L in layers]
plt.plot(layers, plain, "o-", label="no checkpointing")
plt.plot(layers, ckpt, "o-", label="checkpoint=True")
plt.xlabel("layers")
plt.ylabel("peak live tensor bytes")
plt.legend()
plt.show()
