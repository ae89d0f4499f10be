"""Level 1 — the ledger and the leak: training_state_bytes (weights, gradients, optimizer
state, master weights, ZeRO sharding) and a finetune with finetune_leaky's losses and
weights whose peak memory does not grow with the number of steps.

Each rule of the statement for this level maps to the test that builds the situation where
that rule decides the outcome.
"""

from __future__ import annotations

from hypothesis import example, given, settings, strategies as st

from grader.protocol import expect, expect_value_error, kata_test
from grader.suites._measure import peak_bytes
from grader.suites.train_memory.strategies import (build_batches, check_against_leaky, check_losses,
                                                   check_weights, fresh_model, leaky_result, make_batch,
                                                   reference, run_finetune, shown, workloads)

RULES = {
    "weights of every parameter, gradients of the trainable ones, both in weight_bytes":
        ("test_state_bytes_matches_ledger", "test_frozen_params_have_no_gradients"),
    "optimizer state of the trainable ones in float32: AdamW m and v (8 bytes), SGD with momentum "
    "one buffer (4), SGD none": "test_optimizer_state_per_optimizer",
    "float32 master weights of the trainable ones only when master_weights and weight_bytes < 4":
        "test_master_weights_only_below_fp32",
    "ZeRO: stage 1 shards the optimizer state (master weights included) over dp, stage 2 the "
    "gradients too, stage 3 the weights too; stage 0 shards nothing; a sharded part is rounded up":
        "test_zero_stages_shard_over_dp",
    "the 16-bytes-a-parameter rule: 7 B in mixed-precision AdamW is 112 GB; an int":
        "test_state_bytes_worked_example",
    "ValueError: unknown optimizer, n_trainable outside [0, n_params], weight_bytes < 1, "
    "zero_stage outside 0..3, dp < 1": "test_state_bytes_errors",
    "finetune leaves finetune_leaky's weights (1e-9) and returns its losses":
        ("test_finetune_matches_leaky", "test_steps_cycle_through_batches"),
    "the losses are Python floats, one per step": "test_losses_are_python_floats",
    "parameters with requires_grad=False are not trained": "test_frozen_parameters_not_trained",
    "steps = 0 returns [] and changes nothing": "test_zero_steps",
    "peak live tensor bytes do not grow with steps, not even by a scalar a step":
        "test_peak_does_not_grow_with_steps",
}

SETTLED_BY = {
    "weights of every parameter, gradients of the trainable ones, both in weight_bytes": ("ask", "what-counts"),
    "optimizer state of the trainable ones in float32: AdamW m and v (8 bytes), SGD with momentum "
    "one buffer (4), SGD none": "optimizers",
    "float32 master weights of the trainable ones only when master_weights and weight_bytes < 4": "master",
    "ZeRO: stage 1 shards the optimizer state (master weights included) over dp, stage 2 the "
    "gradients too, stage 3 the weights too; stage 0 shards nothing; a sharded part is rounded up": "zero",
    "the 16-bytes-a-parameter rule: 7 B in mixed-precision AdamW is 112 GB; an int": "ask",
    "ValueError: unknown optimizer, n_trainable outside [0, n_params], weight_bytes < 1, "
    "zero_stage outside 0..3, dp < 1": "errors",
    "finetune leaves finetune_leaky's weights (1e-9) and returns its losses": ("ask", "batches"),
    "the losses are Python floats, one per step": "ask",
    "parameters with requires_grad=False are not trained": "frozen",
    "steps = 0 returns [] and changes nothing": "zero-steps",
    "peak live tensor bytes do not grow with steps, not even by a scalar a step": ("ask", "memory"),
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS = {
    "steps = 0 returns [] and changes nothing",
}

OPTIMIZERS = ("adamw", "sgd_momentum", "sgd")


def _ledger_call(args: dict) -> str:
    return "training_state_bytes(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def _check_ledger(solution, args: dict, prop: str) -> None:
    want = reference.training_state_bytes(**args)
    got = solution.training_state_bytes(**args)
    expect(type(got) is int and got == want, prop, input=_ledger_call(args), expected=want, got=got)


@st.composite
def ledger_args(draw):
    n_params = draw(st.integers(0, 10**11))
    return {"n_params": n_params, "n_trainable": draw(st.sampled_from([n_params, 0, n_params // 3])),
            "weight_bytes": draw(st.sampled_from([1, 2, 4, 8])), "optimizer": draw(st.sampled_from(OPTIMIZERS)),
            "master_weights": draw(st.booleans()), "zero_stage": draw(st.integers(0, 3)),
            "dp": draw(st.sampled_from([1, 2, 3, 8, 64]))}


@kata_test(level=1, category="correctness", weight=3,
           description="training_state_bytes matches the ledger for random configurations")
@settings(max_examples=40)
@example(args={"n_params": 7 * 10**9, "n_trainable": 7 * 10**9, "weight_bytes": 2, "optimizer": "adamw",
               "master_weights": True, "zero_stage": 0, "dp": 1})
@given(args=ledger_args())
def test_state_bytes_matches_ledger(solution, args):
    _check_ledger(solution, args, "weights + gradients + optimizer state (+ master weights), per rank")


@kata_test(level=1, category="correctness", weight=2,
           description="the 16-bytes-a-parameter rule: 7 B in mixed-precision AdamW is 112 GB")
def test_state_bytes_worked_example(solution):
    args = {"n_params": 7 * 10**9, "n_trainable": 7 * 10**9}
    got = solution.training_state_bytes(**args)
    expect(type(got) is int and got == 112 * 10**9, "2 (bf16 weight) + 2 (gradient) + 4 + 4 (AdamW m, v) "
           "+ 4 (fp32 master) = 16 bytes a parameter, an int", input=_ledger_call(args),
           expected=112 * 10**9, got=got)


@kata_test(level=1, category="correctness", weight=2,
           description="frozen parameters have weights but no gradients and no optimizer state")
def test_frozen_params_have_no_gradients(solution):
    for n_trainable in (0, 4_000_000):
        args = {"n_params": 7 * 10**9, "n_trainable": n_trainable, "optimizer": "sgd", "master_weights": False}
        _check_ledger(solution, args, "a frozen parameter costs its weight only (LoRA: a few million trainable)")


@kata_test(level=1, category="correctness", weight=2,
           description="optimizer state: AdamW two float32 buffers, SGD with momentum one, SGD none")
def test_optimizer_state_per_optimizer(solution):
    for optimizer in OPTIMIZERS:
        args = {"n_params": 1000, "n_trainable": 1000, "weight_bytes": 4, "optimizer": optimizer,
                "master_weights": False}
        _check_ledger(solution, args, f"{optimizer}'s state in float32 bytes a trainable parameter")


@kata_test(level=1, category="correctness", weight=2,
           description="float32 master weights only when asked for and the weights are narrower than float32")
def test_master_weights_only_below_fp32(solution):
    for weight_bytes in (1, 2, 4, 8):
        for master in (True, False):
            args = {"n_params": 1000, "n_trainable": 500, "weight_bytes": weight_bytes, "optimizer": "sgd",
                    "master_weights": master}
            _check_ledger(solution, args, "a float32 master copy exists only when master_weights and "
                                          "weight_bytes < 4")


@kata_test(level=1, category="correctness", weight=3,
           description="ZeRO stages 1-3 shard optimizer state, then gradients, then weights over dp")
def test_zero_stages_shard_over_dp(solution):
    for stage in (0, 1, 2, 3):
        for dp in (4, 3):
            args = {"n_params": 1001, "n_trainable": 1001, "optimizer": "adamw", "zero_stage": stage, "dp": dp}
            _check_ledger(solution, args, f"ZeRO stage {stage} over dp={dp}: stage 1 shards the optimizer "
                                          "state with the master weights, 2 the gradients too, 3 the "
                                          "weights too (each part rounded up); stage 0 shards nothing")
    # the defaults: zero_stage=0 (nothing sharded, whatever dp), dp=1 (a stage alone shards nothing)
    for args in ({"n_params": 1001, "n_trainable": 1001, "dp": 8}, {"n_params": 1001, "n_trainable": 1001,
                                                                    "zero_stage": 3}):
        _check_ledger(solution, args, "the defaults zero_stage=0 and dp=1")


@kata_test(level=1, category="api contract", weight=2,
           description="ValueError for an unknown optimizer and out-of-range counts")
def test_state_bytes_errors(solution):
    bad = [{"optimizer": "adam"}, {"optimizer": "lion"}, {"n_trainable": 11}, {"n_trainable": -1},
           {"n_params": -1, "n_trainable": 0}, {"weight_bytes": 0}, {"zero_stage": 4}, {"zero_stage": -1},
           {"dp": 0}]
    for change in bad:
        args = {"n_params": 10, "n_trainable": 10, **change}
        expect_value_error(lambda: solution.training_state_bytes(**args), _ledger_call(args))


@kata_test(level=1, category="correctness", weight=3,
           description="finetune's losses and final weights are finetune_leaky's")
@settings(max_examples=4)
@given(work=workloads())
def test_finetune_matches_leaky(solution, work):
    check_against_leaky(solution, work, "finetune trains like finetune_leaky")


@kata_test(level=1, category="correctness", weight=1,
           description="steps beyond the number of batches cycle through them")
def test_steps_cycle_through_batches(solution):
    work = {"model_seed": 5, "lr": 1e-2, "steps": 5,
            "batches": [{"seed": 1, "valid_counts": [3, 5], "T": 6, "prompt": 0},
                        {"seed": 2, "valid_counts": [7, 1, 4], "T": 8, "prompt": 1},
                        {"seed": 3, "valid_counts": [2, 1, 0, 2, 1], "T": 3, "prompt": 0}]}
    check_against_leaky(solution, work, "step i trains on batches[i % len(batches)], whatever their shapes "
                                        "(more sequences than tokens too)")


@kata_test(level=1, category="api contract", weight=2,
           description="the losses come back as Python floats, one per step")
def test_losses_are_python_floats(solution):
    work = {"model_seed": 2, "lr": 1e-2, "steps": 3, "batches": [{"seed": 3, "valid_counts": [4, 2], "T": 5,
                                                                   "prompt": 0}]}
    want, _ = leaky_result(work)
    got, _ = run_finetune(solution, work)
    check_losses(got, want, "finetune returns a list of Python floats (loss.item() each step)", shown(work))


@kata_test(level=1, category="correctness", weight=2,
           description="parameters with requires_grad=False are left as they are")
def test_frozen_parameters_not_trained(solution):
    work = {"model_seed": 7, "lr": 1e-2, "steps": 3, "frozen": ("token_embedding", "position_embedding", "blocks.0."),
            "batches": [{"seed": 4, "valid_counts": [5, 3], "T": 6, "prompt": 0}]}
    want_losses, want = leaky_result(work)
    got, model = run_finetune(solution, work)
    check_losses(got, want_losses, "losses with the embeddings and block 0 frozen", shown(work))
    check_weights(model, want, "frozen parameters keep their values; the others train as in finetune_leaky",
                  shown(work))


@kata_test(level=1, category="edge cases", weight=1, description="steps = 0 returns [] and changes nothing")
def test_zero_steps(solution):
    work = {"model_seed": 1, "lr": 1e-2, "steps": 0, "batches": [{"seed": 5, "valid_counts": [2], "T": 4,
                                                                   "prompt": 0}]}
    _, want = leaky_result(work)
    got, model = run_finetune(solution, work)
    expect(got == [] and isinstance(got, list), "steps = 0 returns an empty list", input=shown(work),
           expected=[], got=got)
    check_weights(model, want, "steps = 0 leaves the weights as they were", shown(work))


@kata_test(level=1, category="efficiency", weight=3,
           description="the peak of live tensor bytes is the same after 2 steps and after 6")
def test_peak_does_not_grow_with_steps(solution):
    batches = [make_batch(11, [11, 9, 11, 6], 12), make_batch(12, [10, 11, 4, 11], 12)]
    peaks = {}
    for steps in (2, 6):
        model = fresh_model(3)   # built outside the measurement
        copies = [(ids.clone(), labels.clone()) for ids, labels in batches]
        peaks[steps] = peak_bytes(lambda: solution.finetune(model, copies, lr=1e-2, steps=steps))
    expect(peaks[6] <= peaks[2], "peak live tensor bytes of finetune do not grow with steps (nothing of a "
           "step, not even its loss tensor, outlives it)",
           input="finetune(TinyLM(seed=3), 2 batches of 4 x 12 tokens, lr=0.01, steps=2, then steps=6)",
           expected=f"<= {peaks[2]} bytes (the peak with steps=2)", got=f"{peaks[6]} bytes with steps=6",
           note=f"{(peaks[6] - peaks[2]) / 4:.0f} more bytes a step")


__all__ = ["build_batches"]
