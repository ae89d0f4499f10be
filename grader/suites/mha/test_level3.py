"""Level 3 of mha: KVCache and incremental decoding — the cache appends and returns
everything, a prompt then its continuation (token by token or in chunks) equals one
causal pass, masks cover every cached key, a rejected call leaves the cache as it was,
nothing leaks between caches or calls."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import example, given, settings, strategies as st

from grader.protocol import PropertyFailure, call, expect, kata_test
from grader.suites._common import count_ops
from grader.suites.mha.checks import (MODULE_TOLERANCE, close, forward, kept, module_pair,
                                      raises_value_error, readable, reference_forward)
from grader.suites.mha.lockstep import run_cached_decoding
from grader.suites.mha.strategies import (ALL_DTYPES, GROUP_CONFIGS, mha_configs, mha_input, randn,
                                          seeds, sizes)

RULES = {
    "a new KVCache has seq_len 0, an int":
        ("test_kvcache_update_returns_all_tokens", "test_kvcache_edge_chunks_and_dtypes"),
    "update appends along time and returns all cached (k, v), in order; seq_len counts the tokens":
        ("test_kvcache_update_returns_all_tokens", "test_kvcache_edge_chunks_and_dtypes"),
    "an empty chunk appends nothing; the cache keeps its tensors' dtype (float16 to float64)":
        "test_kvcache_edge_chunks_and_dtypes",
    "each KVCache holds only what was passed to its own update": "test_caches_are_independent",
    "forward(x, kv_cache=cache) projects x, appends its keys and values, attends over everything "
    "cached; prompt then continuation with is_causal=True equals one causal pass":
        ("test_decode_token_by_token_every_group_size", "test_cached_decoding_matches_full_pass"),
    "with a cache, attn_mask covers all cached keys: (..., T, seq_len)": "test_cached_forward_masks_all_keys",
    "with a cache, ValueError for a mask whose key axis is not seq_len after the update (the new "
    "tokens only, the cached tokens only, too many)": "test_cached_forward_rejects_mask_not_over_all_keys",
    "a module reused with a fresh cache, or without one, starts over: nothing leaks from earlier calls":
        "test_module_reused_with_fresh_cache",
    "a cached forward that raises (a bad mask, a mask of a bad shape) leaves the cache as it was: "
    "seq_len, keys and values; the next call continues from it": "test_cached_forward_after_rejected_call",
    "a decode step does no work per cached token in Python": "test_decode_step_has_no_loop_over_cache",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'a new KVCache has seq_len 0, an int':
        'cache-update',
    'update appends along time and returns all cached (k, v), in order; seq_len counts '
    'the tokens':
        'cache-update',
    "an empty chunk appends nothing; the cache keeps its tensors' dtype (float16 to "
    'float64)':
        'cache-update',
    'each KVCache holds only what was passed to its own update':
        'cache-ownership',
    'forward(x, kv_cache=cache) projects x, appends its keys and values, attends over '
    'everything cached; prompt then continuation with is_causal=True equals one causal '
    'pass':
        'cache-forward',
    'with a cache, attn_mask covers all cached keys: (..., T, seq_len)':
        'cache-mask',
    'with a cache, ValueError for a mask whose key axis is not seq_len after the update '
    '(the new tokens only, the cached tokens only, too many)':
        'cache-mask',
    'a module reused with a fresh cache, or without one, starts over: nothing leaks from '
    'earlier calls':
        'cache-ownership',
    'a cached forward that raises (a bad mask, a mask of a bad shape) leaves the cache as '
    'it was: seq_len, keys and values; the next call continues from it':
        'cache-rejected',
    'a decode step does no work per cached token in Python':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# A rejected call that grew the cache before the mask was checked is an ordering slip (the
# strong exception guarantee), not a wrong cache: the rejection itself is core. The
# empty-chunk and dtype rule shares its test with the core rules of update, so it stays core.
DETAILS = {
    'a cached forward that raises (a bad mask, a mask of a bad shape) leaves the cache as '
    'it was: seq_len, keys and values; the next call continues from it',
}


def _update(cache: Any, k_new: torch.Tensor, v_new: torch.Tensor) -> Any:
    return call(cache.update, k_new.clone(), v_new.clone(), what="KVCache.update()")


def _seq_len(cache: Any) -> Any:
    return call(lambda: cache.seq_len, what="KVCache.seq_len")


def _expect_cache_holds(cache: Any, result: Any, keys: list, values: list, shown_input: dict) -> None:
    expect(isinstance(result, tuple) and len(result) == 2, "update returns a (k, v) tuple",
           input=readable(shown_input), got=type(result).__name__)
    close(result[0], torch.cat(keys, dim=2), "update returns all cached keys, in order", input=shown_input)
    close(result[1], torch.cat(values, dim=2), "update returns all cached values, in order", input=shown_input)
    total = sum(k.shape[2] for k in keys)
    seq_len = _seq_len(cache)
    expect(seq_len == total and isinstance(seq_len, int), "seq_len counts every appended token (an int)",
           input=readable(shown_input), expected=total, got=seq_len)


@kata_test(level=3, category="correctness", weight=2,
           description="KVCache.update appends along time and returns everything cached; seq_len counts tokens")
@settings(max_examples=15)
@given(batch=sizes, n_kv_heads=sizes, head_dim=sizes, chunks=st.lists(st.integers(1, 3), min_size=1, max_size=4),
       seed=seeds)
def test_kvcache_update_returns_all_tokens(solution, batch, n_kv_heads, head_dim, chunks, seed):
    cache = call(solution.KVCache, what="KVCache()")
    seq_len = _seq_len(cache)
    expect(seq_len == 0 and isinstance(seq_len, int), "a new cache has seq_len 0 (an int)", expected=0, got=seq_len)
    keys, values = [], []
    for i, num_new in enumerate(chunks):
        keys.append(randn(seed + 2 * i, (batch, n_kv_heads, num_new, head_dim)))
        values.append(randn(seed + 2 * i + 1, (batch, n_kv_heads, num_new, head_dim + 1)))
        result = _update(cache, keys[-1], values[-1])
        _expect_cache_holds(cache, result, keys, values,
                            {"chunk sizes so far": chunks[: i + 1], "k_new": keys[-1], "v_new": values[-1]})


@kata_test(level=3, category="edge cases", weight=1,
           description="KVCache with empty chunks and in every dtype (float16 to float64)")
def test_kvcache_edge_chunks_and_dtypes(solution):
    for dtype in ALL_DTYPES:
        cache = call(solution.KVCache, what="KVCache()")
        keys, values = [], []
        for i, num_new in enumerate((0, 2, 0, 1, 3)):  # empty first and in the middle
            keys.append(randn(80 + i, (2, 2, num_new, 3), dtype))
            values.append(randn(90 + i, (2, 2, num_new, 2), dtype))
            result = _update(cache, keys[-1], values[-1])
            _expect_cache_holds(cache, result, keys, values,
                                {"dtype": str(dtype)[6:], "chunk sizes so far": [k.shape[2] for k in keys]})


@kata_test(level=3, category="correctness", weight=1,
           description="two caches used in turn each hold only their own tokens")
def test_caches_are_independent(solution):
    first, second = call(solution.KVCache, what="KVCache()"), call(solution.KVCache, what="KVCache()")
    mine: dict[str, tuple[list, list]] = {"first": ([], []), "second": ([], [])}
    for i, (name, num_new) in enumerate((("first", 2), ("second", 1), ("first", 1), ("second", 3))):
        cache = first if name == "first" else second
        keys, values = mine[name]
        keys.append(randn(100 + i, (1, 2, num_new, 2)))
        values.append(randn(110 + i, (1, 2, num_new, 2)))
        result = _update(cache, keys[-1], values[-1])
        _expect_cache_holds(cache, result, keys, values,
                            {"calls": "first.update(2 tokens), second.update(1), first.update(1), second.update(3)",
                             "this call": f"{name}.update({num_new} tokens)",
                             "rule": "a cache holds only what was passed to its own update"})


@kata_test(level=3, category="correctness", weight=3,
           description="prompt then continuation in chunks (decode or chunked prefill) with a cache equals one causal pass")
def test_cached_decoding_matches_full_pass(solution, reference):
    run_cached_decoding(solution, reference, max_examples=12, steps=5)


def _decode(solution: Any, cand: Any, x: torch.Tensor, chunks: tuple[int, ...]) -> list:
    cache = call(solution.KVCache, what="KVCache()")
    outputs, start = [], 0
    for num_tokens in chunks:
        out = forward(cand, x[:, start:start + num_tokens], what="forward(x, is_causal=True, kv_cache=cache)",
                      is_causal=True, kv_cache=cache)
        expect(isinstance(out, torch.Tensor), "forward returns a tensor", got=type(out).__name__)
        outputs.append(out.detach())
        start += num_tokens
    return outputs


def _expect_decoding(solution: Any, cand: Any, ref: Any, config: dict, x: torch.Tensor,
                     chunks: tuple[int, ...], what: str) -> None:
    atol, rtol = MODULE_TOLERANCE[x.dtype]
    got = torch.cat(_decode(solution, cand, x, chunks), dim=1)
    close(got, reference_forward(ref, x, x.dtype, is_causal=True),
          f"{what}: the prompt then its continuation with a cache equals one causal forward",
          input={"module": {k: v for k, v in config.items() if k != "seed"}, "chunk sizes": chunks, "x": x},
          atol=atol, rtol=rtol)


@kata_test(level=3, category="correctness", weight=2,
           description="token-by-token decoding and chunked prefill for every group size and dtype")
def test_decode_token_by_token_every_group_size(solution, reference):
    for i, (d_model, n_heads, n_kv_heads) in enumerate(GROUP_CONFIGS[1:5]):
        config = {"d_model": d_model, "n_heads": n_heads, "n_kv_heads": n_kv_heads, "bias": True, "seed": i}
        cand, ref = module_pair(solution, reference, **config)
        x = randn(120 + i, (2, 6, d_model), torch.float64)
        _expect_decoding(solution, cand, ref, config, x, (3, 1, 1, 1),
                         f"n_heads={n_heads}, n_kv_heads={n_kv_heads}, one token at a time")
        _expect_decoding(solution, cand, ref, config, x, (2, 3, 1), f"n_heads={n_heads}, "
                         f"n_kv_heads={n_kv_heads}, chunked prefill")
    config = {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "bias": False, "seed": 7}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        cand, ref = module_pair(solution, reference, **config, dtype=dtype)
        x = randn(130, (1, 5, 8), dtype)
        _expect_decoding(solution, cand, ref, config, x, (2, 1, 1, 1), f"{str(dtype)[6:]} module")


@kata_test(level=3, category="correctness", weight=1,
           description="with a cache, attn_mask covers all cached keys: (..., T_new, seq_len)")
@settings(max_examples=10)
@given(config=mha_configs(), prompt_len=sizes, num_new=sizes, seed=seeds, use_float=st.booleans())
@example(config={"d_model": 4, "n_heads": 2, "n_kv_heads": 1, "bias": False, "seed": 0},
         prompt_len=3, num_new=2, seed=1, use_float=False)
@example(config={"d_model": 4, "n_heads": 2, "n_kv_heads": 1, "bias": False, "seed": 0},
         prompt_len=2, num_new=1, seed=2, use_float=True)
def test_cached_forward_masks_all_keys(solution, reference, config, prompt_len, num_new, seed, use_float):
    cand, ref = module_pair(solution, reference, **config)
    cand_cache, ref_cache = call(solution.KVCache, what="KVCache()"), reference.KVCache()
    prompt, new = mha_input(config, 1, prompt_len, seed, torch.float64), mha_input(config, 1, num_new, seed + 1, torch.float64)
    forward(cand, prompt, is_causal=True, kv_cache=cand_cache)
    with torch.no_grad():
        ref(prompt, is_causal=True, kv_cache=ref_cache)
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(num_new, prompt_len + num_new, generator=gen) < 0.6
    mask[:, 0] = ~mask[:, -1]  # each row keeps a cached key or a new one, and drops the other
    if use_float:
        mask = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    got = forward(cand, new, attn_mask=mask, kv_cache=cand_cache)
    with torch.no_grad():
        expected = ref(new, attn_mask=mask, kv_cache=ref_cache)
    close(got, expected, "new tokens attend the cached keys the mask allows",
          input={"module": config, "prompt": prompt, "new tokens": new, "attn_mask": mask})


@kata_test(level=3, category="api contract", weight=0.5,
           description="with a cache, a mask that does not cover every cached key is a ValueError")
def test_cached_forward_rejects_mask_not_over_all_keys(solution, reference):
    config = {"d_model": 4, "n_heads": 2, "n_kv_heads": 1, "bias": False, "seed": 5}
    cand, ref = module_pair(solution, reference, **config)
    prompt, new = randn(150, (1, 3, 4), torch.float64), randn(151, (1, 2, 4), torch.float64)
    # 3 cached + 2 new = 5 keys: widths 2 (new only), 3 (cached before this call) and 6 are wrong.
    rejected = {"a bool mask (2, 2) over the new tokens only": torch.ones(2, 2, dtype=torch.bool),
                "a float mask (2, 2) over the new tokens only": torch.zeros(2, 2, dtype=torch.float64),
                "a bool mask (1, 1, 2, 2) over the new tokens only": torch.ones(1, 1, 2, 2, dtype=torch.bool),
                "a bool mask (2, 3) over the earlier tokens only": torch.ones(2, 3, dtype=torch.bool),
                "a float mask (2, 6), one key too many": torch.zeros(2, 6, dtype=torch.float64)}
    for what, mask in rejected.items():
        # A fresh cache each time keeps this test to the ValueError: what a rejected call
        # leaves in the cache is test_cached_forward_after_rejected_call's rule.
        cache = call(solution.KVCache, what="KVCache()")
        forward(cand, prompt, is_causal=True, kv_cache=cache)
        ok, got = raises_value_error(lambda: cand(new.clone(), attn_mask=mask.clone(), kv_cache=cache),
                                     "MultiHeadAttention.forward()")
        expect(ok, f"with 3 cached tokens and 2 new ones, {what} raises ValueError (a mask is "
               "(..., T, seq_len) with seq_len = 5 after the update, as attention() requires)",
               input={"module": {k: v for k, v in config.items() if k != "seed"}, "prompt": "3 tokens, "
                      "is_causal=True", "new tokens": "2", "attn_mask": readable(mask)},
               expected="ValueError", got=got)
    # Looking forward: the module with a new cache still decodes as one causal pass.
    _expect_decoding(solution, cand, ref, config, torch.cat([prompt, new], dim=1), (3, 2),
                     "after the rejected calls, a new cache")


def _raised(fn: Any, what: str) -> tuple[bool, str]:
    """(True, the exception's name) when fn() raises; a stub's NotImplementedError is a
    failure of its own."""
    try:
        got = fn()
    except NotImplementedError as exc:
        raise PropertyFailure(f"{what} is not implemented yet (NotImplementedError)") from exc
    except Exception as exc:  # noqa: BLE001 - any exception of candidate code counts as raising
        return True, type(exc).__name__
    return False, f"no exception (returned {type(got).__name__})"


def _cached_keys_values(cache: Any, n_kv_heads: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What the cache holds, read back through update with an empty chunk (appends nothing)."""
    empty = torch.zeros(1, n_kv_heads, 0, head_dim, dtype=torch.float64)
    result = _update(cache, empty, empty)
    expect(isinstance(result, tuple) and len(result) == 2, "update returns a (k, v) tuple",
           input="update with an empty chunk (T_new = 0)", got=type(result).__name__)
    return kept(result[0]), kept(result[1])


# Masks a cached forward rejects after a 3-token prompt, with 2 new tokens (5 keys): bad
# shapes (key axis, query axis, batch, dims) and bad masks (dtype, with is_causal).
_REJECTED_CALLS = {
    "a bool mask (2, 2) over the new tokens only": {"attn_mask": torch.ones(2, 2, dtype=torch.bool)},
    "a float mask (2, 6), one key too many": {"attn_mask": torch.zeros(2, 6, dtype=torch.float64)},
    "a bool mask (3, 5), 3 query rows for 2 new tokens": {"attn_mask": torch.ones(3, 5, dtype=torch.bool)},
    "a bool mask (2, 1, 2, 5), a batch of 2 for x's batch of 1":
        {"attn_mask": torch.ones(2, 1, 2, 5, dtype=torch.bool)},
    "a bool mask (1, 1, 1, 2, 5) with 5 dims": {"attn_mask": torch.ones(1, 1, 1, 2, 5, dtype=torch.bool)},
    "an int64 mask (2, 5)": {"attn_mask": torch.ones(2, 5, dtype=torch.int64)},
    "a bool mask (2, 5) together with is_causal=True":
        {"attn_mask": torch.ones(2, 5, dtype=torch.bool), "is_causal": True},
}


@kata_test(level=3, category="api contract", weight=0.5,
           description="a cached forward that raises leaves the cache as it was; the next call continues from it")
def test_cached_forward_after_rejected_call(solution, reference):
    """Each rejected call on a cache holding a 3-token prompt: seq_len stays 3, the cached keys
    and values stay as they were, and the continuation (2 tokens, then 1) gives what one causal
    pass over all 6 tokens gives. A call that does not raise is
    test_cached_forward_rejects_mask_not_over_all_keys's business: it is skipped here."""
    config = {"d_model": 4, "n_heads": 2, "n_kv_heads": 1, "bias": False, "seed": 6}
    cand, ref = module_pair(solution, reference, **config)
    x = randn(160, (1, 6, 4), torch.float64)
    expected = reference_forward(ref, x, torch.float64, is_causal=True)[:, 3:]
    module = {k: v for k, v in config.items() if k != "seed"}
    for what, kwargs in _REJECTED_CALLS.items():
        shown_input = {"module": module, "prompt": "3 tokens, is_causal=True, kv_cache=cache",
                       "rejected call": f"2 new tokens, kv_cache=cache, {what}",
                       **{k: readable(v) for k, v in kwargs.items()}}
        cache = call(solution.KVCache, what="KVCache()")
        forward(cand, x[:, :3], is_causal=True, kv_cache=cache)
        before = _cached_keys_values(cache, n_kv_heads=1, head_dim=2)
        clones = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        raised, _ = _raised(lambda: cand(x[:, 3:5].clone(), kv_cache=cache, **clones),
                            "MultiHeadAttention.forward()")
        if not raised:
            continue
        seq_len = _seq_len(cache)
        expect(seq_len == 3, f"a cached forward that raised ({what}) leaves seq_len as it was",
               input=readable(shown_input), expected=3, got=seq_len)
        after = _cached_keys_values(cache, n_kv_heads=1, head_dim=2)
        for name, got, kept_before in zip(("keys", "values"), after, before):
            close(got, kept_before, f"a cached forward that raised ({what}) leaves the cached {name} as they "
                  "were (read back with update of an empty chunk)", input=shown_input, atol=0.0, rtol=0.0)
        outputs = _continue(cand, x, cache)
        close(torch.cat(outputs, dim=1), expected, f"after a cached forward that raised ({what}), the "
              "next calls (2 tokens, then 1, is_causal=True) continue as if it had not happened: one causal "
              "pass over all 6 tokens", input={**shown_input, "x": x})


def _continue(cand: Any, x: torch.Tensor, cache: Any) -> list:
    """The candidate's outputs for tokens 3..4, then token 5, decoded with `cache`."""
    outputs = []
    for start, stop in ((3, 5), (5, 6)):
        out = forward(cand, x[:, start:stop], what="forward(x, is_causal=True, kv_cache=cache)",
                      is_causal=True, kv_cache=cache)
        expect(isinstance(out, torch.Tensor), "forward returns a tensor", got=type(out).__name__)
        outputs.append(out.detach())
    return outputs


@kata_test(level=3, category="correctness", weight=1,
           description="a module reused with a fresh cache (other batch size, other length) or none starts over")
def test_module_reused_with_fresh_cache(solution, reference):
    config = {"d_model": 6, "n_heads": 3, "n_kv_heads": 1, "bias": True, "seed": 11}
    cand, ref = module_pair(solution, reference, **config)
    runs = ((randn(140, (2, 4, 6), torch.float64), (3, 1)), (randn(141, (1, 5, 6), torch.float64), (2, 1, 2)),
            (randn(142, (3, 2, 6), torch.float64), (1, 1)))
    for i, (x, chunks) in enumerate(runs):
        _expect_decoding(solution, cand, ref, config, x, chunks,
                         f"sequence {i + 1} of one module, each with a new KVCache")
    x = randn(143, (2, 3, 6), torch.float64)
    close(forward(cand, x, is_causal=True), reference_forward(ref, x, torch.float64, is_causal=True),
          "after cached decoding, a call without a cache attends only over its own tokens",
          input={"module": config, "x": x, "is_causal": True})


def _decode_ops(solution: Any, cached_tokens: int) -> int:
    """Fewest operations of three consecutive decode steps after `cached_tokens` tokens: a
    cache that grows its storage now and then (amortised) is not charged for the growth."""
    torch.manual_seed(0)
    module = call(solution.MultiHeadAttention, 4, 2, 1, what="MultiHeadAttention()")
    cache = call(solution.KVCache, what="KVCache()")
    module(torch.randn(2, cached_tokens, 4), is_causal=True, kv_cache=cache)
    x = torch.randn(2, 1, 4)
    return min(count_ops(lambda: module(x, is_causal=True, kv_cache=cache)) for _ in range(3))


@kata_test(level=3, category="efficiency", weight=1,
           description="a decode step's operation count does not grow with the number of cached tokens")
def test_decode_step_has_no_loop_over_cache(solution):
    base, grown = _decode_ops(solution, 2), _decode_ops(solution, 40)
    expect(grown <= base, "the number of tensor operations of one decode step does not grow with seq_len",
           input="one new token after 2 vs 40 cached tokens (fewest of 3 steps each)",
           expected=f"<= {base} operations", got=f"{grown} operations")
