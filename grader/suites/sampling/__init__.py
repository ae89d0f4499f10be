"""Hidden suite for the `sampling` kata: top-k / top-p filtering and temperature sampling
(level 1), beam search with a length penalty (level 2), speculative-decoding verification
(level 3).

    chi_square.py    Pearson chi-square goodness-of-fit tests, their false-alarm budget
    strategies.py    logits batches, filter/sample/verify runners, speculative cases
    beam_models.py   TinyModel (the step_fn callback), beam cases, comparison helpers
    test_level1.py   RULES map + top_k_top_p_filter and sample
    test_level2.py   RULES map + beam_search
    test_level3.py   RULES map + speculative_verify

Sampling is graded by its distribution on fixed generator seeds, never seed for seed against
the reference; every rule whose effect is deterministic (a token of probability 0 or 1, a
draw that must come from the caller's generator) is checked on a constructed case, so its
verdict does not depend on the hypothesis seed.
"""
