"""Hidden suite for the mha kata: attention(), MultiHeadAttention (GQA), KVCache.

Expected values come from the reference run in float64 on the same inputs, then cast to the
input dtype, so half precision is judged against an exact computation (never against SDPA's
CPU half path). Inputs are small (sizes 1-4) and values rounded to one decimal so shrunk
counterexamples stay readable."""

from __future__ import annotations

import copy
from typing import Any

import torch
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule, run_state_machine_as_test)

from grader.protocol import PropertyFailure, call, expect, kata_test
from grader.suites._common import check_close, count_ops

FLOATS = (torch.float32, torch.float64)
HALVES = (torch.float16, torch.bfloat16)

# ------------------------------------------------------------------------------ strategies


def randn(seed: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32,
          scale: float = 1.0) -> torch.Tensor:
    """Normal values rounded to one decimal (readable), from a seed (fast to draw)."""
    gen = torch.Generator().manual_seed(seed)
    values = (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).round(decimals=1)
    return values.to(dtype)


seeds = st.integers(0, 2**16)
sizes = st.integers(1, 4)


@st.composite
def qkv(draw: Any, dtypes: tuple[torch.dtype, ...] = FLOATS, scale: float = 1.0,
        min_keys: int = 1) -> dict:
    B, H, Tq, D, Dv = (draw(sizes) for _ in range(5))
    Tk = draw(st.integers(min_keys, 4))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(seeds)
    return {"q": randn(seed, (B, H, Tq, D), dtype, scale),
            "k": randn(seed + 1, (B, H, Tk, D), dtype, scale),
            "v": randn(seed + 2, (B, H, Tk, Dv), dtype)}


@st.composite
def mask_shapes(draw: Any, full: tuple[int, int, int, int]) -> tuple[int, ...]:
    """A shape broadcastable to `full`: some dims set to 1, some leading dims dropped."""
    shape = [n if draw(st.booleans()) else 1 for n in full]
    return tuple(shape[draw(st.integers(0, 2)):])


@st.composite
def bool_masks(draw: Any, full: tuple[int, int, int, int]) -> torch.Tensor:
    shape = draw(mask_shapes(full))
    gen = torch.Generator().manual_seed(draw(seeds))
    return torch.rand(shape, generator=gen) < draw(st.sampled_from([0.3, 0.6, 0.9]))


@st.composite
def float_masks(draw: Any, full: tuple[int, int, int, int], dtype: torch.dtype) -> torch.Tensor:
    """Finite offsets in [-2, 2] with some -inf entries."""
    shape = draw(mask_shapes(full))
    gen = torch.Generator().manual_seed(draw(seeds))
    values = (torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2).round(decimals=1)
    drop = torch.rand(shape, generator=gen) < draw(st.sampled_from([0.0, 0.3, 0.7]))
    return values.masked_fill(drop, float("-inf")).to(dtype)


def full_shape(case: dict) -> tuple[int, int, int, int]:
    B, H, Tq, _ = case["q"].shape
    return (B, H, Tq, case["k"].shape[2])


# ------------------------------------------------------------------------------ helpers


class _Readable:
    """A 4-D tensor rendered with its values (protocol.show elides values below depth 4)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        t = self.tensor.detach().cpu()
        values = t.tolist() if t.dtype == torch.bool else t.double().round(decimals=5).tolist()
        if t.numel() > 64:
            values = f"first values {t.flatten()[:8].tolist()}, ..."
        return f"tensor({values}, shape={tuple(t.shape)}, dtype={str(t.dtype).replace('torch.', '')})"


def readable(value: Any) -> Any:
    """`value` with every tensor of 4 or more dims wrapped so the scorecard shows its values."""
    if isinstance(value, torch.Tensor):
        return _Readable(value) if value.dim() >= 4 else value
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(readable(v) for v in value)
    return value


def close(got: Any, expected: torch.Tensor, prop: str, *, input: Any, **tolerance: Any) -> None:
    """_common.check_close, with 4-D inputs and results shown with their values."""
    try:
        check_close(got, expected, prop, input=input, **tolerance)
    except PropertyFailure as exc:
        if exc.note is None:  # shape / dtype / type mismatch: the message is already complete
            raise PropertyFailure(exc.prop, input=readable(input), expected=exc.expected,
                                  got=exc.got) from None
        raise PropertyFailure(exc.prop, input=readable(input), expected=readable(expected),
                              got=readable(got), note=exc.note) from None


def exact(reference: Any, case: dict, **kwargs: Any) -> torch.Tensor:
    """The reference computed in float64, cast to the dtype of q."""
    mask = kwargs.pop("attn_mask", None)
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    out = reference.attention(case["q"].double(), case["k"].double(), case["v"].double(),
                              attn_mask=mask, **kwargs)
    return out.to(case["q"].dtype)


def run(solution: Any, case: dict, **kwargs: Any) -> torch.Tensor:
    """The candidate's attention on copies (an in-place edit must not corrupt the expected
    value; test_inputs_not_modified checks that separately)."""
    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    return call(solution.attention, case["q"].clone(), case["k"].clone(), case["v"].clone(),
                what="attention()", **copies)


def shown(case: dict, **kwargs: Any) -> dict:
    return {**case, **{k: v for k, v in kwargs.items() if v is not None and v is not False}}


def module_pair(solution: Any, reference: Any, d_model: int, n_heads: int,
                n_kv_heads: int | None, bias: bool, seed: int,
                dtype: torch.dtype = torch.float64) -> tuple[Any, Any]:
    """(candidate, reference) MultiHeadAttention with the reference's random weights copied
    into the candidate, both in `dtype`."""
    torch.manual_seed(seed)
    ref = reference.MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias).to(dtype)
    cand = call(solution.MultiHeadAttention, d_model, n_heads, n_kv_heads, bias=bias,
                what="MultiHeadAttention()")
    check_parameters(cand, ref, f"MultiHeadAttention({d_model}, {n_heads}, {n_kv_heads}, bias={bias})")
    cand = cand.to(dtype)
    cand.load_state_dict(ref.state_dict())
    return cand, ref


def check_parameters(cand: Any, ref: Any, what: str) -> None:
    got = {name: tuple(p.shape) for name, p in cand.state_dict().items()}
    expected = {name: tuple(p.shape) for name, p in ref.state_dict().items()}
    expect(got == expected, "parameters are q_proj, k_proj, v_proj, o_proj (nn.Linear) with "
           "the stated shapes", input=what, expected=expected, got=got)


@st.composite
def mha_configs(draw: Any, gqa_only: bool = False) -> dict:
    n_kv_heads = draw(st.integers(1, 2))
    group = draw(st.integers(2 if gqa_only else 1, 3))
    n_heads = n_kv_heads * group
    head_dim = draw(st.integers(1, 3))
    return {"d_model": n_heads * head_dim, "n_heads": n_heads,
            "n_kv_heads": draw(st.sampled_from([n_kv_heads, None])) if group == 1 else n_kv_heads,
            "bias": draw(st.booleans()), "seed": draw(seeds)}


# ------------------------------------------------------------------------------ level 1


@kata_test(level=1, category="correctness", weight=3,
           description="attention() matches the reference on random shapes (no mask), with and without scale")
@settings(max_examples=40)
@given(case=qkv(), scale=st.sampled_from([None, 1.0, 0.3]))
def test_attention_matches_reference(solution, reference, case, scale):
    got = run(solution, case, scale=scale)
    close(got, exact(reference, case, scale=scale), "attention equals softmax(q kᵀ·scale) v",
                input=shown(case, scale=scale))


@kata_test(level=1, category="correctness", weight=1,
           description="an explicit scale multiplies q kᵀ instead of 1/sqrt(D)")
@settings(max_examples=20)
@given(case=qkv(min_keys=2), scale=st.sampled_from([0.3, 1.0, 2.0]))
def test_scale_argument_multiplies_scores(solution, reference, case, scale):
    got = run(solution, case, scale=scale)
    close(got, exact(reference, case, scale=scale), "scores are q kᵀ times the given scale",
          input=shown(case, scale=scale))


@kata_test(level=1, category="correctness", weight=2,
           description="a bool attn_mask (True = may attend), broadcast from smaller shapes")
@settings(max_examples=40)
@given(data=st.data(), case=qkv())
def test_bool_mask_matches_reference(solution, reference, data, case):
    mask = data.draw(bool_masks(full_shape(case)), label="attn_mask")
    got = run(solution, case, attn_mask=mask)
    close(got, exact(reference, case, attn_mask=mask), "bool mask: attend only where True",
                input=shown(case, attn_mask=mask))


@kata_test(level=1, category="correctness", weight=2,
           description="a float attn_mask is added to the scores (-inf removes a key)")
@settings(max_examples=40)
@given(data=st.data(), case=qkv())
def test_float_mask_matches_reference(solution, reference, data, case):
    mask = data.draw(float_masks(full_shape(case), case["q"].dtype), label="attn_mask")
    got = run(solution, case, attn_mask=mask)
    close(got, exact(reference, case, attn_mask=mask), "float mask is added to the scores",
                input=shown(case, attn_mask=mask))


@kata_test(level=1, category="correctness", weight=2,
           description="is_causal is bottom-right aligned: query i sees keys j <= i + (Tk - Tq)")
@settings(max_examples=40)
@given(case=qkv())
def test_causal_is_bottom_right_aligned(solution, reference, case):
    got = run(solution, case, is_causal=True)
    close(got, exact(reference, case, is_causal=True),
                "causal: query i attends keys j <= i + (Tk - Tq)", input=shown(case, is_causal=True))


@kata_test(level=1, category="correctness", weight=2,
           description="rows of attention weights are non-negative and sum to one (v = identity)")
@settings(max_examples=30)
@given(case=qkv(), masked=st.booleans(), mask_seed=seeds)
def test_rows_of_weights_sum_to_one(solution, case, masked, mask_seed):
    B, H, Tq, Tk = full_shape(case)
    # With v = I (Tk x Tk) the output rows are the attention weights themselves.
    v = torch.eye(Tk, dtype=case["q"].dtype).expand(B, H, Tk, Tk)
    mask = None
    if masked:  # a random mask that leaves every row at least one key
        gen = torch.Generator().manual_seed(mask_seed)
        mask = torch.rand(Tq, Tk, generator=gen) < 0.6
        mask[torch.arange(Tq), torch.randint(Tk, (Tq,), generator=gen)] = True
    weights = call(solution.attention, case["q"], case["k"], v, attn_mask=mask, what="attention()")
    shown_input = shown({"q": case["q"], "k": case["k"], "v": "identity (Tk x Tk)"}, attn_mask=mask)
    expect(isinstance(weights, torch.Tensor) and tuple(weights.shape) == (B, H, Tq, Tk),
           "output shape (B, H, Tq, Dv)", input=readable(shown_input), expected=(B, H, Tq, Tk),
           got=tuple(getattr(weights, "shape", ())) or weights)
    sums = weights.double().sum(-1)  # (B, H, Tq)
    close(sums, torch.ones_like(sums), "each row of attention weights sums to one",
                input=readable(shown_input), atol=1e-5, rtol=1e-5)
    expect(bool((weights >= 0).all()), "weights are non-negative", input=readable(shown_input), got=readable(weights))
    if mask is not None:
        expect(bool((weights[..., ~mask] == 0).all()), "masked keys get weight 0",
               input=readable(shown_input), got=readable(weights))


@kata_test(level=1, category="correctness", weight=2,
           description="keys that are masked out do not influence the output")
@settings(max_examples=30)
@given(case=qkv(), seed=seeds)
def test_masked_keys_do_not_influence_output(solution, case, seed):
    B, H, Tq, Tk = full_shape(case)
    gen = torch.Generator().manual_seed(seed)
    key_mask = torch.rand(B, H, 1, Tk, generator=gen) < 0.6  # per key, for every query
    blocked = ~key_mask[:, :, 0, :, None]  # (B, H, Tk, 1)
    other = {"q": case["q"],
             "k": torch.where(blocked, randn(seed, case["k"].shape, case["k"].dtype, 10.0), case["k"]),
             "v": torch.where(blocked, randn(seed + 1, case["v"].shape, case["v"].dtype, 10.0), case["v"])}
    before = run(solution, case, attn_mask=key_mask)
    after = run(solution, other, attn_mask=key_mask)
    expect(isinstance(before, torch.Tensor), "attention returns a tensor", got=type(before).__name__)
    close(after, before.detach().clone(),
                "changing masked keys and values leaves the output unchanged",
                input={**shown(case, attn_mask=key_mask), "changed k": other["k"], "changed v": other["v"]})


@kata_test(level=1, category="correctness", weight=2,
           description="causality: changing keys a query may not see leaves its output unchanged")
@settings(max_examples=30)
@given(data=st.data(), case=qkv(), seed=seeds)
def test_causality_future_keys_do_not_matter(solution, data, case, seed):
    B, H, Tq, Tk = full_shape(case)
    query = data.draw(st.integers(0, Tq - 1), label="query")
    future = torch.arange(Tk) > query + (Tk - Tq)  # keys query `query` (and earlier) may not see
    other = {"q": case["q"],
             "k": torch.where(future[:, None], randn(seed, case["k"].shape, case["k"].dtype, 10.0), case["k"]),
             "v": torch.where(future[:, None], randn(seed + 1, case["v"].shape, case["v"].dtype, 10.0), case["v"])}
    before = run(solution, case, is_causal=True)
    after = run(solution, other, is_causal=True)
    for got in (before, after):
        expect(isinstance(got, torch.Tensor) and got.shape[:3] == (B, H, Tq),
               "attention returns a (B, H, Tq, Dv) tensor", got=getattr(got, "shape", got))
    close(after[:, :, : query + 1], before[:, :, : query + 1].detach().clone(),
                f"outputs of queries 0..{query} do not change when keys after {query + Tk - Tq} change",
                input={**shown(case, is_causal=True), "changed keys": future.nonzero().flatten().tolist()})


@kata_test(level=1, category="edge cases", weight=1,
           description="an all-True mask gives the same output as no mask")
@settings(max_examples=20)
@given(data=st.data(), case=qkv())
def test_all_true_mask_equals_no_mask(solution, data, case):
    shape = data.draw(mask_shapes(full_shape(case)), label="mask_shape")
    mask = torch.ones(shape, dtype=torch.bool)
    got, expected = run(solution, case, attn_mask=mask), run(solution, case)
    expect(isinstance(expected, torch.Tensor), "attention returns a tensor", got=type(expected).__name__)
    close(got, expected.detach().clone(), "all-True mask == no mask",
                input=shown(case, attn_mask=mask))


@kata_test(level=1, category="numerics", weight=1,
           description="adding a constant to a whole row of a float mask changes nothing")
@settings(max_examples=20)
@given(data=st.data(), case=qkv(dtypes=(torch.float64,)),
       offsets=st.lists(st.sampled_from([-30.0, -3.0, 2.5, 40.0]), min_size=4, max_size=4))
def test_row_constant_in_float_mask_changes_nothing(solution, data, case, offsets):
    B, H, Tq, Tk = full_shape(case)
    mask = data.draw(float_masks((B, H, Tq, Tk), torch.float64), label="attn_mask")
    shifted = mask + torch.tensor(offsets[:Tq], dtype=torch.float64)[:, None]  # per query row
    got, expected = run(solution, case, attn_mask=shifted), run(solution, case, attn_mask=mask)
    expect(isinstance(expected, torch.Tensor), "attention returns a tensor", got=type(expected).__name__)
    close(got, expected.detach().clone(), "softmax is shift-invariant per row",
                input={**shown(case, attn_mask=mask), "row offsets": offsets[:Tq]}, atol=1e-7, rtol=1e-6)


@kata_test(level=1, category="correctness", weight=1,
           description="permuting the batch permutes the output the same way")
@settings(max_examples=20)
@given(case=qkv(), seed=seeds, causal=st.booleans())
def test_batch_permutation_equivariance(solution, case, seed, causal):
    B = case["q"].shape[0]
    perm = torch.randperm(B, generator=torch.Generator().manual_seed(seed))
    permuted = {name: t[perm] for name, t in case.items()}
    got, base = run(solution, permuted, is_causal=causal), run(solution, case, is_causal=causal)
    expect(isinstance(base, torch.Tensor), "attention returns a tensor", got=type(base).__name__)
    close(got, base[perm].detach().clone(), "attention(q[p], k[p], v[p]) == attention(q, k, v)[p]",
                input={**shown(case, is_causal=causal), "permutation": perm.tolist()})


@kata_test(level=1, category="edge cases", weight=2,
           description="a query with no key to attend outputs zeros, never NaN (bool, float and causal)")
@settings(max_examples=30)
@given(case=qkv(), kind=st.sampled_from(["bool", "float", "causal"]), row_seed=seeds)
def test_fully_masked_rows_are_zeros(solution, reference, case, kind, row_seed):
    B, H, Tq, Tk = full_shape(case)
    gen = torch.Generator().manual_seed(row_seed)
    dead_rows = torch.rand(Tq, generator=gen) < 0.5
    dead_rows[0] = True
    allowed = (torch.rand(Tq, Tk, generator=gen) < 0.7) & ~dead_rows[:, None]
    if kind == "bool":
        kwargs: dict = {"attn_mask": allowed}
    elif kind == "float":
        kwargs = {"attn_mask": torch.zeros(Tq, Tk, dtype=case["q"].dtype).masked_fill(~allowed, float("-inf"))}
    else:  # more queries than keys: the first Tq - Tk queries see nothing
        q = randn(row_seed, (B, H, Tk + 1 + int(dead_rows.sum()), case["q"].shape[-1]), case["q"].dtype)
        case = {**case, "q": q}
        kwargs = {"is_causal": True}
    got = run(solution, case, **kwargs)
    close(got, exact(reference, case, **kwargs),
                "rows with nothing to attend are zeros; the other rows are the usual attention",
                input=shown(case, **kwargs))


@kata_test(level=1, category="numerics", weight=2,
           description="huge logits stay finite: the output is a convex combination of v")
@settings(max_examples=30)
@given(case=qkv(dtypes=(torch.float32, torch.float64, torch.float16, torch.bfloat16), scale=150.0))
def test_huge_logits_stay_finite(solution, case):
    got = run(solution, case)
    shown_input = shown(case)
    expect(isinstance(got, torch.Tensor) and got.shape == full_shape(case)[:3] + case["v"].shape[-1:],
           "output shape (B, H, Tq, Dv)", input=readable(shown_input), got=getattr(got, "shape", got))
    expect(got.dtype == case["q"].dtype, "output dtype is q's dtype", input=readable(shown_input),
           expected=case["q"].dtype, got=got.dtype)
    expect(bool(torch.isfinite(got).all()), "scores of 1e4 and more still give finite outputs",
           input=readable(shown_input), got=readable(got))
    v = case["v"].double()
    low, high = v.amin(dim=2, keepdim=True), v.amax(dim=2, keepdim=True)  # (B, H, 1, Dv)
    slack = 1e-2 * (1 + v.abs().amax())
    inside = (got.double() >= low - slack) & (got.double() <= high + slack)
    expect(bool(inside.all()), "each output lies between the smallest and largest value of v",
           input=readable(shown_input), expected="within [min v, max v] per feature", got=readable(got))


@kata_test(level=1, category="numerics", weight=2,
           description="fp16/bf16 inputs: float32 scores and softmax, output in the input dtype")
@settings(max_examples=50)
@given(case=qkv(dtypes=HALVES, scale=6.0), causal=st.booleans())
def test_half_precision_matches_float32(solution, reference, case, causal):
    got = run(solution, case, is_causal=causal)
    close(got, exact(reference, case, is_causal=causal),
                "half-precision attention within tolerance of the exact result",
                input=shown(case, is_causal=causal))


@kata_test(level=1, category="api contract", weight=1,
           description="inputs (q, k, v, attn_mask) are not modified")
@settings(max_examples=20)
@given(data=st.data(), case=qkv(), use_float=st.booleans())
def test_inputs_not_modified(solution, data, case, use_float):
    full = full_shape(case)
    mask = data.draw(float_masks(full, case["q"].dtype) if use_float else bool_masks(full), label="attn_mask")
    before = {**{k: t.clone() for k, t in case.items()}, "attn_mask": mask.clone()}
    call(solution.attention, case["q"], case["k"], case["v"], attn_mask=mask, what="attention()")
    for name, t in {**case, "attn_mask": mask}.items():
        expect(torch.equal(t, before[name]), f"{name} is not modified", input=readable(shown(case, attn_mask=before["attn_mask"])),
               expected=readable(before[name]), got=readable(t))


def _raises_value_error(fn: Any) -> tuple[bool, str]:
    try:
        fn()
    except ValueError:
        return True, "ValueError"
    except NotImplementedError as exc:
        raise PropertyFailure("attention() is not implemented yet (NotImplementedError)") from exc
    except Exception as exc:  # noqa: BLE001 - any other exception is the wrong answer
        return False, f"{type(exc).__name__}: {exc}"
    return False, "no exception"


@kata_test(level=1, category="api contract", weight=1,
           description="ValueError for attn_mask with is_causal, a mask neither bool nor float, and shapes that do not fit")
def test_rejects_invalid_arguments(solution):
    q, k, v = torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 6)
    cases = {
        "attn_mask and is_causal=True": lambda: solution.attention(q, k, v, torch.ones(3, 5, dtype=torch.bool), True),
        "integer attn_mask": lambda: solution.attention(q, k, v, torch.ones(3, 5, dtype=torch.int64)),
        "q of 3 dims": lambda: solution.attention(q[0], k, v),
        "k with another batch size": lambda: solution.attention(q, torch.zeros(2, 2, 5, 4), torch.zeros(2, 2, 5, 6)),
        "v with other heads": lambda: solution.attention(q, k, torch.zeros(1, 3, 5, 6)),
        "k with another head dim": lambda: solution.attention(q, torch.zeros(1, 2, 5, 3), v),
        "v with another number of keys": lambda: solution.attention(q, k, torch.zeros(1, 2, 4, 6)),
        "mask (3, 4) for Tq=3, Tk=5": lambda: solution.attention(q, k, v, torch.ones(3, 4, dtype=torch.bool)),
    }
    for what, fn in cases.items():
        ok, got = _raises_value_error(fn)
        expect(ok, f"ValueError for {what}", input="q (1, 2, 3, 4), k (1, 2, 5, 4), v (1, 2, 5, 6)",
               expected="ValueError", got=got)


def _attention_ops(solution: Any, B: int, H: int, Tq: int, Tk: int, causal: bool) -> int:
    q, k, v = torch.randn(B, H, Tq, 2), torch.randn(B, H, Tk, 2), torch.randn(B, H, Tk, 2)
    return count_ops(lambda: solution.attention(q, k, v, is_causal=causal))


@kata_test(level=1, category="efficiency", weight=1,
           description="no Python loop over batch, heads or time: the operation count does not grow with B, H, T")
def test_attention_has_no_python_loop(solution):
    for causal in (False, True):
        base = _attention_ops(solution, 2, 2, 2, 3, causal)
        for what, dims in {"B": (6, 2, 2, 3), "H": (2, 6, 2, 3), "T": (2, 2, 6, 9)}.items():
            grown = _attention_ops(solution, *dims, causal)
            expect(grown <= base, f"the number of tensor operations does not grow with {what}",
                   input=f"(B, H, Tq, Tk) = (2, 2, 2, 3) vs {dims}, is_causal={causal}",
                   expected=f"<= {base} operations", got=f"{grown} operations")


# ------------------------------------------------------------------------------ level 2


def mha_input(config: dict, batch: int, num_tokens: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    return randn(seed, (batch, num_tokens, config["d_model"]), dtype)


def forward(module: Any, x: torch.Tensor, what: str = "MultiHeadAttention.forward()", **kwargs: Any) -> Any:
    with torch.no_grad():
        return call(module, x, what=what, **kwargs)


@kata_test(level=2, category="api contract", weight=1,
           description="parameters are named q_proj, k_proj, v_proj, o_proj with the stated shapes")
def test_mha_parameter_names_and_shapes(solution):
    for d_model, n_heads, n_kv_heads, bias in ((8, 4, 2, False), (6, 3, None, True), (6, 2, 1, True)):
        module = call(solution.MultiHeadAttention, d_model, n_heads, n_kv_heads, bias=bias,
                      what="MultiHeadAttention()")
        head_dim, kv = d_model // n_heads, n_kv_heads or n_heads
        expected = {"q_proj.weight": (n_heads * head_dim, d_model),
                    "k_proj.weight": (kv * head_dim, d_model),
                    "v_proj.weight": (kv * head_dim, d_model),
                    "o_proj.weight": (d_model, n_heads * head_dim)}
        if bias:
            expected.update({"q_proj.bias": (n_heads * head_dim,), "k_proj.bias": (kv * head_dim,),
                             "v_proj.bias": (kv * head_dim,), "o_proj.bias": (d_model,)})
        got = {name: tuple(p.shape) for name, p in module.state_dict().items()}
        expect(got == expected, "parameter names and shapes",
               input=f"MultiHeadAttention({d_model}, {n_heads}, {n_kv_heads}, bias={bias})",
               expected=expected, got=got)


@kata_test(level=2, category="api contract", weight=1,
           description="ValueError when d_model % n_heads != 0 or n_heads % n_kv_heads != 0")
def test_mha_rejects_bad_head_counts(solution):
    for args in ((6, 4, None), (8, 4, 3), (10, 5, 2)):
        ok, got = _raises_value_error(lambda: solution.MultiHeadAttention(*args))
        expect(ok, "ValueError for head counts that do not divide",
               input="MultiHeadAttention(d_model=%d, n_heads=%d, n_kv_heads=%s)" % args,
               expected="ValueError", got=got)


@st.composite
def mha_masks(draw: Any, batch: int, n_heads: int, num_queries: int, num_keys: int) -> dict:
    kind = draw(st.sampled_from(["none", "causal", "bool", "float"]))
    full = (batch, n_heads, num_queries, num_keys)
    if kind == "causal":
        return {"is_causal": True}
    if kind == "bool":
        return {"attn_mask": draw(bool_masks(full))}
    if kind == "float":
        return {"attn_mask": draw(float_masks(full, torch.float64))}
    return {}


@kata_test(level=2, category="correctness", weight=3,
           description="MultiHeadAttention matches the reference (same weights) with GQA, masks and causality")
@settings(max_examples=25)
@given(data=st.data(), config=mha_configs(), batch=sizes, num_tokens=sizes, seed=seeds,
       dtype=st.sampled_from(FLOATS))
def test_mha_matches_reference(solution, reference, data, config, batch, num_tokens, seed, dtype):
    cand, ref = module_pair(solution, reference, **config, dtype=dtype)
    x = mha_input(config, batch, num_tokens, seed, dtype)
    kwargs = data.draw(mha_masks(batch, config["n_heads"], num_tokens, num_tokens), label="mask")
    mask = kwargs.get("attn_mask")
    cand_kwargs = {**kwargs, "attn_mask": mask.to(dtype)} if mask is not None and mask.is_floating_point() else kwargs
    got = forward(cand, x, **cand_kwargs)
    expected = forward(copy.deepcopy(ref).double(), x.double(), **kwargs).to(dtype)
    close(got, expected, "MultiHeadAttention output equals the reference",
                input={"module": config, "x": x, **kwargs})


@kata_test(level=2, category="correctness", weight=2,
           description="GQA equals full multi-head attention with KV heads expanded by repeat_interleave")
@settings(max_examples=20)
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
    close(got, expected.clone(), "query head h reads KV head h // (n_heads // n_kv_heads)",
                input={"module": config, "x": x, "is_causal": causal})


@kata_test(level=2, category="correctness", weight=1,
           description="causal MultiHeadAttention: changing later tokens leaves earlier outputs unchanged")
@settings(max_examples=15)
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
    close(after[:, : position + 1], before[:, : position + 1].clone(),
                f"outputs 0..{position} do not depend on tokens after {position}",
                input={"module": config, "x": x, "changed x": changed})


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


# ------------------------------------------------------------------------------ level 3


@kata_test(level=3, category="correctness", weight=2,
           description="KVCache.update appends along time and returns everything cached; seq_len counts tokens")
@settings(max_examples=20)
@given(batch=sizes, n_kv_heads=sizes, head_dim=sizes, chunks=st.lists(st.integers(1, 3), min_size=1, max_size=4),
       seed=seeds)
def test_kvcache_update_returns_all_tokens(solution, batch, n_kv_heads, head_dim, chunks, seed):
    cache = call(solution.KVCache, what="KVCache()")
    seq_len = call(lambda: cache.seq_len, what="KVCache.seq_len")
    expect(seq_len == 0 and isinstance(seq_len, int), "a new cache has seq_len 0 (an int)", expected=0, got=seq_len)
    keys, values = [], []
    for i, num_new in enumerate(chunks):
        k_new = randn(seed + 2 * i, (batch, n_kv_heads, num_new, head_dim))
        v_new = randn(seed + 2 * i + 1, (batch, n_kv_heads, num_new, head_dim + 1))
        keys.append(k_new)
        values.append(v_new)
        result = call(cache.update, k_new, v_new, what="KVCache.update()")
        shown_input = {"chunk sizes so far": chunks[: i + 1], "k_new": k_new, "v_new": v_new}
        expect(isinstance(result, tuple) and len(result) == 2, "update returns a (k, v) tuple",
               input=readable(shown_input), got=type(result).__name__)
        close(result[0], torch.cat(keys, dim=2), "update returns all cached keys, in order", input=readable(shown_input))
        close(result[1], torch.cat(values, dim=2), "update returns all cached values, in order", input=readable(shown_input))
        total = sum(chunks[: i + 1])
        expect(cache.seq_len == total, "seq_len counts every appended token", input=readable(shown_input),
               expected=total, got=cache.seq_len)


@kata_test(level=3, category="correctness", weight=3,
           description="prompt then continuation in chunks (decode or chunked prefill) with a cache equals one causal pass")
def test_cached_decoding_matches_full_pass(solution, reference):
    class CachedDecoding(RuleBasedStateMachine):
        """The candidate decodes with its cache; the reference runs the whole sequence."""

        def __init__(self) -> None:
            super().__init__()
            self.inputs: list[torch.Tensor] = []
            self.outputs: list[torch.Tensor] = []

        @initialize(config=mha_configs(), batch=st.integers(1, 2))
        def build(self, config: dict, batch: int) -> None:
            self.config, self.batch = config, batch
            self.module, self.ref = module_pair(solution, reference, **config)
            self.cache = call(solution.KVCache, what="KVCache()")

        @rule(num_tokens=st.integers(1, 3), seed=seeds)
        def feed_tokens(self, num_tokens: int, seed: int) -> None:
            x = mha_input(self.config, self.batch, num_tokens, seed, torch.float64)
            out = forward(self.module, x, what="forward(x, is_causal=True, kv_cache=cache)",
                          is_causal=True, kv_cache=self.cache)
            expect(isinstance(out, torch.Tensor), "forward returns a tensor", got=type(out).__name__)
            self.inputs.append(x)
            self.outputs.append(out)

        @invariant()
        @precondition(lambda self: bool(self.inputs))
        def seq_len_counts_every_token(self) -> None:
            """The cache holds one entry per token fed so far."""
            total = sum(x.shape[1] for x in self.inputs)
            expect(self.cache.seq_len == total, "seq_len equals the number of tokens fed",
                   input=self._shown(), expected=total, got=self.cache.seq_len)

        @invariant()
        @precondition(lambda self: bool(self.inputs))
        def outputs_equal_full_causal_pass(self) -> None:
            """Concatenated cached outputs equal one causal forward over the whole sequence."""
            expected = forward(self.ref, torch.cat(self.inputs, dim=1), is_causal=True)
            close(torch.cat(self.outputs, dim=1), expected,
                        "cached decoding equals one causal forward over the whole sequence",
                        input=self._shown())

        def _shown(self) -> dict:
            return {"module": self.config, "chunk sizes": [x.shape[1] for x in self.inputs],
                    "x": torch.cat(self.inputs, dim=1)}

    run_state_machine_as_test(CachedDecoding, settings=settings(max_examples=15, stateful_step_count=5))


@kata_test(level=3, category="correctness", weight=1,
           description="with a cache, attn_mask covers all cached keys: (..., T_new, seq_len)")
@settings(max_examples=15)
@given(config=mha_configs(), prompt_len=sizes, num_new=sizes, seed=seeds, use_float=st.booleans())
def test_cached_forward_masks_all_keys(solution, reference, config, prompt_len, num_new, seed, use_float):
    cand, ref = module_pair(solution, reference, **config)
    cand_cache, ref_cache = call(solution.KVCache, what="KVCache()"), reference.KVCache()
    prompt, new = mha_input(config, 1, prompt_len, seed, torch.float64), mha_input(config, 1, num_new, seed + 1, torch.float64)
    forward(cand, prompt, is_causal=True, kv_cache=cand_cache)
    forward(ref, prompt, is_causal=True, kv_cache=ref_cache)
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(num_new, prompt_len + num_new, generator=gen) < 0.6
    if use_float:
        mask = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    got = forward(cand, new, attn_mask=mask, kv_cache=cand_cache)
    expected = forward(ref, new, attn_mask=mask, kv_cache=ref_cache)
    close(got, expected, "new tokens attend the cached keys the mask allows",
                input={"module": config, "prompt": prompt, "new tokens": new, "attn_mask": mask})


def _decode_ops(solution: Any, cached_tokens: int) -> int:
    torch.manual_seed(0)
    module = call(solution.MultiHeadAttention, 4, 2, 1, what="MultiHeadAttention()")
    cache = call(solution.KVCache, what="KVCache()")
    with torch.no_grad():
        module(torch.randn(2, cached_tokens, 4), is_causal=True, kv_cache=cache)
    x = torch.randn(2, 1, 4)
    return count_ops(lambda: module(x, is_causal=True, kv_cache=cache))


@kata_test(level=3, category="efficiency", weight=1,
           description="a decode step's operation count does not grow with the number of cached tokens")
def test_decode_step_has_no_loop_over_cache(solution):
    base, grown = _decode_ops(solution, 2), _decode_ops(solution, 12)
    expect(grown <= base, "the number of tensor operations of one decode step does not grow with seq_len",
           input="one new token after 2 vs 12 cached tokens", expected=f"<= {base} operations",
           got=f"{grown} operations")
