"""Level 2 of mha: MultiHeadAttention with grouped-query attention — projections, head
split and merge, KV heads shared by consecutive query heads, argument checks.

The candidate's module gets the reference's random weights (load_state_dict), so outputs
are compared value for value with the reference module run in float64.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import call, expect, kata_test
from grader.suites._common import count_ops
from grader.suites.mha.checks import (MODULE_TOLERANCE, close, forward, module_pair,
                                      raises_value_error, reference_forward)
from grader.suites.mha.strategies import (FLOATS, GROUP_CONFIGS, bool_mask,
                                          float_mask, mha_configs, mha_input, mha_masks, randn,
                                          seeds, sizes)

RULES = {
    "parameters q_proj, k_proj, v_proj, o_proj (nn.Linear) of the stated shapes, bias=bias":
        "test_mha_parameter_names_and_shapes",
    "bias defaults to False (omitted: no bias parameters)": "test_mha_parameter_names_and_shapes",
    "n_kv_heads defaults to n_heads (omitted or None)":
        ("test_mha_parameter_names_and_shapes", "test_mha_every_group_size"),
    "head_dim = d_model // n_heads; projection features [h*head_dim, (h+1)*head_dim) are head h; "
    "heads merge back in order": ("test_mha_every_group_size", "test_mha_matches_reference"),
    "query head h reads KV head h // (n_heads // n_kv_heads) (repeat_interleave, not repeat), "
    "for every group size": ("test_gqa_equals_repeat_interleave", "test_mha_every_group_size"),
    "forward: attn_mask (bool or float) and is_causal as in attention()":
        ("test_mha_every_group_size", "test_mha_causal_forward_is_causal"),
    "ValueError: d_model % n_heads != 0 or n_heads % n_kv_heads != 0": "test_mha_rejects_bad_head_counts",
    "ValueError from forward for arguments attention() rejects; the module is unchanged by it":
        "test_mha_forward_after_rejected_call",
    "one module serves calls of any batch, length and dtype (float16 to float64), in any order":
        "test_mha_reused_across_shapes_and_dtypes",
    "no Python loop over batch, heads or tokens": "test_mha_has_no_python_loop",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'parameters q_proj, k_proj, v_proj, o_proj (nn.Linear) of the stated shapes, '
    'bias=bias':
        ('ask', 'projections'),
    'bias defaults to False (omitted: no bias parameters)':
        'ask',
    'n_kv_heads defaults to n_heads (omitted or None)':
        'kv-default',
    'head_dim = d_model // n_heads; projection features [h*head_dim, (h+1)*head_dim) are '
    'head h; heads merge back in order':
        'projections',
    'query head h reads KV head h // (n_heads // n_kv_heads) (repeat_interleave, not '
    'repeat), for every group size':
        'kv-sharing',
    'forward: attn_mask (bool or float) and is_causal as in attention()':
        'forward-masks',
    'ValueError: d_model % n_heads != 0 or n_heads % n_kv_heads != 0':
        'head-errors',
    'ValueError from forward for arguments attention() rejects; the module is unchanged '
    'by it':
        'forward-masks',
    'one module serves calls of any batch, length and dtype (float16 to float64), in any '
    'order':
        'module-reuse',
    'no Python loop over batch, heads or tokens':
        'ask',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
DETAILS: set[str] = set()

def _config(d_model: int, n_heads: int, n_kv_heads: int | None, bias: bool = True) -> dict:
    return {"d_model": d_model, "n_heads": n_heads, "n_kv_heads": n_kv_heads, "bias": bias, "seed": 3}


def _expect_forward(cand: Any, ref: Any, config: dict, x: torch.Tensor, prop: str, **kwargs: Any) -> None:
    atol, rtol = MODULE_TOLERANCE[x.dtype]
    close(forward(cand, x, **kwargs), reference_forward(ref, x, x.dtype, **kwargs), prop,
          input={"module": {k: v for k, v in config.items() if k != "seed"}, "x": x, **kwargs},
          atol=atol, rtol=rtol)


@kata_test(level=2, category="api contract", weight=1,
           description="parameters are named q_proj, k_proj, v_proj, o_proj with the stated shapes; "
                       "bias defaults to False")
def test_mha_parameter_names_and_shapes(solution):
    for d_model, n_heads, n_kv_heads, bias in ((8, 4, 2, False), (6, 3, None, True), (6, 2, 1, True),
                                               (6, 3, "omitted", False), (8, 4, 2, "omitted"),
                                               (6, 3, "omitted", "omitted")):
        args = (d_model, n_heads) if n_kv_heads == "omitted" else (d_model, n_heads, n_kv_heads)
        kwargs = {} if bias == "omitted" else {"bias": bias}
        module = call(solution.MultiHeadAttention, *args, **kwargs, what="MultiHeadAttention()")
        head_dim, kv = d_model // n_heads, n_heads if n_kv_heads in (None, "omitted") else n_kv_heads
        expected = {"q_proj.weight": (n_heads * head_dim, d_model),
                    "k_proj.weight": (kv * head_dim, d_model),
                    "v_proj.weight": (kv * head_dim, d_model),
                    "o_proj.weight": (d_model, n_heads * head_dim)}
        if bias is True:
            expected.update({"q_proj.bias": (n_heads * head_dim,), "k_proj.bias": (kv * head_dim,),
                             "v_proj.bias": (kv * head_dim,), "o_proj.bias": (d_model,)})
        got = {name: tuple(p.shape) for name, p in module.state_dict().items()}
        shown_args = [*map(str, args), *(f"{k}={v}" for k, v in kwargs.items())]
        expect(got == expected, "parameter names and shapes (n_kv_heads defaults to n_heads, "
               "bias defaults to False: no bias parameters)",
               input=f"MultiHeadAttention({', '.join(shown_args)})", expected=expected, got=got)


@kata_test(level=2, category="api contract", weight=1,
           description="ValueError when d_model % n_heads != 0 or n_heads % n_kv_heads != 0")
def test_mha_rejects_bad_head_counts(solution):
    for args in ((6, 4, None), (8, 4, 3), (10, 5, 2), (6, 4, 4), (12, 4, 8)):
        ok, got = raises_value_error(lambda: solution.MultiHeadAttention(*args), "MultiHeadAttention()")
        expect(ok, "ValueError for head counts that do not divide",
               input="MultiHeadAttention(d_model=%d, n_heads=%d, n_kv_heads=%s)" % args,
               expected="ValueError", got=got)
    # Looking forward: a valid module built right after the rejections has the right shapes.
    module = call(solution.MultiHeadAttention, 6, 3, 1, what="MultiHeadAttention()")
    got = {name: tuple(p.shape) for name, p in module.state_dict().items()}
    expect(got.get("k_proj.weight") == (2, 6) and got.get("q_proj.weight") == (6, 6),
           "after rejected constructions, MultiHeadAttention(6, 3, 1) is built as stated",
           expected={"q_proj.weight": (6, 6), "k_proj.weight": (2, 6)}, got=got)


@kata_test(level=2, category="correctness", weight=3,
           description="MultiHeadAttention matches the reference (same weights) with GQA, masks and causality")
@settings(max_examples=20)
@given(data=st.data(), config=mha_configs(), batch=sizes, num_tokens=sizes, seed=seeds,
       dtype=st.sampled_from(FLOATS))
def test_mha_matches_reference(solution, reference, data, config, batch, num_tokens, seed, dtype):
    cand, ref = module_pair(solution, reference, **config, dtype=dtype)
    x = mha_input(config, batch, num_tokens, seed, dtype)
    kwargs = data.draw(mha_masks(batch, config["n_heads"], num_tokens, num_tokens), label="mask")
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.is_floating_point():
        kwargs = {**kwargs, "attn_mask": mask.to(dtype)}
    _expect_forward(cand, ref, config, x, "MultiHeadAttention output equals the reference", **kwargs)


@kata_test(level=2, category="correctness", weight=2,
           description="every group size (plain MHA, GQA groups 2 and 3, MQA, default n_kv_heads) "
                       "with no mask, causal, bool and float masks")
def test_mha_every_group_size(solution, reference):
    for i, (d_model, n_heads, n_kv_heads) in enumerate(GROUP_CONFIGS):
        config = _config(d_model, n_heads, n_kv_heads, bias=i % 2 == 0)
        cand, ref = module_pair(solution, reference, **config)
        x = randn(40 + i, (2, 3, d_model), torch.float64)
        what = f"n_heads={n_heads}, n_kv_heads={n_kv_heads}"
        for kwargs in ({}, {"is_causal": True}, {"attn_mask": bool_mask((2, 1, 3, 3), seed=i)},
                       {"attn_mask": float_mask((3, 3), seed=i, dtype=torch.float64)}):
            _expect_forward(cand, ref, config, x, f"{what}: query head h reads KV head "
                            "h // (n_heads // n_kv_heads); output equals the reference", **kwargs)


@kata_test(level=2, category="correctness", weight=2,
           description="GQA equals full multi-head attention with KV heads expanded by repeat_interleave")
@settings(max_examples=15)
@given(config=mha_configs(gqa_only=True), batch=sizes, num_tokens=sizes, seed=seeds, causal=st.booleans())
def test_gqa_equals_repeat_interleave(solution, reference, config, batch, num_tokens, seed, causal):
    gqa, _ = module_pair(solution, reference, **config)
    n_heads, n_kv_heads = config["n_heads"], config["n_kv_heads"]
    group, head_dim = n_heads // n_kv_heads, config["d_model"] // n_heads
    full = call(solution.MultiHeadAttention, config["d_model"], n_heads, n_heads, bias=config["bias"],
                what="MultiHeadAttention()").double()
    state = {name: t.clone() for name, t in gqa.state_dict().items()}
    for proj in ("k_proj", "v_proj"):  # KV head j becomes query-head copies [j*group, (j+1)*group)
        for part in ("weight", "bias"):
            name = f"{proj}.{part}"
            if name in state:
                t = state[name]
                state[name] = t.reshape(n_kv_heads, head_dim, *t.shape[1:]).repeat_interleave(
                    group, dim=0).reshape(n_heads * head_dim, *t.shape[1:])
    full.load_state_dict(state)
    x = mha_input(config, batch, num_tokens, seed, torch.float64)
    got = forward(gqa, x, is_causal=causal)
    expected = forward(full, x, is_causal=causal)
    expect(isinstance(expected, torch.Tensor), "forward returns a tensor", got=type(expected).__name__)
    close(got, expected.detach().clone(), "query head h reads KV head h // (n_heads // n_kv_heads)",
          input={"module": config, "x": x, "is_causal": causal})


@kata_test(level=2, category="correctness", weight=1,
           description="causal MultiHeadAttention: changing later tokens leaves earlier outputs unchanged")
@settings(max_examples=10)
@given(data=st.data(), config=mha_configs(), num_tokens=st.integers(2, 4), seed=seeds)
def test_mha_causal_forward_is_causal(solution, reference, data, config, num_tokens, seed):
    cand, _ = module_pair(solution, reference, **config)
    position = data.draw(st.integers(0, num_tokens - 2), label="position")
    x = mha_input(config, 1, num_tokens, seed, torch.float64)
    changed = x.clone()
    changed[:, position + 1:] = randn(seed + 1, changed[:, position + 1:].shape, torch.float64, 10.0)
    before, after = forward(cand, x, is_causal=True), forward(cand, changed, is_causal=True)
    expect(isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor),
           "forward returns a tensor", got=type(after).__name__)
    close(after[:, : position + 1], before[:, : position + 1].detach().clone(),
          f"outputs 0..{position} do not depend on the tokens after them",
          input={"module": config, "x": x, "changed x": changed})


@kata_test(level=2, category="correctness", weight=1,
           description="one module serves calls of different batch sizes, lengths and dtypes in turn")
def test_mha_reused_across_shapes_and_dtypes(solution, reference):
    config = _config(8, 4, 2)
    cand, ref = module_pair(solution, reference, **config)
    calls = ((torch.float64, 2, 3, {"is_causal": True}), (torch.float64, 1, 1, {"is_causal": True}),
             (torch.float64, 3, 5, {"is_causal": True}), (torch.float64, 1, 4, {}),
             (torch.float32, 2, 2, {"is_causal": True}), (torch.float16, 1, 3, {"is_causal": True}),
             (torch.bfloat16, 2, 3, {}), (torch.float64, 2, 3, {"is_causal": True}))
    for i, (dtype, batch, num_tokens, kwargs) in enumerate(calls):
        cand = cand.to(dtype)
        ref = ref.to(dtype)
        x = randn(60 + i, (batch, num_tokens, 8), dtype)
        _expect_forward(cand, ref, config, x, f"call {i + 1} of one module ({str(dtype)[6:]}, "
                        f"B={batch}, T={num_tokens}): the result does not depend on earlier calls "
                        "with other shapes or dtypes", **kwargs)


@kata_test(level=2, category="api contract", weight=0.5,
           description="forward raises ValueError for a mask with is_causal or a mask of the wrong "
                       "shape, and the next call on the same module is unaffected")
def test_mha_forward_after_rejected_call(solution, reference):
    config = _config(6, 3, 1)
    cand, _ = module_pair(solution, reference, **config)
    x = randn(70, (2, 3, 6), torch.float64)
    rejected = {"attn_mask with is_causal=True": {"attn_mask": torch.ones(3, 3, dtype=torch.bool), "is_causal": True},
                "a mask (3, 4) for T=3": {"attn_mask": torch.ones(3, 4, dtype=torch.bool)},
                "an integer mask": {"attn_mask": torch.ones(3, 3, dtype=torch.int64)}}
    follow_up = x[:1, :2]
    before = forward(cand, follow_up, is_causal=True)
    expect(isinstance(before, torch.Tensor), "forward returns a tensor", got=type(before).__name__)
    for what, kwargs in rejected.items():
        ok, got = raises_value_error(lambda: cand(x.clone(), **kwargs), "MultiHeadAttention.forward()")
        expect(ok, f"forward with {what} raises ValueError (as attention() does)",
               input={"module": "MultiHeadAttention(6, 3, 1)", "x": x, **kwargs}, expected="ValueError", got=got)
        # Compared with the module's own output before the rejection: only a leak fails here.
        close(forward(cand, follow_up, is_causal=True), before.detach().clone(),
              f"after forward with {what} was rejected, the next call gives the same result as "
              "before it", input={"module": "MultiHeadAttention(6, 3, 1)", "x": follow_up, "is_causal": True},
              atol=0.0, rtol=0.0)


def _mha_ops(solution: Any, batch: int, n_heads: int, n_kv_heads: int, num_tokens: int) -> int:
    torch.manual_seed(0)
    module = call(solution.MultiHeadAttention, 2 * n_heads, n_heads, n_kv_heads, what="MultiHeadAttention()")
    x = torch.randn(batch, num_tokens, 2 * n_heads)
    return count_ops(lambda: module(x, is_causal=True))


@kata_test(level=2, category="efficiency", weight=1,
           description="no Python loop over batch, heads or tokens in forward(): the operation count does not grow")
def test_mha_has_no_python_loop(solution):
    base = _mha_ops(solution, 2, 2, 1, 2)
    for what, dims in {"B": (6, 2, 1, 2), "H": (2, 6, 3, 2), "T": (2, 2, 1, 7)}.items():
        grown = _mha_ops(solution, *dims)
        expect(grown <= base, f"the number of tensor operations does not grow with {what}",
               input=f"(B, n_heads, n_kv_heads, T) = (2, 2, 1, 2) vs {dims}",
               expected=f"<= {base} operations", got=f"{grown} operations")
