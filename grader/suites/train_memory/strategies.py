"""Models, batches, the oracle and the checks shared by the train-memory suite's levels.

The oracle of `finetune` is `finetune_leaky` itself (the kata's support file), run here on a
model built from the same seed: the updates are float64 and deterministic, so a correct
solution's weights agree with it to 1e-9 whatever order it sums in.

Memory is the `peak_bytes` measurement (grader/worker/measure.py): the most bytes of tensor
storages created during the call that were alive at once, exact and independent of the
machine's load. Each rule compares two calls of the candidate's own code that differ in one
size (steps, batch, layers), so what a solution holds for every step (its gradients and
optimizer state) cancels out.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

# The judge's tensors are tiny: one thread computes them fastest.
torch.set_num_threads(1)

import reference.train_memory as reference  # noqa: E402  (also registers train_memory_model outside the grader)
from grader.protocol import PropertyFailure, call, expect, show  # noqa: E402  (after set_num_threads)
from train_memory_model import IGNORE_INDEX, TinyLM, finetune_leaky  # noqa: E402  (registered by the reference)

VOCAB = 32
D_MODEL = 16
NUM_HEADS = 2
MAX_SEQ_LEN = 16
ATOL, RTOL = 1e-9, 1e-7
LRS = (1e-2, 3e-3)
FLOPS_BUDGET = 1.4          # checkpointed step against the un-checkpointed reference's
BYTES_PER_TOKEN_SLACK = 16  # level 2: per-token tensors of the whole batch (a mask) are fine
STATE_BYTES_PER_PARAM = 40  # level 3: gradient, AdamW's m and v, optimizer temporaries (5 x 8)


def fresh_model(seed: int, *, num_layers: int = 2, frozen: tuple[str, ...] = ()) -> TinyLM:
    """A new TinyLM (never shared between calls). Parameters whose name starts with one of
    `frozen` get requires_grad=False."""
    model = TinyLM(VOCAB, D_MODEL, NUM_HEADS, num_layers, MAX_SEQ_LEN, seed=seed)
    for name, p in model.named_parameters():
        if name.startswith(frozen):
            p.requires_grad_(False)
    # How a failure's snippet rebuilds it (grader/engine/transcript.py): the same weights.
    rebuild = f"{TinyLM.__module__}.TinyLM({VOCAB}, {D_MODEL}, {NUM_HEADS}, {num_layers}, {MAX_SEQ_LEN}, seed={seed})"
    model._kata_rebuild = rebuild  # type: ignore[assignment]  # (nn.Module types its attributes as tensors)
    return model


def model_text(seed: int, num_layers: int = 2, frozen: tuple[str, ...] = ()) -> str:
    text = f"TinyLM(vocab_size={VOCAB}, d_model={D_MODEL}, num_heads={NUM_HEADS}, num_layers={num_layers}, " \
           f"max_seq_len={MAX_SEQ_LEN}, seed={seed})"
    return text + (f" with {', '.join(frozen)}* frozen" if frozen else "")


def make_batch(seed: int, valid_counts: list[int], T: int, *, prompt: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of len(valid_counts) sequences of length T: sequence b has
    valid_counts[b] + 1 real tokens (0 valid labels: nothing but padding), right-padded;
    labels are the next tokens, -100 on padding, on the last real token and on the first
    `prompt` positions."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (len(valid_counts), T), generator=gen)
    labels = torch.full((len(valid_counts), T), IGNORE_INDEX, dtype=torch.int64)
    for b, n in enumerate(valid_counts):
        n = min(n, T - 1)
        labels[b, :n] = ids[b, 1:n + 1]
        labels[b, :prompt] = IGNORE_INDEX
        ids[b, n + 1:] = 0   # padding token
    return ids, labels


@st.composite
def workloads(draw: Any, *, max_batch: int = 4, max_steps: int = 4, micro: bool = False) -> dict[str, Any]:
    """A model seed, 1-3 batches (sequences of one length T per batch, valid labels per
    sequence from 0 to T - 1, at least one per batch), steps, lr; with `micro`, a
    micro_batch_size from 1 to the batch size + 1."""
    num_batches = draw(st.integers(1, 3))
    batches = []
    for _ in range(num_batches):
        B = draw(st.integers(1, max_batch))
        T = draw(st.integers(2, 8))
        counts = draw(st.lists(st.integers(0, T - 1), min_size=B, max_size=B))
        if not any(counts[: 1 + B]):
            counts[0] = T - 1
        batches.append({"seed": draw(st.integers(0, 2**16)), "valid_counts": counts, "T": T,
                        "prompt": draw(st.sampled_from([0, 0, 1]))})
        if sum(min(n, T - 1) > batches[-1]["prompt"] for n in counts) == 0:
            batches[-1]["prompt"] = 0
    work = {"model_seed": draw(st.integers(0, 31)), "batches": batches,
            "steps": draw(st.integers(1, max_steps)), "lr": draw(st.sampled_from(LRS))}
    if micro:
        work["micro_batch_size"] = draw(st.integers(1, max(b["valid_counts"].__len__() for b in batches) + 1))
    return work


def build_batches(work: dict[str, Any]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [make_batch(b["seed"], b["valid_counts"], b["T"], prompt=b["prompt"]) for b in work["batches"]]


def shown(work: dict[str, Any], **extra: Any) -> str:
    """The call, readably: the model, each batch's shape and valid labels per sequence."""
    batches = build_batches(work)
    parts = [f"batch {i}: input_ids {tuple(ids.shape)}, valid labels per sequence "
             f"{(labels != IGNORE_INDEX).sum(dim=1).tolist()}" for i, (ids, labels) in enumerate(batches)]
    options = "".join(f", {k}={v!r}" for k, v in work.items() if k in ("micro_batch_size", "checkpoint"))
    text = (f"finetune({model_text(work['model_seed'], work.get('num_layers', 2), work.get('frozen', ()))}, "
            f"batches, lr={work['lr']}, steps={work['steps']}{options}); " + "; ".join(parts))
    return text + "".join(f"; {k}={v}" for k, v in extra.items())


def leaky_result(work: dict[str, Any]) -> tuple[list[float], dict[str, torch.Tensor]]:
    """finetune_leaky's losses and final weights on the workload."""
    model = fresh_model(work["model_seed"], num_layers=work.get("num_layers", 2), frozen=work.get("frozen", ()))
    losses = finetune_leaky(model, build_batches(work), lr=work["lr"], steps=work["steps"])
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}


def run_finetune(solution: Any, work: dict[str, Any], model: TinyLM | None = None) -> tuple[Any, TinyLM]:
    """The candidate's finetune on a fresh model (or `model`) and fresh copies of the batches."""
    if model is None:
        model = fresh_model(work["model_seed"], num_layers=work.get("num_layers", 2), frozen=work.get("frozen", ()))
    options = {k: work[k] for k in ("micro_batch_size", "checkpoint") if k in work}
    got = call(solution.finetune, model, build_batches(work), lr=work["lr"], steps=work["steps"],
               what="finetune", **options)
    return got, model


def check_losses(got: Any, want: list[float], prop: str, input: str) -> None:
    if not isinstance(got, list) or not all(type(x) is float for x in got):
        kinds = sorted({type(x).__name__ for x in got}) if isinstance(got, (list, tuple)) else []
        raise PropertyFailure(prop + " (a list of Python floats, one per step: loss.item())", input=input,
                              expected=f"list of {len(want)} float", got=f"{type(got).__name__} of {kinds}: {show(got)}")
    expect(len(got) == len(want), prop + " (one loss per step)", input=input, expected=want, got=got)
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if not abs(g - w) <= ATOL + RTOL * abs(w)]
    expect(not bad, prop, input=input, expected=want, got=got,
           note=f"step {bad[0]} differs" if bad else None)


def check_weights(model: TinyLM, want: dict[str, torch.Tensor], prop: str, input: str) -> None:
    for name, p in model.named_parameters():
        w = want[name]
        ok = p.dtype == w.dtype and p.shape == w.shape and torch.allclose(p.detach(), w, atol=ATOL, rtol=RTOL)
        if not ok:
            diff = (p.detach().double() - w).abs().max().item() if p.shape == w.shape else float("nan")
            raise PropertyFailure(prop, input=input, expected=f"{name}: finetune_leaky's values ({w.dtype})",
                                  got=f"{name}: max abs difference {diff:.3g} ({p.dtype})",
                                  note=f"tolerance atol={ATOL:g}, rtol={RTOL:g}")


def check_against_leaky(solution: Any, work: dict[str, Any], prop: str) -> None:
    """finetune's losses and final weights are finetune_leaky's."""
    want_losses, want_weights = leaky_result(work)
    got, model = run_finetune(solution, work)
    check_losses(got, want_losses, prop + ": the losses of every step", shown(work))
    check_weights(model, want_weights, prop + ": the weights after the last step", shown(work))


def layer_params(model: TinyLM) -> int:
    return sum(p.numel() for p in model.blocks[0].parameters())


__all__ = ["reference", "IGNORE_INDEX", "TinyLM", "finetune_leaky"]
