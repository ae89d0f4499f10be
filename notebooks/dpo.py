# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # DPO: sequence log-probs, the Bradley–Terry loss and DPO's variants
#
# A walkthrough of `reference/dpo.py`: the three DPO losses as functions of the log-ratio gap,
# why the log-softmax must be taken in float32 and after subtracting the max, and a toy
# preference-training run that shows the implicit rewards TRL logs. Everything graded is
# imported from the reference; this notebook only plots it.

# %%
import matplotlib.pyplot as plt  # figures show inline in a notebook; run headless with MPLBACKEND=Agg
import torch

from reference.dpo import bradley_terry_loss, dpo_loss, sequence_logprobs

torch.manual_seed(0)

# %% [markdown]
# ## 1. Three losses on the same log-ratio gap
#
# `logits = (log pi(chosen) - log pi(rejected)) - (log ref(chosen) - log ref(rejected))`: how
# much more the policy prefers the chosen answer than the reference did. The sigmoid (DPO)
# loss keeps pushing the gap up, ever more gently; label smoothing turns it into a
# cross-entropy against a soft target, with a finite optimum; IPO regresses the gap onto
# `1 / (2 beta)`; the hinge (SLiC) stops pushing once `beta * logits` reaches 1.

# %%
beta = 0.5
gaps = torch.linspace(-6, 10, 321)
zeros = torch.zeros_like(gaps)
curves = {
    "sigmoid (DPO)": dict(loss_type="sigmoid"),
    "sigmoid, label_smoothing=0.2 (cDPO)": dict(loss_type="sigmoid", label_smoothing=0.2),
    "ipo": dict(loss_type="ipo"),
    "hinge": dict(loss_type="hinge"),
}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for label, options in curves.items():
    per_pair, grads = [], []
    for g in gaps:   # one pair at a time: the per-pair loss and its gradient
        policy_chosen = g.reshape(1).clone().requires_grad_(True)
        loss, _ = dpo_loss(policy_chosen, torch.zeros(1), torch.zeros(1), torch.zeros(1),
                           beta=beta, **options)
        loss.backward()
        per_pair.append(loss.item())
        grads.append(policy_chosen.grad.item())
    axes[0].plot(gaps, per_pair, label=label)
    axes[1].plot(gaps, grads, label=label)
axes[0].set_ylim(-0.2, 6)
axes[0].axvline(1 / (2 * beta), color="grey", ls=":", lw=1)
axes[0].set_title(f"loss per pair (beta = {beta}); dotted: IPO target 1/(2 beta)")
axes[1].set_title("d loss / d log pi(chosen)")
for ax in axes:
    ax.set_xlabel("log-ratio gap (logits)")
    ax.legend(fontsize=7)
fig.tight_layout()

# %% [markdown]
# ## 2. Numerics: subtract the max, and upcast
#
# A sequence log-prob sums hundreds of token log-probs, and real logits can be large.
# `log(softmax(x))` underflows to `-inf` as soon as one logit leads the others by a few
# hundred; `log_softmax` subtracts the row max first. And taking the log-softmax in the
# logits' own float16/bfloat16 loses digits that the sum over a long answer accumulates:
# the reference upcasts to float32 first.

# %%
V, T = 32, 257
gen = torch.Generator().manual_seed(1)
labels = torch.randint(0, V, (1, T), generator=gen)
mask = torch.ones(1, T, dtype=torch.bool)
scales = [1, 10, 30, 100, 300, 1000, 3000, 10000]
naive, stable = [], []
for s in scales:
    logits = torch.randn(1, T, V, generator=gen) * s
    naive.append(logits[:, :-1].softmax(-1).log().gather(-1, labels[:, 1:, None]).sum().item())
    stable.append(sequence_logprobs(logits, labels, mask).item())
lengths = [16, 32, 64, 128, 256]
errors = {torch.float16: [], torch.bfloat16: []}
base = torch.randn(1, max(lengths) + 1, V, generator=gen) * 4
for dtype in errors:
    for n in lengths:
        x = base[:, : n + 1].to(dtype)
        exact = sequence_logprobs(x.double(), labels[:, : n + 1], mask[:, : n + 1])
        in_dtype = x[:, :-1].log_softmax(-1).gather(-1, labels[:, 1 : n + 1, None]).float().sum()
        errors[dtype].append((in_dtype.double() - exact).abs().item())
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
axes[0].semilogx(scales, [-v if v != float("-inf") else float("nan") for v in stable], "o-",
                 label="log_softmax (reference)")
finite = [(s, -v) for s, v in zip(scales, naive) if v != float("-inf")]
axes[0].semilogx(*zip(*finite), "x--", label="log(softmax): -inf beyond")
axes[0].set_xlabel("logit scale")
axes[0].set_ylabel("-log p(sequence)")
axes[0].set_title(f"sequence NLL, {T - 1} tokens")
axes[0].legend(fontsize=8)
for dtype, errs in errors.items():
    axes[1].loglog(lengths, errs, "o-", label=f"log-softmax in {str(dtype)[6:]}")
axes[1].set_xlabel("scored tokens")
axes[1].set_ylabel("|error| of the sequence log-prob")
axes[1].set_title("why the math runs in float32")
axes[1].legend(fontsize=8)
fig.tight_layout()
print("log(softmax) results:", [round(v, 1) for v in naive])

# %% [markdown]
# ## 3. A toy DPO run and the implicit rewards
#
# The "model" scores 4 one-token answers with shared parameters: `logits = E @ theta`, with a
# 2-d feature row per answer. The chosen and the rejected answer share most of their
# features; answer 2 (in no pair) is aligned with the direction that separates them. The
# reference is the initial model. We train with DPO on the single pair (answer 0 over answer
# 1) and log what TRL logs. The loss only sees the *difference* of the implicit rewards, so
# the gap grows while the chosen answer's own log-prob falls: the mass moves to answer 2.
# This is the "both rewards go down" pattern of real runs (likelihood displacement).

# %%
E = torch.tensor([[1.0, 0.5], [1.0, -0.5], [0.0, 3.0], [-1.0, 0.0]])   # (V, 2) answer features
theta = torch.tensor([1.0, 0.0], requires_grad=True)
chosen = torch.tensor([[0, 0]])       # position 0 is the prompt; position 1 the answer
rejected = torch.tensor([[0, 1]])
answer = torch.tensor([[0, 1]])       # loss_mask: only the answer is scored


def model_logits(params):
    """(1, 2, V): the logits at the prompt position score the answer; position 1 is unused."""
    row = E @ params
    return torch.stack([row, torch.zeros_like(row)])[None]


with torch.no_grad():
    ref_c = sequence_logprobs(model_logits(theta), chosen, answer)
    ref_r = sequence_logprobs(model_logits(theta), rejected, answer)
opt = torch.optim.SGD([theta], lr=1.0)
history = {"loss": [], "chosen_rewards": [], "rejected_rewards": [], "p(answer 2)": []}
for _ in range(80):
    logits = model_logits(theta)
    loss, stats = dpo_loss(sequence_logprobs(logits, chosen, answer),
                           sequence_logprobs(logits, rejected, answer), ref_c, ref_r, beta=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    history["loss"].append(loss.item())
    history["chosen_rewards"].append(stats["chosen_rewards"].item())
    history["rejected_rewards"].append(stats["rejected_rewards"].item())
    history["p(answer 2)"].append(logits[0, 0].detach().softmax(-1)[2].item())
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
axes[0].plot(history["loss"])
axes[0].set_title("DPO loss")
axes[1].plot(history["chosen_rewards"], label="chosen_rewards")
axes[1].plot(history["rejected_rewards"], label="rejected_rewards")
axes[1].axhline(0, color="grey", lw=0.5)
axes[1].set_title("implicit rewards beta log(pi / ref)")
axes[1].legend(fontsize=8)
axes[2].plot(history["p(answer 2)"])
axes[2].set_title("p(answer 2), in no pair")
for ax in axes:
    ax.set_xlabel("step")
fig.tight_layout()
print(f"final chosen_rewards {history['chosen_rewards'][-1]:.3f}, "
      f"rejected_rewards {history['rejected_rewards'][-1]:.3f}")

# %% [markdown]
# ## 4. The reward model's Bradley–Terry loss and its margin
#
# A reward model is trained on the same pairs with `-logsigmoid(r_chosen - r_rejected - m)`.
# A margin (Llama 2 uses one per annotation strength) asks for a larger reward gap before the
# loss lets go; the accuracy is still measured on the raw gap.

# %%
gaps = torch.linspace(-4, 6, 201)
fig, ax = plt.subplots(figsize=(5.5, 3.4))
for m in (0.0, 1.0, 3.0):
    losses = [bradley_terry_loss(g.reshape(1), torch.zeros(1), margin=m)[0].item() for g in gaps]
    ax.plot(gaps, losses, label=f"margin {m}")
ax.set_xlabel("r_chosen - r_rejected")
ax.set_ylabel("loss")
ax.set_title("Bradley–Terry loss")
ax.legend(fontsize=8)
fig.tight_layout()
