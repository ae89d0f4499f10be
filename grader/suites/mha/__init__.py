"""Hidden suite of the mha kata: attention() with masks, bottom-right causality and
half-precision numerics (level 1), MultiHeadAttention with grouped-query attention
(level 2), KVCache and incremental decoding (level 3).

Files:
    strategies.py   hypothesis strategies (q/k/v cases, masks in every broadcast form,
                    module configs) and the constructed cases the targeted tests use
    checks.py       comparisons with the reference (computed in float64), readable
                    rendering of 4-D tensors, candidate calls through the proxy
    lockstep.py     the cached-decoding state machine (candidate decodes, reference runs
                    the whole sequence)
    test_level1.py  RULES map + attention() tests
    test_level2.py  RULES map + MultiHeadAttention tests
    test_level3.py  RULES map + KVCache / cached decoding tests

Expected values come from the reference run in float64 on the same inputs, then cast to
the input dtype, so half precision is judged against an exact computation (never against
SDPA's CPU half path). Random inputs are small (sizes 1-4) with values rounded to one
decimal so shrunk counterexamples stay readable; every rare-but-legal option (scale=0.0,
each mask broadcast form, Tq != Tk, fully masked rows, each dtype, each GQA group size)
also has a constructed case that runs under every seed.
"""
