"""Level 3 — FlashDecoding over a paged cache: flash_decode's values through the block table,
slots and table entries no sequence owns, shared prefix blocks, empty sequences, the split
ranges and the one call of the module-level combine_partials (seen through a judge-side
wrapper set on the module), index dtypes, errors and vectorisation (operation counts).

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome; random caches come on top.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import PropertyFailure, call, expect, kata_test
from grader.suites._measure import count_ops
from grader.suites.flash_attn.strategies import (close, decode_cases, decode_shown, dense_decode,
                                                 raises_value_error, randn, readable, run_decode)

RULES = {
    "equals dense attention over each sequence's own tokens (token t in block block_table[b, t // BS], "
    "slot t % BS), GQA, output in q's dtype": "test_decode_matches_dense_attention",
    "table entries past a sequence's last block and cache slots no sequence owns (NaN too) never "
    "influence the result": "test_decode_ignores_what_no_sequence_owns",
    "sequences may share blocks (a shared prefix)": "test_decode_with_shared_prefix_blocks",
    "seq_lens[b] == 0 gives zeros": "test_decode_empty_sequence_gives_zeros",
    "scale as in level 1: None means 1/sqrt(D), an explicit 0.0 is a valid scale":
        "test_decode_scale_none_and_zero",
    "all partials are merged by one call of the module-level combine_partials, looked up at call time, "
    "with (num_splits, B, H, D) float32 partials (float64 for float64 inputs)":
        "test_decode_merges_with_one_combine_call",
    "keys cut into num_splits contiguous ranges whose sizes differ by at most one (empty ranges when "
    "seq_lens[b] < num_splits)": "test_decode_split_ranges_are_balanced",
    "equals dense attention for scores of 1e4 too (each partial keeps its own max)":
        "test_decode_is_stable_for_large_scores",
    "block_table and seq_lens each int32 or int64 (one may be int32, the other int64)":
        "test_decode_accepts_int32_and_int64_indices",
    "math in float32 for half inputs (scores, weights, the weighted sum of values), as in level 1":
        "test_decode_half_inputs_math_in_float32",
    "inputs are never modified": "test_decode_inputs_are_not_modified",
    "ValueError: index dtypes, seq_lens out of [0, max_blocks·block_size], num_splits < 1, shapes, D < 1, "
    "v-dims, H % H_kv": "test_decode_rejects_bad_arguments",
    "vectorised: the same number of tensor operations for B = 2 and 8 and for lengths 64 and 512":
        "test_decode_is_vectorised",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    "equals dense attention over each sequence's own tokens (token t in block "
    "block_table[b, t // BS], slot t % BS), GQA, output in q's dtype":
        ('ask', 'paged-layout'),
    "table entries past a sequence's last block and cache slots no sequence owns (NaN "
    'too) never influence the result':
        'garbage',
    'sequences may share blocks (a shared prefix)':
        'paged-layout',
    'seq_lens[b] == 0 gives zeros':
        'empty-sequence',
    'scale as in level 1: None means 1/sqrt(D), an explicit 0.0 is a valid scale':
        ('default-scale', 'decode-numerics'),
    'all partials are merged by one call of the module-level combine_partials, looked up '
    'at call time, with (num_splits, B, H, D) float32 partials (float64 for float64 '
    'inputs)':
        ('ask', 'partials-format'),
    'keys cut into num_splits contiguous ranges whose sizes differ by at most one (empty '
    'ranges when seq_lens[b] < num_splits)':
        'split-ranges',
    'equals dense attention for scores of 1e4 too (each partial keeps its own max)':
        'decode-numerics',
    'block_table and seq_lens each int32 or int64 (one may be int32, the other int64)':
        ('ask', 'decode-errors'),
    'math in float32 for half inputs (scores, weights, the weighted sum of values), as in'
    ' level 1':
        'decode-numerics',
    'inputs are never modified':
        'ask',
    'ValueError: index dtypes, seq_lens out of [0, max_blocks·block_size], num_splits < '
    '1, shapes, D < 1, v-dims, H % H_kv':
        'decode-errors',
    'vectorised: the same number of tensor operations for B = 2 and 8 and for lengths 64 '
    'and 512':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# Mixed index dtypes (one int32, one int64) only trip a solution that assumes both match.
DETAILS = {
    'block_table and seq_lens each int32 or int64 (one may be int32, the other int64)',
}

DECODE_RULE = "flash_decode equals dense attention of each query over its sequence's own tokens"


def _check_decode(solution: Any, case: dict, prop: str, **kwargs: Any) -> None:
    got = run_decode(solution, case, **kwargs)
    expected = dense_decode(case, kwargs.get("scale")).to(case["q"].dtype)
    close(got, expected, prop, input=decode_shown(case, **kwargs))


@kata_test(level=3, category="correctness", weight=3,
           description="flash_decode equals dense attention over each sequence's tokens (random paged caches)")
@settings(max_examples=15)
@given(case=decode_cases(), scale=st.sampled_from([None, 0.7]))
def test_decode_matches_dense_attention(solution, case, scale):
    _check_decode(solution, case, DECODE_RULE + " (block table, slots, GQA, dtype of q)", scale=scale)


@kata_test(level=3, category="correctness", weight=2,
           description="garbage table entries and NaN in slots no sequence owns never reach the result")
@settings(max_examples=10)
@given(case=decode_cases(nan_unowned=True))
def test_decode_ignores_what_no_sequence_owns(solution, case):
    _check_decode(solution, case, "table entries past a sequence's last block (even out of range) and cache "
                  "slots no sequence owns (even NaN) never influence the result: mask the values too, "
                  "0 * NaN is NaN")


@kata_test(level=3, category="correctness", weight=1,
           description="sequences that share prefix blocks each read them as their own")
@settings(max_examples=6)
@given(case=decode_cases(shared_prefix=True, dtypes=(torch.float32,)))
def test_decode_with_shared_prefix_blocks(solution, case):
    _check_decode(solution, case, DECODE_RULE + " (sequences sharing prefix blocks)")


@kata_test(level=3, category="edge cases", weight=1,
           description="a sequence with seq_lens[b] == 0 gets zeros (never NaN)")
def test_decode_empty_sequence_gives_zeros(solution):
    gen = torch.Generator().manual_seed(5)
    for lens, num_splits in (([0, 3], 2), ([0], 1), ([4, 0, 1], 3)):
        case = {"q": randn(1, (len(lens), 2, 3)), "k_cache": randn(2, (6, 2, 1, 3)), "v_cache": randn(3, (6, 2, 1, 3)),
                "block_table": torch.randperm(6, generator=gen)[: 2 * len(lens)].reshape(len(lens), 2),
                "seq_lens": torch.tensor(lens), "num_splits": num_splits}
        _check_decode(solution, case, "seq_lens[b] == 0 gives zeros for that sequence")


@kata_test(level=3, category="edge cases", weight=1,
           description="scale=None is 1/sqrt(D); scale=0.0 is a scale (every owned token weighs the same)")
def test_decode_scale_none_and_zero(solution):
    gen = torch.Generator().manual_seed(11)
    case = {"q": randn(4, (2, 4, 3)), "k_cache": randn(5, (6, 2, 2, 3)), "v_cache": randn(6, (6, 2, 2, 3)),
            "block_table": torch.randperm(6, generator=gen)[:4].reshape(2, 2), "seq_lens": torch.tensor([3, 4]),
            "num_splits": 2}
    for scale, rule in ((0.0, "an explicit scale=0.0 is a valid scale, not 'not given': every owned token "
                              "weighs the same, out is the mean of the sequence's values"),
                        (None, "scale=None means 1/sqrt(D)")):
        _check_decode(solution, case, f"flash_decode: {rule}", scale=scale)


@kata_test(level=3, category="numerics", weight=1,
           description="scores of 1e4 give finite, exact results (each split's partial subtracts its max)")
def test_decode_is_stable_for_large_scores(solution):
    gen = torch.Generator()
    for seed, num_splits in ((0, 1), (1, 2), (2, 3)):
        gen.manual_seed(seed)
        # integer values: every score is an exact float32 integer up to 2e4, so exp(s - max) is exact
        case = {"q": torch.randint(-100, 101, (2, 2, 2), generator=gen).float(),
                "k_cache": torch.randint(-100, 101, (6, 2, 1, 2), generator=gen).float(),
                "v_cache": randn(seed, (6, 2, 1, 2)),
                "block_table": torch.randperm(6, generator=gen).reshape(2, 3), "seq_lens": torch.tensor([5, 3]),
                "num_splits": num_splits}
        _check_decode(solution, case, "scores of 1e4: each split's partial subtracts its own max before exp "
                      "(exp(1e4) overflows)", scale=1.0)


def _paged(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, dtype: torch.dtype) -> dict:
    """One sequence of 6 tokens (q (1, H, D), keys and values (6, D)) in 3 blocks of 2 slots
    stored in reverse order, read as 2 splits."""
    def cache(tokens):
        return tokens.reshape(3, 2, 1, -1).flip(0).to(dtype)  # (NB=3, BS=2, H_kv=1, D)

    return {"q": q.to(dtype), "k_cache": cache(keys), "v_cache": cache(values),
            "block_table": torch.tensor([[2, 1, 0]]), "seq_lens": torch.tensor([6]), "num_splits": 2}


@kata_test(level=3, category="numerics", weight=1,
           description="float16/bfloat16 caches: scores, softmax weights and the sum with the values in float32")
def test_decode_half_inputs_math_in_float32(solution):
    # scores q·k of about 1e4 differing by 1: float16 (steps of 8) and bfloat16 (steps of 64)
    # round them to one value and the weights become uniform
    large = (torch.tensor([[[100.0, 1.0], [1.0, 100.0]]]),
             torch.tensor([[100.0, 0.0], [100.0, 1.0], [99.0, -1.0], [0.0, 100.0], [-1.0, 100.0], [1.0, 99.0]]),
             torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [0.0, 2.0], [-1.0, 1.0]]))
    # scores within 0.1 of each other and values of +-1000 that nearly cancel: weights rounded to
    # half for the product with the values move out by far more than the half tolerance
    cancelling = (torch.tensor([[[0.1, 0.0], [0.3, 0.0], [0.7, 0.0], [0.9, 0.0]]]),
                  torch.tensor([[0.01, 0.0], [0.023, 0.0], [0.031, 0.0], [0.047, 0.0], [0.062, 0.0], [0.089, 0.0]]),
                  torch.tensor([[1000.0, 3000.0], [1000.0, 1000.0], [1000.0, 1000.0], [-1000.0, -2000.0],
                                [-1000.0, -1000.0], [-1000.0, -2000.0]]))
    for dtype in (torch.float16, torch.bfloat16):
        for what, tensors in (("scores of 1e4 that differ by 1", large), ("values that nearly cancel", cancelling)):
            _check_decode(solution, _paged(*tensors, dtype), f"{str(dtype)[6:]} inputs ({what}): math in float32 "
                          "as in level 1, q kᵀ, the softmax weights and their product with the values included",
                          scale=1.0)


class _CombineSpy:
    """Judge-side stand-in for the candidate's combine_partials: records what flash_decode
    passes and merges with the reference's combine_partials."""

    def __init__(self, reference: Any) -> None:
        self.reference = reference
        self.calls: list[tuple[Any, ...]] = []  # (outs, lses) of each call

    def __call__(self, outs: Any, lses: Any) -> Any:
        # Copies: the candidate's own tensors stay shared with it, and it could rewrite its
        # partials after this call (before the suite reads them).
        self.calls.append(tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in (outs, lses)))
        return self.reference.combine_partials(outs, lses)


def _decode_with_spy(solution: Any, reference: Any, case: dict) -> tuple[Any, _CombineSpy]:
    spy = _CombineSpy(reference)
    original = solution.combine_partials
    solution.combine_partials = spy
    try:
        got = run_decode(solution, case)
    finally:
        solution.combine_partials = original
    return got, spy


def _check_partials_shape(spy: _CombineSpy, case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    B, H, D = case["q"].shape
    S = case["num_splits"]
    shown_input = decode_shown(case)
    expect(len(spy.calls) == 1, "flash_decode merges all partials with exactly one call of the module-level "
           "combine_partials, looked up at call time (not a copy bound at import, not one call per sequence)",
           input=shown_input, expected="1 call", got=f"{len(spy.calls)} calls")
    outs, lses = spy.calls[0]
    work = {torch.float64} if case["q"].dtype == torch.float64 else set()
    shapes = (tuple(getattr(outs, "shape", ())), tuple(getattr(lses, "shape", ())))
    expect(shapes == ((S, B, H, D), (S, B, H)), "combine_partials gets outs (num_splits, B, H, D) and "
           "lses (num_splits, B, H)", input=shown_input, expected=((S, B, H, D), (S, B, H)), got=shapes)
    dtypes = (outs.dtype, lses.dtype)
    expect(all(d in {torch.float32} | work for d in dtypes), "partials are float32 (float64 allowed for "
           "float64 inputs)", input=shown_input, expected="float32", got=dtypes)
    return outs, lses


@kata_test(level=3, category="api contract", weight=2,
           description="flash_decode merges its partials with one call of the module's combine_partials")
@settings(max_examples=5)
@given(case=decode_cases(dtypes=(torch.float32, torch.float64, torch.float16)))
def test_decode_merges_with_one_combine_call(solution, reference, case):
    got, spy = _decode_with_spy(solution, reference, case)
    _check_partials_shape(spy, case)
    expected = dense_decode(case).to(case["q"].dtype)
    close(got, expected, DECODE_RULE + " (its result is what combine_partials returns, in q's dtype)",
          input=decode_shown(case))


def _position_case(lens: list[int], num_splits: int, block_size: int = 3) -> dict:
    """q = 0, so every key of a sequence weighs the same, and v = (1, token position): a partial's
    lse is log(range size) and its out (1, mean position), which locate its range exactly."""
    max_blocks = max(-(-n // block_size) for n in lens) or 1
    num_blocks = len(lens) * max_blocks
    table = torch.arange(num_blocks).flip(0).reshape(len(lens), max_blocks)
    v_cache = torch.zeros(num_blocks, block_size, 1, 2)
    for b in range(len(lens)):
        for t in range(max_blocks * block_size):
            v_cache[table[b, t // block_size], t % block_size, 0] = torch.tensor([1.0, float(t)])
    return {"q": torch.zeros(len(lens), 1, 2), "k_cache": randn(7, (num_blocks, block_size, 1, 2)),
            "v_cache": v_cache, "block_table": table, "seq_lens": torch.tensor(lens), "num_splits": num_splits}


def _ranges_of(outs: torch.Tensor, lses: torch.Tensor, b: int, shown_input: Any) -> list[tuple[int, int]]:
    """(start, size) of every split of sequence b, read back from its partial."""
    found = []
    for s in range(outs.shape[0]):
        lse = float(lses[s, b, 0])
        if lse == -math.inf:
            found.append((0, 0))
            continue
        size = math.exp(lse)
        ones, mean = float(outs[s, b, 0, 0]), float(outs[s, b, 0, 1])
        expect(abs(ones - 1) < 1e-3 and abs(size - round(size)) < 1e-3,
               "each partial is a normalised attention over its range: out = acc / l, lse = m + log(l)",
               input=shown_input, expected="with equal scores and v = (1, position): out[..., 0] = 1, "
               "exp(lse) = the range's size", got=f"split {s} of sequence {b}: out {outs[s, b, 0].tolist()}, "
               f"lse {lse:.6g}")
        size = round(size)
        found.append((round(mean - (size - 1) / 2), size))
    return found


@kata_test(level=3, category="correctness", weight=2,
           description="each sequence's keys are cut into num_splits contiguous ranges of sizes differing by <= 1")
def test_decode_split_ranges_are_balanced(solution, reference):
    for lens, num_splits in (([5, 9, 1], 4), ([7, 0, 2], 3), ([10, 3], 1), ([12, 11], 5), ([6], 6)):
        case = _position_case(lens, num_splits)
        _, spy = _decode_with_spy(solution, reference, case)
        outs, lses = _check_partials_shape(spy, case)
        for b, n in enumerate(lens):
            ranges = _ranges_of(outs, lses, b, decode_shown(case))
            sizes = sorted(size for _, size in ranges)
            covered = sorted(t for start, size in ranges for t in range(start, start + size))
            rule = ("the keys of each sequence are cut into num_splits contiguous ranges covering its tokens "
                    "once, with sizes differing by at most one (empty ranges only when seq_lens[b] < num_splits)")
            expect(covered == list(range(n)) and sizes[-1] - sizes[0] <= 1, rule,
                   input=f"seq_lens={lens}, num_splits={num_splits}",
                   expected=f"sequence {b}: {num_splits} ranges of sizes {sorted([n // num_splits + 1] * (n % num_splits) + [n // num_splits] * (num_splits - n % num_splits))} covering 0..{n - 1}",
                   got=f"ranges (start, size) {sorted(ranges)}")


@kata_test(level=3, category="api contract", weight=1,
           description="block tables and lengths may each be int32 or int64, also one of each")
@settings(max_examples=4)
@given(case=decode_cases(dtypes=(torch.float32,), index_dtype=torch.int32))
def test_decode_accepts_int32_and_int64_indices(solution, case):
    for table_index, lens_index in itertools.product((torch.int32, torch.int64), repeat=2):
        typed = {**case, "block_table": case["block_table"].to(table_index),
                 "seq_lens": case["seq_lens"].to(lens_index)}
        rule = (f"block_table and seq_lens are each int32 or int64, independently (here an {str(table_index)[6:]} "
                f"table and {str(lens_index)[6:]} lengths)")
        try:
            _check_decode(solution, typed, DECODE_RULE + f" ({rule})")
        except ValueError as exc:
            raise PropertyFailure(rule + ": valid input, no ValueError", input=decode_shown(typed),
                                  expected="the dense attention of each sequence", got=f"ValueError: {exc}") from None


@kata_test(level=3, category="api contract", weight=1, description="flash_decode never modifies its inputs")
def test_decode_inputs_are_not_modified(solution):
    case = {"q": randn(1, (2, 2, 3), torch.float16), "k_cache": randn(2, (5, 2, 1, 3), torch.float16),
            "v_cache": randn(3, (5, 2, 1, 3), torch.float16),
            "block_table": torch.tensor([[4, 2, 9], [1, 0, 3]]), "seq_lens": torch.tensor([3, 5])}
    case["k_cache"][3, 1] = float("nan")  # a slot no sequence owns
    before = {name: t.clone() for name, t in case.items()}
    call(solution.flash_decode, *case.values(), num_splits=2, what="flash_decode()")
    for name, t in case.items():
        expect(torch.equal(t.nan_to_num(7.0), before[name].nan_to_num(7.0)), f"flash_decode leaves {name} unchanged",
               input=readable(before), expected=readable(before[name]), got=readable(t))


@kata_test(level=3, category="api contract", weight=1,
           description="ValueError for bad index dtypes, lengths out of range, num_splits < 1, bad shapes")
def test_decode_rejects_bad_arguments(solution):
    q, cache, table, lens = torch.zeros(2, 2, 3), torch.zeros(4, 2, 1, 3), torch.tensor([[0, 1], [2, 3]]), torch.tensor([3, 4])
    bad = {
        "float block_table": dict(block_table=table.float()),
        "int16 seq_lens": dict(seq_lens=lens.to(torch.int16)),
        "int16 block_table": dict(block_table=table.to(torch.int16)),
        "uint8 seq_lens": dict(seq_lens=lens.to(torch.uint8)),
        "seq_lens[b] > max_blocks * block_size": dict(seq_lens=torch.tensor([3, 5])),
        "seq_lens[b] < 0": dict(seq_lens=torch.tensor([-1, 2])),
        "num_splits = 0": dict(num_splits=0),
        "q not 3-D": dict(q=torch.zeros(2, 2, 1, 3)),
        "caches not 4-D": dict(k_cache=torch.zeros(4, 2, 3), v_cache=torch.zeros(4, 2, 3)),
        "v_cache's D differs from k_cache's": dict(v_cache=torch.zeros(4, 2, 1, 4)),
        "q's D differs from the cache's": dict(q=torch.zeros(2, 2, 4)),
        "D = 0": dict(q=torch.zeros(2, 2, 0), k_cache=torch.zeros(4, 2, 1, 0), v_cache=torch.zeros(4, 2, 1, 0)),
        "H % H_kv != 0": dict(q=torch.zeros(2, 3, 3), k_cache=torch.zeros(4, 2, 2, 3), v_cache=torch.zeros(4, 2, 2, 3)),
        "block_table with another B": dict(block_table=table[:1]),
        "seq_lens with another B": dict(seq_lens=torch.tensor([3, 4, 1])),
    }
    for what, change in bad.items():
        args = {"q": q, "k_cache": cache, "v_cache": cache, "block_table": table, "seq_lens": lens, "num_splits": 2,
                **change}
        ok, got = raises_value_error(lambda: solution.flash_decode(
            args["q"], args["k_cache"], args["v_cache"], args["block_table"], args["seq_lens"],
            num_splits=args["num_splits"]), "flash_decode()")
        shapes = {k: (tuple(v.shape), str(v.dtype)[6:]) if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        expect(ok, f"flash_decode: ValueError for {what}", input=shapes, expected="ValueError", got=got)


def _decode_ops(solution: Any, batch: int, seq_len: int) -> int:
    block_size, H, H_kv, D = 16, 4, 2, 8
    max_blocks = seq_len // block_size
    gen = torch.Generator().manual_seed(batch * 1000 + seq_len)
    cache = torch.randn(batch * max_blocks, block_size, H_kv, D, generator=gen)
    table = torch.randperm(batch * max_blocks, generator=gen).reshape(batch, max_blocks)
    lens = torch.randint(seq_len // 2, seq_len + 1, (batch,), generator=gen)
    q = torch.randn(batch, H, D, generator=gen)
    return count_ops(lambda: call(solution.flash_decode, q, cache, cache, table, lens, num_splits=4,
                                  what="flash_decode()"))


@kata_test(level=3, category="efficiency", weight=2,
           description="vectorised: the operation count is the same for B = 2 and 8 and for lengths 64 and 512")
def test_decode_is_vectorised(solution):
    base = _decode_ops(solution, 2, 64)
    for what, (batch, seq_len) in {"B = 8": (8, 64), "lengths up to 512": (2, 512)}.items():
        grown = _decode_ops(solution, batch, seq_len)
        expect(grown == base, f"the number of tensor operations does not change with {what} (loops over "
               "splits are fine; loops over sequences, blocks or tokens are not)",
               input=f"B=2, lengths <= 64 vs B={batch}, lengths <= {seq_len} (num_splits=4)",
               expected=f"{base} operations", got=f"{grown} operations")
