"""Hidden suite for slow-decode: make a correct but slow greedy generation loop fast.

The candidate's `generate(model, prompts, max_new_tokens, eos_id)` must return exactly the
tokens of `generate_slow` (the kata's support file, slow_decode_model.py), on a seeded
float64 TinyLM passed to it (the model crosses to the worker by value; changes to its
parameters come back, so "without changing the weights" is checked). Only inputs where every
greedy choice wins by a clear margin are used. The oracle is the reference's tokens confirmed
by one full forward pass, and the FLOP budget is counted from the shapes (see strategies.py):
the judge runs neither generate_slow nor a FLOP-counting mode.

Level 1 caches the keys and values (FLOPs at most 1.2x a cached reference's, equal-length
prompts); level 2 batches requests of different lengths (operations per decoding step do not
grow with the number of requests or heads); level 3 stops finished requests early (their
FLOPs stop the next step) with at most one host sync per decoding step.

    strategies.py    models, prompts, the oracle with its margin check, the counted FLOP
                     budget, EOS scenarios, the checks every level shares
    test_level1.py   RULES map + tokens, weights unchanged, FLOPs
    test_level2.py   RULES map + mixed prompt lengths, operations per step
    test_level3.py   RULES map + EOS, FLOPs of finished requests, syncs per step
"""
