# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Slow decode: where the time of a generation loop goes
#
# A walkthrough of `reference/slow_decode.py` against the kata's `generate_slow`: what one
# decoding step costs as the sequence grows (FLOPs and wall time), what batching the requests
# buys, and how many times each loop stops to wait for the device. Both loops are imported
# (the slow one from the kata's support file, the fast one from the reference); this notebook
# only measures and plots them.

# %%
import time

import matplotlib.pyplot as plt  # figures show inline in a notebook; run headless with MPLBACKEND=Agg
import torch
from torch.utils.flop_counter import FlopCounterMode

from reference.slow_decode import generate  # also makes slow_decode_model importable
from slow_decode_model import TinyLM, generate_slow

torch.set_num_threads(1)  # tiny tensors: one thread is fastest and the timings steadier
model = TinyLM(vocab_size=64, d_model=256, num_heads=8, num_layers=2, max_seq_len=256, seed=0)


def flops(fn):
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def best_time_s(fn, repeats=5):
    """Best of `repeats` runs, in CPU seconds of this thread: on CPU that is the wall time of
    an idle machine, and it stays steady when other processes share the cores. (On a GPU,
    time with torch.cuda.synchronize() and wall clocks instead: the waits are the point.)"""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


# %% [markdown]
# ## 1. One decoding step, as the sequence grows
#
# `generate_slow` feeds the whole sequence through the model at every step: the step that
# produces token L + 1 runs L tokens through every linear layer and an L x L attention, so its
# cost grows linearly with L and a whole generation costs O(L²). With a KV cache the step runs
# one token through the linears and attends one query over L cached keys: the linears' cost is
# constant, only the (small) attention part grows.
#
# A step of the slow loop at length L is `generate_slow` with a prompt of L tokens and one new
# token; a cached step is the difference between the reference generating 1 + 16 tokens and
# one, over 16 (the average step just past length L).

# %%
sequence = torch.randint(0, 64, (256,), generator=torch.Generator().manual_seed(1)).tolist()
lengths = [8, 16, 32, 64, 128, 192]
STEPS = 16
slow_flops, fast_flops, slow_ms, fast_ms = [], [], [], []
for L in lengths:
    prompt = [sequence[:L]]
    slow_flops.append(flops(lambda: generate_slow(model, prompt, 1)))
    fast_flops.append((flops(lambda: generate(model, [sequence[:L - 1]], 1 + STEPS))
                       - flops(lambda: generate(model, [sequence[:L - 1]], 1))) / STEPS)
    slow_ms.append(1e3 * best_time_s(lambda: generate_slow(model, prompt, 1)))
    fast_ms.append(1e3 * (best_time_s(lambda: generate(model, [sequence[:L - 1]], 1 + STEPS))
                          - best_time_s(lambda: generate(model, [sequence[:L - 1]], 1))) / STEPS)
    print(f"L={L:4d}  slow {slow_flops[-1] / 1e6:7.2f} MFLOPs {slow_ms[-1]:6.2f} ms   "
          f"cached {fast_flops[-1] / 1e6:5.3f} MFLOPs {fast_ms[-1]:6.2f} ms")

fig, (ax_flops, ax_time) = plt.subplots(1, 2, figsize=(11, 4))
ax_flops.plot(lengths, [f / 1e6 for f in slow_flops], "o-", label="generate_slow (recompute)")
ax_flops.plot(lengths, [f / 1e6 for f in fast_flops], "s-", label="KV cache")
ax_flops.set(xlabel="sequence length L", ylabel="MFLOPs for the next token", yscale="log",
             title="FLOPs of one decoding step")
ax_time.plot(lengths, slow_ms, "o-", label="generate_slow (recompute)")
ax_time.plot(lengths, fast_ms, "s-", label="KV cache")
ax_time.set(xlabel="sequence length L", ylabel="ms for the next token", yscale="log",
            title="wall time of one decoding step (CPU)")
for ax in (ax_flops, ax_time):
    ax.legend()
    ax.grid(alpha=0.3)
plt.tight_layout()
plt.show()

# %% [markdown]
# The FLOPs of the slow step grow in proportion to L (from 25 to 680 MFLOPs here); the cached
# step's barely move (3.2 to 3.6: only its attention over the cache grows). The time follows
# less steeply: at short lengths both steps are dominated by the fixed cost of dispatching
# some 75 small operations, which is why batching the requests is the next fix, not fewer
# FLOPs.

# %% [markdown]
# ## 2. Many requests at once
#
# `generate_slow` serves requests one after the other, each with its own loop over heads and
# its own `.item()` per token. The reference left-pads all prompts into one batch, masks the
# padding out of attention and runs every head in one matmul: the same ~75 operations per
# step serve every request, so the time per generated token falls as the batch grows (until
# the arithmetic, not the launches, dominates).

# %%
requests = [1, 2, 4, 8, 16]
new_tokens = 8
slow_per_token, fast_per_token = [], []
for R in requests:
    prompts = [sequence[i * 8: i * 8 + 4 + i % 5] for i in range(R)]   # lengths 4..8
    slow_per_token.append(1e3 * best_time_s(lambda: generate_slow(model, prompts, new_tokens), 1)
                          / (R * new_tokens))
    fast_per_token.append(1e3 * best_time_s(lambda: generate(model, prompts, new_tokens)) / (R * new_tokens))

plt.figure(figsize=(5.5, 4))
plt.plot(requests, slow_per_token, "o-", label="generate_slow (one request at a time)")
plt.plot(requests, fast_per_token, "s-", label="batched, cached")
plt.xscale("log", base=2)
plt.yscale("log")
plt.xlabel("requests in the call")
plt.ylabel("ms per generated token")
plt.title(f"{new_tokens} new tokens per request")
plt.legend()
plt.grid(alpha=0.3)
plt.show()

# %% [markdown]
# ## 3. Waiting for the device
#
# Every `.item()`, `.tolist()` or boolean-mask index makes the host wait until the device has
# computed the value. On a GPU that wait also stops the host from queueing the next kernels,
# so the device idles between steps. `generate_slow` synchronises once per token of every
# request; the reference once per step, with one `.tolist()` that serves all requests and also
# decides which finished requests leave the batch (integer indexing, no further sync).

# %%
prompts = [sequence[i * 8: i * 8 + 5] for i in range(8)]


class SyncCounter(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.syncs = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("item", "tolist", "cpu", "nonzero", "__bool__"):
            self.syncs += 1
        return func(*args, **(kwargs or {}))


for name, fn in (("generate_slow", generate_slow), ("reference", generate)):
    with SyncCounter() as counter:
        fn(model, prompts, 10)
    print(f"{name:14s} 8 requests x 10 tokens: {counter.syncs:3d} host syncs")

# %% [markdown]
# ## 4. Stopping early
#
# With `eos_id`, a request that generated its EOS leaves the batch (and its rows of every
# cache) before the next step, so the FLOPs of the later steps shrink with the number of
# requests still running, and the loop ends when none is left.

# %%
outputs = generate(model, prompts, 12)
eos_id = max(set(t for out in outputs for t in out), key=lambda t: sum(t in out for out in outputs))
finished = generate(model, prompts, 12, eos_id=eos_id)
print(f"eos_id={eos_id}: output lengths {[len(o) for o in finished]}")
print(f"FLOPs without eos_id: {flops(lambda: generate(model, prompts, 12)) / 1e6:.2f} M, "
      f"with: {flops(lambda: generate(model, prompts, 12, eos_id=eos_id)) / 1e6:.2f} M")
