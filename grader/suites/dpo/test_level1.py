"""Level 1 — sequence log-probabilities: the shift, the mask, padding ids, averaging, dtypes,
stability and gradients of `sequence_logprobs`.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome.
"""

from __future__ import annotations

import torch
from hypothesis import example, given, settings, strategies as st

from grader.protocol import call, expect, kata_test
from grader.suites.dpo.strategies import (LOGIT_DTYPES, MASK_KINDS, PADDING_IDS, as_mask,
                                          check_logprob_grad, check_logprobs, compute_dtype,
                                          expect_unchanged, expect_value_error, logprob_cases,
                                          run_logprobs)

RULES = {
    "logits[:, t - 1] predicts labels[:, t]; the result sums the scored log-probs of each row":
        ("test_logprobs_match_oracle", "test_next_token_is_scored"),
    "position 0 is never scored: loss_mask[:, 0] and labels[:, 0] are never read":
        "test_position_zero_is_never_read",
    "unscored positions may hold any label (-100, -1, V, V + 5): never gathered, no effect":
        "test_padding_ids_are_never_gathered",
    "ValueError: a scored label outside [0, V)": "test_scored_label_outside_vocabulary_raises",
    "loss_mask is bool or 0/1 int or float; every kind gives the same result":
        "test_every_mask_kind_gives_the_same_result",
    "average=True divides each row's sum by its number of scored positions":
        "test_average_divides_by_scored_count",
    "a row with no scored position: 0 when summing, ValueError when averaging":
        "test_row_without_scored_position",
    "float32 result with float32 math for float16/bfloat16/float32 logits; float64 for float64":
        "test_result_dtype_and_compute_precision",
    "stable for logits of magnitude 1e4": "test_stable_for_logits_of_magnitude_1e4",
    "gradients flow to logits": "test_gradient_flows_to_logits",
    "do not modify the inputs: logits, labels and loss_mask (every kind, position 0 and padding "
    "included) are unchanged by the call": ("test_inputs_are_not_modified", "test_logprobs_match_oracle"),
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'logits[:, t - 1] predicts labels[:, t]; the result sums the scored log-probs of each'
    ' row':
        ('ask', 'shift'),
    'position 0 is never scored: loss_mask[:, 0] and labels[:, 0] are never read':
        'position-zero',
    'unscored positions may hold any label (-100, -1, V, V + 5): never gathered, no '
    'effect':
        'padding-ids',
    'ValueError: a scored label outside [0, V)':
        'ask',
    'loss_mask is bool or 0/1 int or float; every kind gives the same result':
        'ask',
    "average=True divides each row's sum by its number of scored positions":
        'ask',
    'a row with no scored position: 0 when summing, ValueError when averaging':
        'empty-row',
    'float32 result with float32 math for float16/bfloat16/float32 logits; float64 for '
    'float64':
        'ask',
    'stable for logits of magnitude 1e4':
        'ask',
    'gradients flow to logits':
        'ask',
    'do not modify the inputs: logits, labels and loss_mask (every kind, position 0 and '
    'padding included) are unchanged by the call':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# The core is the shift, the mask, padding ids, dtypes and stability. Details: what position 0
# holds (nothing predicts it; reading its mask or label is an edge), and a row with nothing
# scored (0 when summing, ValueError when averaging).
DETAILS = {
    'a row with no scored position: 0 when summing, ValueError when averaging',
    'position 0 is never scored: loss_mask[:, 0] and labels[:, 0] are never read',
}

FAST = settings(max_examples=8)
FEW = settings(max_examples=4)


@kata_test(level=1, category="correctness", weight=3,
           description="sequence_logprobs matches the float64 oracle (sum and average)")
@FAST
@given(case=logprob_cases())
def test_logprobs_match_oracle(solution, case):
    before = {"logits": case["logits"].clone(), "labels": case["labels"].clone(),
              "loss_mask": case["loss_mask"].clone()}
    out, _ = run_logprobs(solution, case, share_inputs=True)
    # The oracle reads the copies taken before the call: an edited input cannot move it.
    check_logprobs(out, dict(case, **before), "the sum (or mean) over scored positions t >= 1 of "
                                              "log_softmax(logits[:, t - 1])[labels[:, t]]")
    expect_unchanged(before, case, "sequence_logprobs", case)


@kata_test(level=1, category="correctness", weight=2,
           description="the logit at t - 1 scores the label at t (next-token shift)")
def test_next_token_is_scored(solution):
    # Row t of the logits puts all its mass (up to e^-20) on token t + 1, so only the shifted
    # reading gives log-probs near 0; an unshifted one gives about -20 per position.
    T, V = 4, 5
    logits = torch.full((1, T, V), -10.0)
    for t in range(T):
        logits[0, t, (t + 1) % V] = 10.0
    labels = torch.tensor([[0, 1, 2, 3]])
    mask = torch.tensor([[False, True, True, True]])
    case = {"logits": logits, "labels": labels, "loss_mask": mask, "average": False}
    out, _ = run_logprobs(solution, case)
    check_logprobs(out, case, "logits[:, t - 1] predicts labels[:, t]: a label predicted with "
                              "certainty by the previous position has log-prob ~0")


@kata_test(level=1, category="edge cases", weight=2,
           description="loss_mask[:, 0] and labels[:, 0] are never read")
@FAST
@example(case={"logits": torch.zeros(1, 2, 3), "labels": torch.tensor([[-100, 1]]),
               "loss_mask": torch.tensor([[False, True]]), "average": True}, first=(1, 7))
@given(case=logprob_cases(), first=st.tuples(st.sampled_from((0, 1)), st.sampled_from((-100, 0, 7))))
def test_position_zero_is_never_read(solution, case, first):
    mask_0, label_0 = first
    V = case["logits"].shape[-1]
    case = dict(case, labels=case["labels"].clone(), loss_mask=case["loss_mask"].clone())
    case["loss_mask"][:, 0] = bool(mask_0)
    case["labels"][:, 0] = label_0 if label_0 != 7 else V + 7
    out, _ = run_logprobs(solution, case)
    check_logprobs(out, case, "position 0 is never scored, whatever loss_mask[:, 0] and "
                              "labels[:, 0] hold (a sum or an average over t >= 1 only)")


@kata_test(level=1, category="edge cases", weight=2,
           description="padding labels such as -100 or V + 5 are never gathered")
@FEW
@given(case=logprob_cases(padded=True))
def test_padding_ids_are_never_gathered(solution, case):
    V = case["logits"].shape[-1]
    unscored = case["loss_mask"] == 0
    unscored[:, 0] = False          # position 0 has a test of its own
    for pad in PADDING_IDS:
        pad_id = {"V": V, "V+5": V + 5}.get(pad, pad)
        labels = case["labels"].clone()
        labels[unscored] = pad_id
        padded = dict(case, labels=labels)
        out, _ = run_logprobs(solution, padded)
        check_logprobs(out, padded, f"unscored positions may hold any label ({pad_id} here): "
                                    f"they are never gathered and change nothing")


@kata_test(level=1, category="api contract", weight=1,
           description="a scored label outside [0, V) raises ValueError")
@FEW
@given(case=logprob_cases())
def test_scored_label_outside_vocabulary_raises(solution, case):
    V = case["logits"].shape[-1]
    b, t = case["loss_mask"].nonzero()[-1].tolist()
    for bad in (-100, -1, V, V + 3):  # every draw tries each, V (one past the end) included
        labels = case["labels"].clone()
        labels[b, t] = bad
        bad_case = dict(case, labels=labels)
        expect_value_error(lambda: run_logprobs(solution, bad_case),
                           f"a scored label outside the vocabulary [0, {V}) raises ValueError "
                           f"(labels[{b}, {t}] = {bad} with loss_mask[{b}, {t}] != 0)",
                           bad_case)


@kata_test(level=1, category="api contract", weight=2,
           description="bool, int and float 0/1 masks give the same result")
@FEW
@given(case=logprob_cases())
def test_every_mask_kind_gives_the_same_result(solution, case):
    for kind in MASK_KINDS[1:]:
        shown = dict(case, loss_mask=as_mask(case["loss_mask"], kind))
        out, _ = run_logprobs(solution, shown)
        check_logprobs(out, shown, f"loss_mask may be bool or 0/1 int or float: a {kind} "
                                   f"mask gives the bool mask's result")


@kata_test(level=1, category="correctness", weight=2,
           description="average=True divides by the number of scored positions of the row")
@FEW
@given(case=logprob_cases(min_b=2, padded=True))
def test_average_divides_by_scored_count(solution, case):
    # Row 0 scores every position t >= 1; the others leave position 1 unscored: the counts differ.
    case = dict(case, average=True, loss_mask=case["loss_mask"].clone())
    case["loss_mask"][0, 1:] = True
    out, _ = run_logprobs(solution, case)
    check_logprobs(out, case, "with average=True each row's sum is divided by that row's "
                              "number of scored positions (t >= 1, loss_mask != 0)")


@kata_test(level=1, category="edge cases", weight=2,
           description="a row with no scored position: 0 when summing, ValueError when averaging")
@FEW
@example(case={"logits": torch.zeros(2, 1, 3), "labels": torch.zeros(2, 1, dtype=torch.long),
               "loss_mask": torch.ones(2, 1, dtype=torch.bool), "average": False})
@given(case=logprob_cases(min_t=1))
def test_row_without_scored_position(solution, case):
    mask = case["loss_mask"].clone()
    mask[-1, :] = False
    mask[-1, 0] = True                       # position 0 does not count as scored
    summing = dict(case, loss_mask=mask, average=False)
    out, _ = run_logprobs(solution, summing)
    check_logprobs(out, summing, "a row with no scored position sums to 0")
    averaging = dict(summing, average=True)
    expect_value_error(lambda: run_logprobs(solution, averaging),
                       "average=True with a row that scores no position (t >= 1 with "
                       "loss_mask != 0) raises ValueError", averaging)


@kata_test(level=1, category="numerics", weight=2,
           description="float32 result and math for float16/bfloat16/float32 logits; float64 for float64")
@FEW
@given(case=logprob_cases())
def test_result_dtype_and_compute_precision(solution, case):
    for dtype in LOGIT_DTYPES:   # the grid values are exact in every dtype
        typed = dict(case, logits=case["logits"].to(dtype))
        out, _ = run_logprobs(solution, typed)
        want = compute_dtype(dtype)
        expect(isinstance(out, torch.Tensor) and out.dtype == want,
               f"{dtype} logits give a {want} result", input=typed, expected=str(want),
               got=str(out.dtype) if isinstance(out, torch.Tensor) else type(out).__name__)
        check_logprobs(out, typed, f"{dtype} logits: the math runs in {want} (log-softmax of "
                                   f"the upcast logits), within {want} roundoff of the exact value")


@kata_test(level=1, category="numerics", weight=2,
           description="logits of magnitude 1e4 give finite, accurate log-probs")
@settings(max_examples=3)
@example(case={"logits": torch.tensor([[[1e4, -1e4, 0.0], [-1e4, 1e4, 5e3]]]),
               "labels": torch.tensor([[0, 2]]), "loss_mask": torch.tensor([[False, True]]),
               "average": False})
@given(case=logprob_cases(dtypes=(torch.float64,), scale=1e4))
def test_stable_for_logits_of_magnitude_1e4(solution, case):
    for dtype in LOGIT_DTYPES:
        typed = dict(case, logits=case["logits"].to(dtype))
        out, _ = run_logprobs(solution, typed)
        check_logprobs(out, typed, "stable for logits of magnitude 1e4: subtract the max "
                                   "before exponentiating (log_softmax, logsumexp), never "
                                   "log(softmax(x))")


@kata_test(level=1, category="correctness", weight=2,
           description="gradients flow to logits and match the oracle's")
@FEW
@given(case=logprob_cases(dtypes=LOGIT_DTYPES))
def test_gradient_flows_to_logits(solution, case):
    _, grad = run_logprobs(solution, case, grad=True)
    check_logprob_grad(grad, case, "d(sum_b w_b * result[b]) / d logits: softmax minus one-hot "
                                   "at the position before each scored label, 0 elsewhere")


@kata_test(level=1, category="api contract", weight=1,
           description="logits, labels and loss_mask are not modified (position 0 and padding set)")
def test_inputs_are_not_modified(solution):
    # Everything a solution might "clean up" in place is present: loss_mask[:, 0] = 1 and
    # labels[:, 0] = -100 (never read), padding ids -100 and V + 5 at unscored positions, and a
    # mask of every kind (a bool mask's .bool() / .to(bool) is the caller's own tensor).
    logits = torch.tensor([[[1.0, 0.0, -1.0], [2.0, 0.5, 0.0], [0.0, 0.0, 3.0], [1.0, 1.0, 1.0]],
                           [[0.0, 2.0, 0.0], [-1.0, 0.0, 1.0], [4.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    labels = torch.tensor([[-100, 2, -100, 1], [-100, 0, 2, 8]])
    scored = torch.tensor([[True, True, False, True], [True, True, True, False]])
    for kind in MASK_KINDS:
        for average in (False, True):
            case = {"logits": logits.clone(), "labels": labels.clone(),
                    "loss_mask": as_mask(scored.clone(), kind), "average": average}
            before = {name: case[name].clone() for name in ("logits", "labels", "loss_mask")}
            # Called directly, not through run_logprobs (which passes a copy of the logits).
            call(solution.sequence_logprobs, case["logits"], case["labels"], case["loss_mask"],
                 average=average, what="sequence_logprobs")
            expect_unchanged(before, case, f"sequence_logprobs (a {kind} loss_mask, "
                             f"average={average}; position 0 and padding are skipped, not "
                             f"overwritten)", before)
