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
# # Sampling, beam search and speculative decoding
#
# A walkthrough of the `sampling` kata with the reference implementation
# (`reference/sampling.py`): what the nucleus looks like on a realistic distribution, the
# tree beam search actually explores, and how much speculative decoding gains as the draft
# model gets better.

# %%
import matplotlib.pyplot as plt
import torch

from reference.sampling import beam_search, speculative_verify, top_k_top_p_filter

torch.manual_seed(0)

# %% [markdown]
# ## 1. The nucleus at several p
#
# Real next-token distributions are close to Zipfian: a few likely tokens and a long tail.
# Top-p keeps the smallest prefix of the sorted tokens whose mass reaches p, so the number of
# kept tokens adapts to how peaked the distribution is; top-k would keep a fixed count.

# %%
vocab_size = 40
ranks = torch.arange(1, vocab_size + 1, dtype=torch.float32)
logits = (-1.1 * ranks.log() + 0.3 * torch.randn(vocab_size))[None, :]  # (1, V), Zipf-like
probs = logits.softmax(-1)[0]
order = probs.argsort(descending=True)

fig, axes = plt.subplots(1, 3, figsize=(13, 3.2), sharey=True)
for ax, top_p in zip(axes, (0.5, 0.8, 0.95)):
    kept = (top_k_top_p_filter(logits, top_p=top_p)[0] != float("-inf"))[order]
    colors = ["tab:blue" if k else "lightgray" for k in kept.tolist()]
    ax.bar(range(vocab_size), probs[order].tolist(), color=colors)
    ax.set_title(f"top_p = {top_p}: {int(kept.sum())} tokens kept")
    ax.set_xlabel("tokens, most probable first")
axes[0].set_ylabel("probability")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. The tree beam search explores
#
# A tiny model over 4 tokens (token 0 is EOS) whose next-token distribution depends on the
# whole prefix. We wrap `step_fn` to record every prefix beam search asks about, then draw
# them as a tree: every node is a sequence that was a live beam at some step.

# %%
def tiny_model(vocab: int = 4, seed: int = 3):
    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def log_probs(seq: tuple[int, ...]) -> torch.Tensor:
        if seq not in cache:
            gen = torch.Generator().manual_seed(hash((seed,) + seq) & 0x7FFFFFFF)
            cache[seq] = (torch.randn(vocab, generator=gen, dtype=torch.float64) * 1.5).log_softmax(-1)
        return cache[seq]

    visited: list[tuple[int, ...]] = []

    def step_fn(tokens: torch.Tensor) -> torch.Tensor:  # (N, T) -> (N, V)
        rows = [tuple(r) for r in tokens.tolist()]
        visited.extend(rows)
        return torch.stack([log_probs(r) for r in rows])

    return step_fn, visited


step_fn, visited = tiny_model()
hypotheses = beam_search(step_fn, prompt=[], num_beams=3, max_new_tokens=4, eos_token_id=0,
                         length_penalty=1.0)
for tokens, score in hypotheses:
    print(f"{tokens}  score {score:.3f}")

# %%
finished = {tuple(t) for t, _ in hypotheses}
nodes = sorted(set(visited) | finished, key=lambda s: (len(s), s))
position: dict[tuple[int, ...], tuple[float, float]] = {}
for depth in range(max(len(n) for n in nodes) + 1):
    layer = [n for n in nodes if len(n) == depth]
    for i, node in enumerate(layer):
        position[node] = (depth, i - (len(layer) - 1) / 2)

fig, ax = plt.subplots(figsize=(8, 4))
for node, (x, y) in position.items():
    if node:
        px, py = position[node[:-1]]
        ax.plot([px, x], [py, y], color="gray", lw=1)
    color = "tab:green" if node in finished else "tab:blue"
    ax.scatter([x], [y], color=color, zorder=3)
    ax.annotate("EOS" if node and node[-1] == 0 else (str(node[-1]) if node else "prompt"),
                (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
ax.set_xlabel("generated tokens")
ax.set_yticks([])
ax.set_title("beam search, 3 beams: explored prefixes (blue), returned hypotheses (green)")
plt.show()

# %% [markdown]
# ## 3. Speculative decoding: tokens per target pass
#
# With draft distribution q and target p at every position, each draft token is accepted
# with probability a = sum(min(p, q)) = 1 - TV(p, q). A target pass over K drafted tokens
# then emits 1 + a + a^2 + ... + a^K = (1 - a^(K+1)) / (1 - a) tokens on average (the bonus
# token included). We interpolate the draft from uniform (poor) to the target itself
# (perfect) and compare the closed form with `speculative_verify`.

# %%
num_draft, vocab, calls = 4, 8, 400
gen = torch.Generator().manual_seed(0)
target = (torch.randn(vocab, generator=gen) * 1.5).softmax(-1)
uniform = torch.full((vocab,), 1.0 / vocab)

rates, simulated, closed_form = [], [], []
for quality in torch.linspace(0, 1, 11).tolist():
    draft = (1 - quality) * uniform + quality * target  # (V,)
    a = float(torch.minimum(draft, target).sum())
    draft_probs = draft.expand(num_draft, vocab)
    target_probs = target.expand(num_draft + 1, vocab)
    emitted = 0
    for _ in range(calls):
        draft_tokens = torch.multinomial(draft_probs, 1, generator=gen).squeeze(-1)  # (K,)
        emitted += len(speculative_verify(draft_tokens, draft_probs, target_probs, gen))
    rates.append(a)
    simulated.append(emitted / calls)
    closed_form.append(num_draft + 1.0 if a >= 1 else (1 - a ** (num_draft + 1)) / (1 - a))

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(rates, closed_form, label="(1 - a^(K+1)) / (1 - a)")
ax.scatter(rates, simulated, color="tab:orange", label=f"simulation, {calls} passes each")
ax.set_xlabel("acceptance rate a = sum(min(p, q))")
ax.set_ylabel(f"tokens per target pass (K = {num_draft})")
ax.legend()
plt.show()

# %% [markdown]
# The simulation sits on the curve: the gain is modest until the draft agrees with the target
# most of the time, then climbs steeply towards K + 1. In practice the cost of running the
# draft K times sets the best K for a given acceptance rate.
