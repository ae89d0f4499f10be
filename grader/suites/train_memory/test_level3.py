"""Level 3 — recompute: with checkpoint=True each transformer block runs under
torch.utils.checkpoint (non-reentrant): the same updates, each extra layer adds at most one
(M, T, C) tensor of activations to the peak (beyond its own training state), and the FLOPs
stay within 1.4x the un-checkpointed step's.

Each rule of the statement for this level maps to the test that builds the situation where
that rule decides the outcome.
"""

from __future__ import annotations

from hypothesis import given, settings

from grader.protocol import expect, kata_test
from grader.suites._measure import count_flops, peak_bytes
from grader.suites.train_memory.strategies import (D_MODEL, FLOPS_BUDGET, STATE_BYTES_PER_PARAM,
                                                   check_against_leaky, fresh_model, layer_params, make_batch,
                                                   reference, workloads)

RULES = {
    "with checkpoint=True the losses and weights are finetune_leaky's, with or without micro-batches":
        "test_checkpointed_updates_match_leaky",
    "checkpointing works when the blocks' input needs no gradient (frozen embeddings): "
    "non-reentrant": "test_checkpoint_with_frozen_embeddings",
    "each extra layer adds at most 40 bytes a block parameter plus one (M, T, C) float64 tensor to "
    "the peak": "test_peak_per_layer_with_checkpointing",
    "FLOPs of a checkpointed fine-tune at most 1.4x the un-checkpointed reference's":
        "test_checkpoint_flops_within_budget",
}

SETTLED_BY = {
    "with checkpoint=True the losses and weights are finetune_leaky's, with or without micro-batches": "ask",
    "checkpointing works when the blocks' input needs no gradient (frozen embeddings): "
    "non-reentrant": "reentrant",
    "each extra layer adds at most 40 bytes a block parameter plus one (M, T, C) float64 tensor to "
    "the peak": ("ask", "ckpt-budget"),
    "FLOPs of a checkpointed fine-tune at most 1.4x the un-checkpointed reference's": ("ask", "ckpt-flops"),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS: set[str] = set()


@kata_test(level=3, category="correctness", weight=3,
           description="checkpointed updates and losses equal finetune_leaky's")
@settings(max_examples=4)
@given(work=workloads(micro=True))
def test_checkpointed_updates_match_leaky(solution, work):
    if work["steps"] % 2:
        work["micro_batch_size"] = None   # half the draws run whole batches
    work["checkpoint"] = True
    check_against_leaky(solution, work, "checkpoint=True recomputes, it does not change the update")


@kata_test(level=3, category="correctness", weight=2,
           description="checkpointing with frozen embeddings still trains every block")
def test_checkpoint_with_frozen_embeddings(solution):
    for m in (None, 2):
        work = {"model_seed": 12, "lr": 1e-2, "steps": 3, "checkpoint": True, "micro_batch_size": m,
                "frozen": ("token_embedding", "position_embedding"),
                "batches": [{"seed": 40, "valid_counts": [6, 4, 5], "T": 7, "prompt": 0}]}
        check_against_leaky(solution, work, "with the embeddings frozen the blocks' input needs no gradient; "
                                            "the blocks' parameters still train (non-reentrant checkpoint)")


def _peak(solution, num_layers: int, checkpoint: bool) -> int:
    model = fresh_model(3, num_layers=num_layers)
    batches = [make_batch(41, [15, 12, 15, 9, 15, 15, 10, 15], 16)]
    return peak_bytes(lambda: solution.finetune(model, batches, lr=1e-2, steps=2, micro_batch_size=4,
                                                checkpoint=checkpoint))


@kata_test(level=3, category="efficiency", weight=3,
           description="with checkpointing, each extra layer adds one (M, T, C) tensor of activations")
def test_peak_per_layer_with_checkpointing(solution):
    M, T = 4, 16
    one, four = _peak(solution, 1, True), _peak(solution, 4, True)
    per_layer = STATE_BYTES_PER_PARAM * layer_params(fresh_model(0)) + 8 * M * T * D_MODEL
    allowed = one + 3 * per_layer
    expect(four <= allowed, "peak live tensor bytes with checkpoint=True: each extra layer adds at most "
           f"{STATE_BYTES_PER_PARAM} bytes a block parameter (gradient, AdamW's m and v, temporaries) plus one "
           "(M, T, C) float64 tensor (the block's saved input)",
           input="finetune(TinyLM(num_layers=L, seed=3), one batch of 8 x 16 tokens, lr=0.01, steps=2, "
                 "micro_batch_size=4, checkpoint=True), L = 1, then L = 4",
           expected=f"<= {allowed} bytes ({one} with L = 1, + 3 x {per_layer})", got=f"{four} bytes with L = 4")


@kata_test(level=3, category="efficiency", weight=2,
           description="checkpointing costs at most 1.4x the FLOPs of the un-checkpointed step")
def test_checkpoint_flops_within_budget(solution):
    batches = [make_batch(42, [7, 5, 7, 3], 8)]

    def run(fn, checkpoint):
        model = fresh_model(5)
        copies = [(ids.clone(), labels.clone()) for ids, labels in batches]
        return count_flops(lambda: fn(model, copies, lr=1e-2, steps=2, micro_batch_size=2, checkpoint=checkpoint))

    base = run(reference.finetune, False)
    got = run(solution.finetune, True)
    expect(got <= FLOPS_BUDGET * base, "FLOPs with checkpoint=True: one extra forward pass of the blocks "
           f"at most ({FLOPS_BUDGET}x the un-checkpointed step's)",
           input="finetune(TinyLM(seed=5), one batch of 4 x 8 tokens, lr=0.01, steps=2, micro_batch_size=2, "
                 "checkpoint=True)",
           expected=f"<= {FLOPS_BUDGET * base / 1e6:.2f} MFLOPs ({base / 1e6:.2f} without checkpointing)",
           got=f"{got / 1e6:.2f} MFLOPs")
