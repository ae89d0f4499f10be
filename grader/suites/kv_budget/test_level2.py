"""Level 2 — capacity: KV tokens that fit on each GPU after the reserve and the weights,
whole blocks, and the number of sequences of a context length that fit at once.

Each rule of the statement for this level, and each error it names, maps to the test that
builds the situation where that rule decides the outcome; random serving cases come on top.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from grader.protocol import call, kata_test
from grader.suites.kv_budget.strategies import (H100, LLAMA3_70B, LLAMA3_8B, case_text, expect_accepted,
                                                expect_int, expect_value_error, make_gpu, make_spec, nudged,
                                                serving_cases, tokens, weight_bytes)

RULES = {
    "max_kv_tokens = floor((hbm_bytes · (1 - reserve_fraction) - weight_bytes) / kv_bytes_per_token), an int":
        "test_max_kv_tokens_matches",
    "with a block_size, whole blocks only: floor(free / (kv_bytes_per_token · block_size)) · block_size":
        "test_max_kv_tokens_in_whole_blocks",
    "reserve_fraction = 0.0 is valid: no reserve": "test_zero_reserve_means_no_reserve",
    "max_concurrent_seqs: each sequence holds ceil(context_len / block_size) whole blocks (exactly "
    "context_len tokens when block_size is None)": "test_max_concurrent_seqs_matches",
    "a sequence one token past a block boundary takes a whole extra block":
        "test_sequences_round_up_to_whole_blocks",
    "ValueError when the weights alone do not fit; weights filling the usable HBM exactly leave 0 tokens":
        "test_weights_that_do_not_fit",
    "defaults: tp=1, reserve_fraction=0.1, block_size None (max_kv_tokens) and 16 (max_concurrent_seqs)":
        "test_capacity_defaults",
    "ValueError: reserve_fraction outside [0, 1), block_size < 1, context_len < 1":
        "test_capacity_rejects_bad_arguments",
    "ValueError (max_kv_tokens and max_concurrent_seqs, as in level 1): tp < 1, or tp not dividing n_heads, "
    "n_kv_heads and d_ff": "test_capacity_rejects_bad_tp",
    "0 is an answer, not an error: free bytes short of one block give 0 tokens in blocks, and a context_len "
    "beyond the pool gives 0 sequences": "test_no_room_gives_zero_not_an_error",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'max_kv_tokens = floor((hbm_bytes · (1 - reserve_fraction) - weight_bytes) / '
    'kv_bytes_per_token), an int':
        'free-memory',
    'with a block_size, whole blocks only: floor(free / (kv_bytes_per_token · '
    'block_size)) · block_size':
        'whole-blocks',
    'reserve_fraction = 0.0 is valid: no reserve':
        'capacity-errors',
    'max_concurrent_seqs: each sequence holds ceil(context_len / block_size) whole blocks'
    ' (exactly context_len tokens when block_size is None)':
        ('whole-blocks', 'unpaged'),
    'a sequence one token past a block boundary takes a whole extra block':
        'whole-blocks',
    'ValueError when the weights alone do not fit; weights filling the usable HBM exactly'
    ' leave 0 tokens':
        'zero',
    'defaults: tp=1, reserve_fraction=0.1, block_size None (max_kv_tokens) and 16 '
    '(max_concurrent_seqs)':
        'ask',
    'ValueError: reserve_fraction outside [0, 1), block_size < 1, context_len < 1':
        'capacity-errors',
    'ValueError (max_kv_tokens and max_concurrent_seqs, as in level 1): tp < 1, or tp not'
    ' dividing n_heads, n_kv_heads and d_ff':
        'capacity-errors',
    '0 is an answer, not an error: free bytes short of one block give 0 tokens in blocks,'
    ' and a context_len beyond the pool gives 0 sequences':
        'zero',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS = {
    '0 is an answer, not an error: free bytes short of one block give 0 tokens in blocks,'
    ' and a context_len beyond the pool gives 0 sequences',
    'reserve_fraction = 0.0 is valid: no reserve',
}


def _max_kv_tokens(solution, case, **kwargs):
    return call(solution.max_kv_tokens, make_spec(solution, case["spec"]), make_gpu(solution, case["gpu"]),
                case["bpp"], case["bpe"], tp=case["tp"], reserve_fraction=case["reserve_fraction"],
                what="max_kv_tokens()", **kwargs)


def _max_seqs(solution, case, context_len, **kwargs):
    return call(solution.max_concurrent_seqs, make_spec(solution, case["spec"]), make_gpu(solution, case["gpu"]),
                context_len, case["bpp"], case["bpe"], tp=case["tp"], reserve_fraction=case["reserve_fraction"],
                what="max_concurrent_seqs()", **kwargs)


@kata_test(level=2, category="correctness", weight=3,
           description="max_kv_tokens: the KV tokens that fit on each GPU after the reserve and the weights")
@settings(max_examples=25)
@given(case=serving_cases())
def test_max_kv_tokens_matches(solution, case):
    got = _max_kv_tokens(solution, case)
    expect_int(got, tokens(case, None), "max_kv_tokens = floor((hbm_bytes · (1 - reserve_fraction) - "
               "weight_bytes) / kv_bytes_per_token), an int", input=case_text(case))


@kata_test(level=2, category="correctness", weight=2,
           description="with a block_size, max_kv_tokens counts whole blocks only")
@settings(max_examples=15)
@given(case=serving_cases(), block_size=st.sampled_from([1, 16]))
def test_max_kv_tokens_in_whole_blocks(solution, case, block_size):
    got = _max_kv_tokens(solution, case, block_size=block_size)
    expect_int(got, tokens(case, block_size), "with a block_size the pool holds whole blocks: "
               "floor(free / (kv_bytes_per_token · block_size)) · block_size",
               input=case_text(case, block_size=block_size))


@kata_test(level=2, category="edge cases", weight=1,
           description="reserve_fraction=0.0 is valid and means no reserve (not the default 0.1)")
def test_zero_reserve_means_no_reserve(solution):
    case = nudged({"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0,
                   "reserve_fraction": 0.0})
    for block_size in (None, 16):
        got = _max_kv_tokens(solution, case, block_size=block_size)
        expect_int(got, tokens(case, block_size), "reserve_fraction=0.0 keeps no reserve (0.0 is a value, "
                   "not 'not given')", input=case_text(case, block_size=block_size))


@kata_test(level=2, category="correctness", weight=3,
           description="max_concurrent_seqs: sequences of context_len tokens whose KV caches fit at once")
@settings(max_examples=20)
@given(case=serving_cases(), context_len=st.integers(1, 40000), block_size=st.sampled_from([None, 1, 16, 32]))
def test_max_concurrent_seqs_matches(solution, case, context_len, block_size):
    got = _max_seqs(solution, case, context_len, block_size=block_size)
    if block_size is None:
        want = tokens(case, None) // context_len
    else:
        want = (tokens(case, block_size) // block_size) // -(-context_len // block_size)
    expect_int(got, want, "each sequence holds ceil(context_len / block_size) whole blocks (context_len "
               "tokens when block_size is None); max_concurrent_seqs is how many such sequences fit",
               input=case_text(case, context_len=context_len, block_size=block_size))


@kata_test(level=2, category="edge cases", weight=2,
           description="a sequence one token past a block boundary takes a whole extra block")
def test_sequences_round_up_to_whole_blocks(solution):
    case = nudged({"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0,
                   "reserve_fraction": 0.1})
    blocks = tokens(case, 16) // 16
    for context_len in (16, 17, 31, 32, 33, 8192, 8193):
        got = _max_seqs(solution, case, context_len, block_size=16)
        expect_int(got, blocks // -(-context_len // 16), f"context_len={context_len} needs "
                   f"ceil({context_len} / 16) = {-(-context_len // 16)} blocks per sequence ({blocks} blocks fit)",
                   input=case_text(case, context_len=context_len, block_size=16))
    got = _max_seqs(solution, case, 8193)  # the default block_size is 16
    expect_int(got, blocks // 513, "the default block_size is 16", input=case_text(case, context_len=8193))


@kata_test(level=2, category="api contract", weight=1,
           description="the defaults: tp=1, reserve_fraction=0.1, block_size None (max_kv_tokens) or 16 (seqs)")
def test_capacity_defaults(solution):
    case = nudged({"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0,
                   "reserve_fraction": 0.1})
    shown = {**case_text(case), "tp": "(not given)", "reserve_fraction": "(not given)", "block_size": "(not given)"}
    got = call(solution.max_kv_tokens, make_spec(solution, case["spec"]), make_gpu(solution, case["gpu"]),
               case["bpp"], case["bpe"], what="max_kv_tokens()")
    expect_int(got, tokens(case, None), "max_kv_tokens defaults to tp=1, reserve_fraction=0.1 and no block_size",
               input=shown)
    context_len = 8193
    got = call(solution.max_concurrent_seqs, make_spec(solution, case["spec"]), make_gpu(solution, case["gpu"]),
               context_len, case["bpp"], case["bpe"], what="max_concurrent_seqs()")
    expect_int(got, (tokens(case, 16) // 16) // 513, "max_concurrent_seqs defaults to tp=1, reserve_fraction=0.1 "
               "and block_size=16", input={**shown, "context_len": context_len})


@kata_test(level=2, category="api contract", weight=2,
           description="ValueError when the weights alone do not fit; weights filling HBM exactly leave 0 tokens")
def test_weights_that_do_not_fit(solution):
    big = {"spec": dict(LLAMA3_70B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0, "reserve_fraction": 0.1}
    for name, fn in (("max_kv_tokens", lambda: _max_kv_tokens(solution, big)),
                     ("max_concurrent_seqs", lambda: _max_seqs(solution, big, 1024))):
        expect_value_error(fn, f"{name}: ValueError when the weights alone do not fit (141 GB of weights on "
                           "one 80 GB GPU)", input=case_text(big), what=f"{name}()")
    # one byte too many, then exactly full: usable = weights
    spec = dict(n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=128, vocab_size=256)
    weights = float(weight_bytes(spec, 2.0, 1))
    for hbm, fits in ((weights - 1.0, False), (weights, True)):
        case = {"spec": spec, "tp": 1, "gpu": dict(H100, hbm_bytes=hbm), "bpp": 2.0, "bpe": 2.0, "reserve_fraction": 0.0}
        if fits:
            expect_int(_max_kv_tokens(solution, case), 0, "weights that fill the usable HBM exactly leave 0 tokens "
                       "(no error)", input=case_text(case))
        else:
            expect_value_error(lambda: _max_kv_tokens(solution, case), "ValueError when the weights need one byte "
                               "more than the usable HBM", input=case_text(case), what="max_kv_tokens()")


@kata_test(level=2, category="api contract", weight=1,
           description="ValueError for reserve_fraction outside [0, 1), block_size < 1, context_len < 1")
def test_capacity_rejects_bad_arguments(solution):
    case = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0, "reserve_fraction": 0.1}
    bad = [("reserve_fraction = 1.0", lambda: call(solution.max_kv_tokens, make_spec(solution, case["spec"]),
                                                   make_gpu(solution, case["gpu"]), 2.0, 2.0, reserve_fraction=1.0,
                                                   what="max_kv_tokens()")),
           ("reserve_fraction = -0.1", lambda: call(solution.max_kv_tokens, make_spec(solution, case["spec"]),
                                                    make_gpu(solution, case["gpu"]), 2.0, 2.0, reserve_fraction=-0.1,
                                                    what="max_kv_tokens()")),
           ("block_size = 0 (max_kv_tokens)", lambda: _max_kv_tokens(solution, case, block_size=0)),
           ("block_size = 0 (max_concurrent_seqs)", lambda: _max_seqs(solution, case, 100, block_size=0)),
           ("context_len = 0", lambda: _max_seqs(solution, case, 0)),
           ("context_len = -5", lambda: _max_seqs(solution, case, -5, block_size=None))]
    for why, fn in bad:
        expect_value_error(fn, f"ValueError when {why}", input=case_text(case), what="capacity")


@kata_test(level=2, category="api contract", weight=1,
           description="max_kv_tokens and max_concurrent_seqs raise ValueError for a bad tp, as in level 1")
def test_capacity_rejects_bad_tp(solution):
    # Llama-3-8B: 32 heads, 8 KV heads, d_ff 14336; tp = 16 divides n_heads and d_ff but not n_kv_heads
    case = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0, "reserve_fraction": 0.1}
    bad = {0: "tp = 0", -1: "tp = -1 < 1", 3: "tp = 3 does not divide n_heads = 32",
           16: "tp = 16 does not divide n_kv_heads = 8"}
    for tp, why in bad.items():
        bad_case = {**case, "tp": tp}
        for name, fn in (("max_kv_tokens", lambda: _max_kv_tokens(solution, bad_case)),
                         ("max_concurrent_seqs", lambda: _max_seqs(solution, bad_case, 1024))):
            expect_value_error(fn, f"{name}: ValueError when {why} (every function taking tp checks it)",
                               input=case_text(bad_case), what=f"{name}()")


@kata_test(level=2, category="edge cases", weight=1,
           description="no room for a block or a sequence gives 0 (an int), not a ValueError")
def test_no_room_gives_zero_not_an_error(solution):
    # 256 KV bytes per token; HBM holds the weights and 5.5 tokens (less than one block of 16), or the
    # weights exactly; Llama-3-8B on an H100 holds 426,784 tokens, fewer than one 500,000-token sequence.
    spec = dict(n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=128, vocab_size=256)
    weights = float(weight_bytes(spec, 2.0, 1))
    small = [{"spec": spec, "tp": 1, "gpu": dict(H100, hbm_bytes=hbm), "bpp": 2.0, "bpe": 2.0,
              "reserve_fraction": 0.0} for hbm in (weights + 5.5 * 256, weights)]
    llama = {"spec": dict(LLAMA3_8B), "tp": 1, "gpu": dict(H100), "bpp": 2.0, "bpe": 2.0, "reserve_fraction": 0.1}
    block_rule = "max_kv_tokens: fewer free bytes than one block hold 0 whole blocks (0 is an answer, not an error)"
    seq_rule = "max_concurrent_seqs: when not one sequence of context_len tokens fits, 0 sequences fit (not an error)"
    checks = []
    for case in small:   # 5.5 tokens, then 0 tokens of room
        checks.append((block_rule, case_text(case, block_size=16),
                       lambda case=case: _max_kv_tokens(solution, case, block_size=16)))
        checks.append((seq_rule, case_text(case, context_len=1, block_size=16),
                       lambda case=case: _max_seqs(solution, case, 1, block_size=16)))
        checks.append((seq_rule, case_text(case, context_len=6, block_size=None),
                       lambda case=case: _max_seqs(solution, case, 6, block_size=None)))
    for block_size in (16, None):
        checks.append((seq_rule, case_text(llama, context_len=500_000, block_size=block_size),
                       lambda block_size=block_size: _max_seqs(solution, llama, 500_000, block_size=block_size)))
    for prop, shown, fn in checks:
        expect_int(expect_accepted(fn, prop, input=shown), 0, prop, input=shown)
