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
# # Paged KV cache: why blocks, how forks share them, how prefixes are reused
#
# This walkthrough drives the reference allocator (`reference/paged_kv.py`) with simulated
# workloads. Three questions:
#
# 1. **Why paging?** Reserving a contiguous slab per request for its maximum length wastes
#    memory; blocks waste less than one block per request.
# 2. **Fork and copy-on-write.** Parallel sampling shares the prompt's blocks between samples;
#    only the partly filled last block is copied, and only when a sample writes into it.
# 3. **Prefix caching.** Requests that share a system prompt reuse its full blocks; a small
#    pool evicts them, so the hit rate depends on the pool size.

# %%
import random
import sys
from pathlib import Path

import matplotlib.pyplot as plt

sys.path.insert(0, str(Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()))
from reference.paged_kv import PagedKVCacheAllocator, num_blocks_for

rng = random.Random(0)

# %% [markdown]
# ## 1. Contiguous reservation versus blocks
#
# A server with room for 8192 tokens of KV cache serves requests with prompts of 20-400
# tokens and outputs of 10-300 tokens, capped at 1024 tokens in all. A contiguous allocator
# must reserve the cap for every request up front (it does not know the output length); a
# paged allocator takes a 16-token block whenever the last one is full. Both admit waiting
# requests in order while there is room. The paged server preempts (frees and requeues) the
# newest request when a running one needs a block and none is free: vLLM's recompute policy.

# %%
CAPACITY_TOKENS, MAX_LEN, BLOCK_SIZE, NUM_STEPS = 8192, 1024, 16, 600


def make_requests(n):
    return [(rng.randint(20, 400), rng.randint(10, 300)) for _ in range(n)]


def simulate_contiguous(requests):
    waiting, running, used, served = list(range(len(requests))), {}, [], 0
    for _ in range(NUM_STEPS):
        while waiting and (len(running) + 1) * MAX_LEN <= CAPACITY_TOKENS:
            rid = waiting.pop(0)
            running[rid] = requests[rid][0]
        for rid in list(running):
            running[rid] += 1
            served += 1
            if running[rid] >= sum(requests[rid]):
                del running[rid]
        used.append(sum(running.values()) / CAPACITY_TOKENS)
    return used, served


def simulate_paged(requests):
    alloc = PagedKVCacheAllocator(CAPACITY_TOKENS // BLOCK_SIZE, BLOCK_SIZE)
    waiting, running, used, served = list(range(len(requests))), [], [], 0
    for _ in range(NUM_STEPS):
        while waiting and alloc.allocate(str(waiting[0]), requests[waiting[0]][0]):
            running.append(waiting.pop(0))
        for rid in list(running):
            if rid not in running:
                continue  # preempted this step
            while not alloc.allocate(str(rid), 1):
                victim = running.pop()  # newest first
                alloc.free(str(victim))
                waiting.insert(0, victim)
                if victim == rid:
                    break
            else:
                served += 1
                if alloc.num_tokens(str(rid)) >= sum(requests[rid]):
                    alloc.free(str(rid))
                    running.remove(rid)
        stored = sum(alloc.num_tokens(str(r)) for r in running)
        used.append(stored / CAPACITY_TOKENS)
    return used, served


workload = make_requests(400)
contiguous_used, contiguous_served = simulate_contiguous(workload)
paged_used, paged_served = simulate_paged(workload)
print(f"tokens generated in {NUM_STEPS} steps: contiguous {contiguous_served}, paged {paged_served}")

# %%
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.plot(contiguous_used, label="contiguous reservation of max_len")
ax.plot(paged_used, label=f"paged, block_size={BLOCK_SIZE}")
ax.set_xlabel("decode step")
ax.set_ylabel("fraction of KV memory holding tokens")
ax.set_ylim(0, 1.05)
ax.legend()
ax.set_title("Reserved is not used: paging keeps the cache full of real tokens")
plt.show()

# %% [markdown]
# The paged cache wastes at most `block_size - 1` slots per request (its last block); the
# contiguous one wastes everything between the tokens a request has and the cap it reserved.
# The price is indirection: the attention kernel reads keys through the block table.
#
# How the waste of the paged cache depends on the block size, for the same workload:

# %%
sizes = [1, 2, 4, 8, 16, 32, 64, 128]
lengths = [p + o for p, o in workload]
waste = [sum(num_blocks_for(n, bs) * bs - n for n in lengths) / sum(lengths) for bs in sizes]
fig, ax = plt.subplots(figsize=(6, 3))
ax.semilogx(sizes, waste, "o-", base=2)
ax.set_xlabel("block_size (tokens)")
ax.set_ylabel("slots wasted / tokens stored")
ax.set_title("Internal fragmentation grows with the block size")
plt.show()

# %% [markdown]
# ## 2. Fork and copy-on-write
#
# Parallel sampling (`n` completions of one prompt) forks the prompt's request. The samples
# share every block; when a sample writes its first new token, only the partly filled last
# block is copied.

# %%
alloc = PagedKVCacheAllocator(num_blocks=8, block_size=4)
alloc.allocate("prompt", 10)  # 2 full blocks + 2 tokens in a third
alloc.fork("prompt", "sample-1")
print("tables after fork:", alloc.block_table("prompt"), alloc.block_table("sample-1"),
      "free:", alloc.num_free_blocks)
alloc.allocate("sample-1", 1)  # writes into the shared, partly filled block: copy it first
print("after sample-1 writes:", alloc.block_table("prompt"), alloc.block_table("sample-1"))
print("copies for the model to run:", alloc.pop_copies())

# %% [markdown]
# Blocks needed for `n` samples of a 500-token prompt, each generating 200 tokens, with and
# without sharing the prompt:

# %%
def blocks_for_samples(n, share, prompt=500, output=200, block_size=16):
    alloc = PagedKVCacheAllocator(num_blocks=10_000, block_size=block_size)
    alloc.allocate("s0", prompt)
    for i in range(1, n):
        if share:
            alloc.fork("s0", f"s{i}")
        else:
            alloc.allocate(f"s{i}", prompt)
    for i in range(n):
        alloc.allocate(f"s{i}", output)
    return alloc.num_blocks - alloc.num_free_blocks


ns = [1, 2, 4, 8, 16]
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(ns, [blocks_for_samples(n, share=False) for n in ns], "o-", label="each sample its own prompt")
ax.plot(ns, [blocks_for_samples(n, share=True) for n in ns], "o-", label="fork + copy-on-write")
ax.set_xlabel("samples per prompt")
ax.set_ylabel("blocks in use")
ax.legend()
ax.set_title("Forks pay for the prompt once")
plt.show()

# %% [markdown]
# ## 3. Prefix caching
#
# Chat requests start with the same 200-token system prompt, then a user message. Full blocks
# are hashed with their whole prefix, `hash((parent hash, tokens))`, so the system prompt's
# blocks hit for every request; the user message's blocks almost never do. After a request
# ends its blocks stay cached (and count as free) until a fresh block evicts them: the one
# freed longest ago first, and a request's later blocks before its earlier ones, so the shared
# system prompt survives longest.

# %%
SYSTEM = [rng.randrange(32_000) for _ in range(200)]


def hit_rate(num_blocks, num_requests=300, block_size=16, concurrent=4):
    alloc = PagedKVCacheAllocator(num_blocks, block_size)
    served = total = 0
    live = []
    for i in range(num_requests):
        prompt = SYSTEM + [rng.randrange(32_000) for _ in range(rng.randint(20, 300))]
        while True:
            hits = alloc.allocate_prompt(f"r{i}", prompt)
            if hits is not None or not live:
                break
            alloc.free(live.pop(0))  # no room: finish the oldest request
        if hits is None:
            continue
        served, total = served + hits, total + len(prompt)
        live.append(f"r{i}")
        if len(live) > concurrent:
            alloc.free(live.pop(0))
    return served / total


pools = [24, 32, 48, 64, 96, 128, 256]
rates = [hit_rate(n) for n in pools]
print({n: round(r, 3) for n, r in zip(pools, rates)})
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(pools, rates, "o-")
ax.axhline(192 / (200 + 160), ls="--", c="gray", label="192 cacheable tokens / average prompt")
ax.set_xlabel("num_blocks in the pool")
ax.set_ylabel("prompt tokens served from cache")
ax.legend()
ax.set_title("Prefix cache hit rate against pool size")
plt.show()

# %% [markdown]
# Every request reuses the system prompt's 12 full blocks (192 tokens: the last 8
# system-prompt tokens share a block with the user message, which differs from request to
# request), so the hit rate sits at 192 / (average prompt length) for every pool that holds
# the live requests: the system prompt's blocks are always held by a live request or wait at
# the back of the eviction queue. (The smallest pool turns long prompts away, which is why
# its ratio is higher: only short prompts are counted.)
#
# Things to try: make the user messages share a prefix too (few-shot examples); set
# `concurrent=1`; change `block_size` and watch the hit granularity.
