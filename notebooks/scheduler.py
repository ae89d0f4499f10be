# %% [markdown]
# # Continuous batching: chunked prefill, preemption and aging
#
# This walkthrough drives the reference scheduler (`reference/scheduler.py`) on synthetic
# workloads. It never re-implements the scheduling rules: it only adds requests, calls
# `step()` and records the batches.
#
# 1. A Gantt-style view of a small trace: prefill chunks, decodes, preemptions.
# 2. Time to first token and inter-token latency for chunk budgets 64 / 256 / 2048.
# 3. Starvation of low-priority requests with and without aging.

# %%
import random

import matplotlib

matplotlib.use("Agg")  # headless; a notebook front end may override this
import matplotlib.pyplot as plt

from reference.scheduler import Request, Scheduler

# %% [markdown]
# ## 1. A small trace
#
# Six requests with mixed priorities on a tight KV pool, so that a preemption happens.
# Each row is a request, each column a step: a wide bar is a prefill chunk (its width in
# tokens is written on it), a dot a decode, a red cross a preemption.

# %%
def record(sched, arrivals, max_steps=200):
    """Step `sched`, adding arrivals[step] (a list of Requests) before each step; return
    the list of Batches."""
    batches = []
    for step in range(max_steps):
        for req in arrivals.get(step, []):
            sched.add_request(req)
        if not sched.has_unfinished() and step > max(arrivals, default=0):
            break
        batches.append(sched.step())
    return batches


small = Scheduler(max_num_batched_tokens=6, max_num_seqs=3, num_blocks=6, block_size=2)
trace = record(small, {
    0: [Request("a", 7, 3, priority=2, arrival_time=0), Request("b", 3, 4, priority=1, arrival_time=0)],
    2: [Request("c", 5, 2, priority=0, arrival_time=2)],
    4: [Request("d", 2, 2, priority=1, arrival_time=4), Request("e", 4, 1, priority=3, arrival_time=4)],
    6: [Request("f", 3, 2, priority=0, arrival_time=6)],
})
names = sorted({rid for b in trace for rid in [*b.prefill, *b.decode, *b.preempted]})
row = {rid: i for i, rid in enumerate(names)}

fig, ax = plt.subplots(figsize=(9, 3.2))
for step, b in enumerate(trace, start=1):
    for rid, chunk in b.prefill.items():
        ax.barh(row[rid], 0.8, left=step - 0.4, color="tab:blue", alpha=0.6)
        ax.text(step, row[rid], str(chunk), ha="center", va="center", fontsize=8)
    for rid in b.decode:
        ax.plot(step, row[rid], "o", color="tab:green")
    for rid in b.preempted:
        ax.plot(step, row[rid], "x", color="tab:red", markersize=10, mew=2)
ax.set_yticks(range(len(names)), names)
ax.set_xlabel("step")
ax.set_title("prefill chunks (tokens), decodes (dots), preemptions (crosses)")
plt.tight_layout()
plt.show()
print(f"{len(trace)} steps; preempted: {[p for b in trace for p in b.preempted]}")

# %% [markdown]
# ## 2. Chunk size: time to first token vs inter-token latency
#
# One synthetic workload (long-tailed prompt lengths, Poisson arrivals) under three token
# budgets. A step's duration is modelled as a fixed overhead plus a cost per token, so a
# large chunk makes every decode that shares its step wait longer.
#
# Small chunks keep inter-token latency low (decodes never wait for a long prompt) but
# spread a prompt over many steps, so time to first token grows; large chunks do the reverse.

# %%
STEP_OVERHEAD_MS, MS_PER_TOKEN = 8.0, 0.03


def workload(num_requests=120, seed=0):
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(num_requests):
        t += rng.expovariate(1 / 40.0)  # ms between arrivals
        prompt = min(int(rng.lognormvariate(5.5, 0.8)), 3000) + 1
        reqs.append(Request(f"r{i}", prompt, rng.randint(16, 96), arrival_time=t))
    return reqs


def simulate(budget, reqs):
    """Return (ttft_ms, itl_ms) lists for one run."""
    sched = Scheduler(max_num_batched_tokens=budget, max_num_seqs=32, num_blocks=20_000,
                      block_size=16)
    pending, clock, last_token, ttft, itl = list(reqs), 0.0, {}, [], []
    arrival = {r.request_id: r.arrival_time for r in reqs}
    while pending or sched.has_unfinished():
        while pending and pending[0].arrival_time <= clock:
            sched.add_request(pending.pop(0))
        if not sched.has_unfinished():
            clock = pending[0].arrival_time
            continue
        batch = sched.step()
        tokens = sum(batch.prefill.values()) + len(batch.decode)
        clock += STEP_OVERHEAD_MS + MS_PER_TOKEN * tokens
        for rid in batch.decode:
            if rid in last_token:
                itl.append(clock - last_token[rid])
            else:
                ttft.append(clock - arrival[rid])
            last_token[rid] = clock
    return ttft, itl


reqs = workload()
results = {budget: simulate(budget, reqs) for budget in (64, 256, 2048)}

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for budget, (ttft, itl) in results.items():
    axes[0].hist(ttft, bins=30, histtype="step", label=f"budget {budget}")
    axes[1].hist(itl, bins=30, histtype="step", label=f"budget {budget}")
axes[0].set_xlabel("time to first token (ms)")
axes[1].set_xlabel("inter-token latency (ms)")
axes[1].set_yscale("log")
for ax in axes:
    ax.legend()
plt.tight_layout()
plt.show()
for budget, (ttft, itl) in results.items():
    ttft_sorted, itl_sorted = sorted(ttft), sorted(itl)
    print(f"budget {budget:5d}: median TTFT {ttft_sorted[len(ttft) // 2]:8.1f} ms, "
          f"p99 ITL {itl_sorted[int(0.99 * len(itl))]:6.1f} ms")

# %% [markdown]
# ## 3. Starvation and aging
#
# One seat, and a new priority-0 request every step; a few priority-3 requests arrived first.
# Without aging they wait forever. With `aging_steps=4` their effective priority drops by one
# every 4 waiting steps, so each eventually overtakes the newest urgent arrivals.

# %%
def low_priority_waits(aging_steps, horizon=300):
    sched = Scheduler(max_num_batched_tokens=4, max_num_seqs=1, num_blocks=64, block_size=4,
                      aging_steps=aging_steps)
    for i in range(3):
        sched.add_request(Request(f"low{i}", 1, 1, priority=3, arrival_time=0.0))
    started = {}
    for step in range(1, horizon + 1):
        sched.add_request(Request(f"u{step}", 1, 1, priority=0, arrival_time=float(step)))
        for rid in sched.step().prefill:
            if rid.startswith("low"):
                started[rid] = step
    return [started.get(f"low{i}") for i in range(3)]


fig, ax = plt.subplots(figsize=(6, 3))
for k, aging in enumerate((None, 4)):
    waits = low_priority_waits(aging)
    shown = [w if w is not None else 300 for w in waits]
    ax.bar([k * 4 + i for i in range(3)], shown, color="tab:gray" if aging is None else "tab:orange",
           label=f"aging_steps={aging}")
    print(f"aging_steps={aging}: low-priority requests admitted at steps {waits} (None = starved)")
ax.set_ylabel("steps until admitted (300 = never)")
ax.set_xticks([1, 5], ["no aging", "aging_steps=4"])
ax.legend()
plt.tight_layout()
plt.show()
