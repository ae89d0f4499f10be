"""Hidden suite for kv-budget: the physical ledger of serving a Llama-style model.

Level 1 counts parameters (against Hugging Face's Llama parameter table), weight bytes and
KV bytes per token per GPU under tensor parallelism; level 2 grades capacity (KV tokens that
fit, whole blocks, concurrent sequences); level 3 the roofline time of decode and prefill,
with its properties (monotone, GQA, the crossover batch). Values are checked against exact
fractions; floors are never drawn on a rounding boundary.

    llama_params.py  the parameter-count oracle: Hugging Face's Llama parameter table, by name
    strategies.py    strategies, the exact ledger oracle, helpers
    test_level1.py   RULES map + param_count, weight_bytes, kv_bytes_per_token
    test_level2.py   RULES map + max_kv_tokens, max_concurrent_seqs
    test_level3.py   RULES map + decode_step_time, prefill_time
"""
