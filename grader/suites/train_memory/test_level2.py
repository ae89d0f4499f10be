"""Level 2 — accumulate: with micro_batch_size = m, each batch runs in micro-batches of m
sequences and the update is the whole batch's (the loss is the mean over every valid token of
the batch, not the mean of micro-batch means); peak memory scales with m, not the batch.

Each rule of the statement for this level maps to the test that builds the situation where
that rule decides the outcome.
"""

from __future__ import annotations

from hypothesis import given, settings

from grader.protocol import expect, expect_value_error, kata_test
from grader.suites._measure import peak_bytes
from grader.suites.train_memory.strategies import (BYTES_PER_TOKEN_SLACK, check_against_leaky, check_weights,
                                                   fresh_model, leaky_result, make_batch, shown, workloads)

RULES = {
    "with micro_batch_size, the losses and weights are the whole batch's (finetune_leaky's)":
        "test_micro_batches_match_leaky",
    "the loss is the mean over all valid tokens of the batch, not the mean of micro-batch means":
        "test_uneven_micro_batches_weight_tokens",
    "a micro-batch may hold no valid token (nothing but padding): no NaN, it adds nothing":
        "test_micro_batch_without_valid_tokens",
    "the last micro-batch may be smaller; micro_batch_size >= the batch is one micro-batch":
        "test_micro_batch_sizes_that_do_not_divide",
    "ValueError for micro_batch_size < 1, before anything changes":
        "test_micro_batch_size_errors",
    "peak live tensor bytes scale with micro_batch_size, not with the batch":
        "test_peak_scales_with_micro_batch",
}

SETTLED_BY = {
    "with micro_batch_size, the losses and weights are the whole batch's (finetune_leaky's)": "ask",
    "the loss is the mean over all valid tokens of the batch, not the mean of micro-batch means":
        ("ask", "loss-scaling"),
    "a micro-batch may hold no valid token (nothing but padding): no NaN, it adds nothing": "empty-micro",
    "the last micro-batch may be smaller; micro_batch_size >= the batch is one micro-batch": "split",
    "ValueError for micro_batch_size < 1, before anything changes": "micro-errors",
    "peak live tensor bytes scale with micro_batch_size, not with the batch": ("ask", "micro-memory"),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS = {
    "ValueError for micro_batch_size < 1, before anything changes",
}


@kata_test(level=2, category="correctness", weight=3,
           description="micro-batched updates and losses equal finetune_leaky's whole-batch ones")
@settings(max_examples=5)
@given(work=workloads(max_batch=5, micro=True))
def test_micro_batches_match_leaky(solution, work):
    check_against_leaky(solution, work, f"micro_batch_size={work['micro_batch_size']} gives the whole batch's update")


@kata_test(level=2, category="correctness", weight=3,
           description="micro-batches with very different token counts: every valid token weighs the same")
def test_uneven_micro_batches_weight_tokens(solution):
    work = {"model_seed": 4, "lr": 1e-2, "steps": 3, "micro_batch_size": 2,
            "batches": [{"seed": 21, "valid_counts": [9, 9, 1, 0], "T": 10, "prompt": 0},
                        {"seed": 22, "valid_counts": [1, 2, 9, 8], "T": 10, "prompt": 0}]}
    check_against_leaky(solution, work, "the loss is the sum over the batch's valid tokens divided by their "
                                        "number (the mean of micro-batch means is not)")


@kata_test(level=2, category="edge cases", weight=2,
           description="a micro-batch of padding only adds nothing (no NaN)")
def test_micro_batch_without_valid_tokens(solution):
    work = {"model_seed": 6, "lr": 1e-2, "steps": 2, "micro_batch_size": 1,
            "batches": [{"seed": 23, "valid_counts": [0, 6, 0], "T": 7, "prompt": 0}]}
    check_against_leaky(solution, work, "a micro-batch without valid labels contributes nothing (0, not NaN)")


@kata_test(level=2, category="edge cases", weight=2,
           description="micro_batch_size that does not divide the batch, or exceeds it")
def test_micro_batch_sizes_that_do_not_divide(solution):
    for m in (2, 3, 5, 9):
        work = {"model_seed": 8, "lr": 3e-3, "steps": 2, "micro_batch_size": m,
                "batches": [{"seed": 24, "valid_counts": [3, 6, 2, 5, 6], "T": 7, "prompt": 1}]}
        check_against_leaky(solution, work, f"5 sequences in micro-batches of {m}: the last one is smaller "
                                            "(or the batch is one micro-batch)")


@kata_test(level=2, category="api contract", weight=1,
           description="ValueError for micro_batch_size < 1, leaving the model as it was")
def test_micro_batch_size_errors(solution):
    for m in (0, -1):
        work = {"model_seed": 9, "lr": 1e-2, "steps": 2, "micro_batch_size": m,
                "batches": [{"seed": 25, "valid_counts": [3, 2], "T": 5, "prompt": 0}]}
        model = fresh_model(9)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        batches = [make_batch(25, [3, 2], 5)]
        expect_value_error(lambda: solution.finetune(model, batches, lr=1e-2, steps=2, micro_batch_size=m),
                           shown(work))
        check_weights(model, before, "a rejected call leaves the weights as they were", shown(work))
        # the same model trains normally afterwards
        _, want = leaky_result({**work, "micro_batch_size": None})
        solution.finetune(model, [make_batch(25, [3, 2], 5)], lr=1e-2, steps=2)
        check_weights(model, want, "after a rejected call, a valid one trains the untouched model", shown(work))


@kata_test(level=2, category="efficiency", weight=3,
           description="peak memory with micro-batches of 2 is the same for a batch of 4 and of 12")
def test_peak_scales_with_micro_batch(solution):
    T = 12
    peaks = {}
    for B in (4, 12):   # both accumulate over several micro-batches
        model = fresh_model(3)
        batches = [make_batch(30 + B, [11] * B, T)]
        peaks[B] = peak_bytes(lambda: solution.finetune(model, batches, lr=1e-2, steps=2, micro_batch_size=2))
    allowed = peaks[4] + BYTES_PER_TOKEN_SLACK * (12 - 4) * T
    expect(peaks[12] <= allowed, "peak live tensor bytes scale with micro_batch_size, not with the batch "
           f"(at most {BYTES_PER_TOKEN_SLACK} bytes more per extra token of the batch)",
           input="finetune(TinyLM(seed=3), one batch of B x 12 tokens, lr=0.01, steps=2, micro_batch_size=2), "
                 "B = 4, then B = 12",
           expected=f"<= {allowed} bytes ({peaks[4]} with B = 4)", got=f"{peaks[12]} bytes with B = 12")
