"""Hidden suite for the `rope` kata: rotary position embeddings.

Tolerances: a float32 angle p * w carries an error of about p * 1e-7 (rounding of w and of
the product), so every comparison allows an absolute error that grows with the largest
position in the case (`position_atol`); a solution that rounds the frequencies differently
but correctly (float64 then cast, complex multiplication) passes. Half-precision results are
compared with the float32 computation of the same input.
"""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, rule,
                                 run_state_machine_as_test)

from grader.protocol import PropertyFailure, call, expect, kata_test
from grader.suites._common import check_close, tensors

ANGLE_ERR_PER_POSITION = 1e-7  # float32 angle error per unit of position (issue 3)
BF16_ATOL = 2e-2  # bf16 results vs float32, relative to max(1, max |x|) (statement)
LLAMA31 = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}

# ---------------------------------------------------------------------------- strategies

head_dims = st.integers(1, 4).map(lambda n: 2 * n)  # D in 2, 4, 6, 8
bases = st.sampled_from([10000.0, 100.0, 500000.0])


@st.composite
def positions_of(draw, num_tokens: int, max_position: int = 40) -> torch.Tensor:
    """(T,) int64 positions; sometimes offset far (decoding late in a long context)."""
    offset = draw(st.sampled_from([0, 0, 0, 1000, 5000]))
    values = draw(st.lists(st.integers(0, max_position), min_size=num_tokens,
                           max_size=num_tokens))
    return torch.tensor(values, dtype=torch.int64) + offset


@st.composite
def rope_cases(draw, *, batched_positions: bool = False, min_head_dim: int = 2):
    """x (..., T, D) integer-valued float32 and positions (T,) or (B, T)."""
    head_dim = draw(head_dims.filter(lambda d: d >= min_head_dim))
    num_tokens = draw(st.integers(1, 3))
    if batched_positions:
        batch = draw(st.integers(1, 3))
        lead = draw(st.sampled_from([(batch,), (batch, draw(st.integers(1, 2)))]))
        positions = torch.stack([draw(positions_of(num_tokens)) for _ in range(batch)])
    else:
        lead = draw(st.sampled_from([(), (2,), (1, 2)]))
        positions = draw(positions_of(num_tokens))
    shape = lead + (num_tokens, head_dim)
    x = draw(tensors(shape, low=-3, high=3, integers=True))
    return x, positions


def position_atol(x: torch.Tensor, positions: torch.Tensor, base_atol: float = 1e-5) -> float:
    """Absolute tolerance for a rotated x: float32 rounding plus the angle error, which
    grows with the largest position (and the factor 4 leaves room for both roundings)."""
    p_max = int(positions.max()) if positions.numel() else 0
    scale = max(1.0, float(x.detach().double().abs().max())) if x.numel() else 1.0
    return scale * (base_atol + 4 * ANGLE_ERR_PER_POSITION * p_max)


def shown(x: torch.Tensor, positions: torch.Tensor, **kwargs) -> dict:
    return {"x": x, "positions": positions, **kwargs}


def expect_value_error(fn, what: str, input: dict) -> None:
    """fn() must raise ValueError; any other exception propagates as the verdict."""
    try:
        got = fn()
    except ValueError:
        return
    raise PropertyFailure(f"{what} must raise ValueError", input=input,
                          expected="ValueError", got=f"returned {type(got).__name__}")


def rope(solution, *args, **kwargs) -> torch.Tensor:
    return call(solution.apply_rope, *args, what="apply_rope", **kwargs)


def inv_freq(solution, *args, **kwargs) -> torch.Tensor:
    return call(solution.rope_inv_freq, *args, what="rope_inv_freq", **kwargs)


def expect_matches_reference(solution, reference, x, positions, prop, **kwargs) -> None:
    expected = reference.apply_rope(x, positions, **kwargs)
    got = rope(solution, x, positions, **kwargs)
    check_close(got, expected, prop, input=shown(x, positions, **kwargs),
                atol=position_atol(x, positions), rtol=0.0)


# ---------------------------------------------------------------------------- level 1


@kata_test(level=1, category="correctness", weight=2,
           description="rope_inv_freq(dim, base) is base ** (-2i / dim), (dim // 2,) float32")
@settings(max_examples=30)
@given(dim=st.integers(1, 8).map(lambda n: 2 * n), base=bases)
def test_inv_freq_matches_formula(solution, reference, dim, base):
    got = inv_freq(solution, dim, base)
    check_close(got, reference.rope_inv_freq(dim, base), "frequencies are base ** (-2i / dim)",
                input={"dim": dim, "base": base}, atol=0.0, rtol=2e-6)


@kata_test(level=1, category="api contract", weight=0.5,
           description="rope_inv_freq raises ValueError for an odd dim")
@settings(max_examples=5)
@given(dim=st.integers(0, 6).map(lambda n: 2 * n + 1))
def test_inv_freq_rejects_odd_dim(solution, dim):
    expect_value_error(lambda: inv_freq(solution, dim), "rope_inv_freq with an odd dim",
                       {"dim": dim})


@kata_test(level=1, category="correctness", weight=3,
           description="apply_rope (rotate-half layout, positions (T,)) matches the reference")
@settings(max_examples=40)
@given(case=rope_cases(), base=bases)
def test_matches_reference(solution, reference, case, base):
    x, positions = case
    expect_matches_reference(solution, reference, x, positions,
                             "apply_rope matches the reference", base=base)


@kata_test(level=1, category="correctness", weight=1,
           description="positions of shape (B, T) give each batch row its own positions")
@settings(max_examples=30)
@given(case=rope_cases(batched_positions=True))
def test_batched_positions_match_reference(solution, reference, case):
    x, positions = case
    expect_matches_reference(solution, reference, x, positions,
                             "with positions (B, T), row b of x uses positions[b]")


@kata_test(level=1, category="edge cases", weight=1,
           description="position 0 is the identity")
@settings(max_examples=20)
@given(case=rope_cases())
def test_position_zero_is_identity(solution, case):
    x, positions = case
    zeros = torch.zeros_like(positions)
    check_close(rope(solution, x, zeros), x, "at position 0 apply_rope returns x",
                input=shown(x, zeros))


@kata_test(level=1, category="numerics", weight=1,
           description="rotation preserves the norm of every token's features")
@settings(max_examples=40)
@given(case=rope_cases(min_head_dim=4))
def test_norm_preserved(solution, case):
    x, positions = case
    got = rope(solution, x, positions)
    expect(isinstance(got, torch.Tensor) and got.shape == x.shape,
           "apply_rope returns a tensor of x's shape", input=shown(x, positions),
           expected=tuple(x.shape), got=getattr(got, "shape", got))
    check_close(got.double().norm(dim=-1), x.double().norm(dim=-1),
                "the norm of each token's features is unchanged", input=shown(x, positions),
                atol=position_atol(x, positions), rtol=1e-6)


@kata_test(level=1, category="correctness", weight=2,
           description="the score q·k after rotation depends only on the distance m - n")
@settings(max_examples=40)
@given(dim=head_dims, m=st.integers(0, 20), n=st.integers(0, 20), shift=st.integers(1, 30),
       data=st.data())
def test_relative_position_property(solution, dim, m, n, shift, data):
    qk = data.draw(tensors((2, dim), low=-3, high=3, integers=True), label="q, k (rows)")

    def score(pos_q: int, pos_k: int) -> float:
        rotated = rope(solution, qk, torch.tensor([pos_q, pos_k]))
        return float(rotated[0].double() @ rotated[1].double())

    before, after = score(m, n), score(m + shift, n + shift)
    scale = max(1.0, float(qk.abs().max()))
    tol = 2 * dim * scale * position_atol(qk, torch.tensor([max(m, n) + shift]))
    expect(abs(before - after) <= tol,
           "q at m and k at n score the same as q at m + s and k at n + s",
           input={"q, k": qk, "m": m, "n": n, "s": shift},
           expected=f"score {before:.6g} (as at m, n)", got=f"score {after:.6g} at m+s, n+s")


@kata_test(level=1, category="correctness", weight=1,
           description="rotating by positions a, then by b, equals rotating by a + b")
@settings(max_examples=30)
@given(case=rope_cases(), data=st.data())
def test_rotation_composes(solution, case, data):
    x, first = case
    second = data.draw(positions_of(x.shape[-2]), label="second positions")
    twice = rope(solution, rope(solution, x, first), second)
    once = rope(solution, x, first + second)
    check_close(twice, once, "apply_rope(apply_rope(x, a), b) equals apply_rope(x, a + b)",
                input=shown(x, first, second_positions=second),
                atol=2 * position_atol(x, first + second), rtol=0.0)


@kata_test(level=1, category="numerics", weight=1,
           description="bf16 inputs stay within 2e-2 * max(1, max|x|) of the float32 result")
@settings(max_examples=30)
@given(dim=head_dims, num_tokens=st.integers(1, 3), data=st.data())
def test_bf16_close_to_float32(solution, reference, dim, num_tokens, data):
    x = data.draw(tensors((num_tokens, dim), low=-3, high=3, integers=True,
                          dtype=torch.bfloat16), label="x")
    positions = data.draw(st.lists(st.integers(0, 4096), min_size=num_tokens,
                                   max_size=num_tokens).map(torch.tensor), label="positions")
    got = rope(solution, x, positions)
    expect(isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16,
           "bf16 input gives a bf16 output", input=shown(x, positions),
           expected="torch.bfloat16", got=getattr(got, "dtype", got))
    expected = reference.apply_rope(x.float(), positions)
    check_close(got.float(), expected, "bf16 result is close to the float32 computation "
                "(angles and cos/sin must be float32)", input=shown(x, positions),
                atol=position_atol(x, positions, base_atol=BF16_ATOL), rtol=0.0)


@kata_test(level=1, category="api contract", weight=0.5,
           description="the output has x's shape and dtype (float16, bfloat16, float32, float64)")
@settings(max_examples=20)
@given(case=rope_cases(), dtype=st.sampled_from([torch.float16, torch.bfloat16,
                                                 torch.float32, torch.float64]))
def test_output_shape_and_dtype(solution, case, dtype):
    x, positions = case
    x = x.to(dtype)
    got = rope(solution, x, positions)
    expect(isinstance(got, torch.Tensor) and got.shape == x.shape and got.dtype == dtype,
           "apply_rope returns x's shape and dtype", input=shown(x, positions),
           expected=f"shape {tuple(x.shape)}, {dtype}",
           got=f"shape {tuple(got.shape)}, {got.dtype}" if isinstance(got, torch.Tensor) else got)


@kata_test(level=1, category="api contract", weight=1,
           description="apply_rope does not modify x or positions")
@settings(max_examples=20)
@given(case=rope_cases(), interleaved=st.booleans())
def test_input_not_modified(solution, case, interleaved):
    x, positions = case
    x_before, positions_before = x.clone(), positions.clone()
    rope(solution, x, positions, interleaved=interleaved)
    expect(torch.equal(x, x_before) and torch.equal(positions, positions_before),
           "x and positions are unchanged after apply_rope",
           input=shown(x_before, positions_before, interleaved=interleaved),
           expected=x_before, got=x)


@kata_test(level=1, category="api contract", weight=0.5,
           description="positions whose length is not T raise ValueError")
@settings(max_examples=10)
@given(case=rope_cases(), extra=st.sampled_from([-1, 1, 2]), batched=st.booleans())
def test_rejects_positions_not_matching_t(solution, case, extra, batched):
    x, _ = case
    num_tokens = x.shape[-2] + extra
    if batched:
        x = x.reshape(-1, *x.shape[-2:])[:1]  # (1, T, D) for positions (1, T')
    positions = torch.arange(max(num_tokens, 0))
    positions = positions[None] if batched else positions
    expect_value_error(lambda: rope(solution, x, positions),
                       "apply_rope with positions not matching T", shown(x, positions))


# ---------------------------------------------------------------------------- level 2


@st.composite
def partial_cases(draw, *, strictly_partial: bool = False):
    """A rope case with D >= 4 and an even rotary_dim R <= D (R < D when strictly_partial)."""
    x, positions = draw(rope_cases(min_head_dim=4))
    head_dim = x.shape[-1]
    top = head_dim - 2 if strictly_partial else head_dim
    rotary_dim = 2 * draw(st.integers(1, top // 2))
    return x, positions, rotary_dim


@kata_test(level=2, category="correctness", weight=2,
           description="interleaved=True (GPT-J pairs) matches the reference")
@settings(max_examples=40)
@given(case=rope_cases(), base=bases)
def test_interleaved_matches_reference(solution, reference, case, base):
    x, positions = case
    expect_matches_reference(solution, reference, x, positions,
                             "interleaved apply_rope matches the reference",
                             base=base, interleaved=True)


@kata_test(level=2, category="correctness", weight=1,
           description="interleaved and rotate-half layouts agree up to the fixed permutation")
@settings(max_examples=30)
@given(case=rope_cases())
def test_interleaved_equals_half_under_permutation(solution, case):
    x, positions = case
    head_dim = x.shape[-1]
    # Interleaved pair (2i, 2i+1) is rotate-half pair (i, i + D/2) of x[..., to_half].
    to_half = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    from_half = torch.argsort(to_half)
    interleaved = rope(solution, x, positions, interleaved=True)
    via_half = rope(solution, x[..., to_half], positions)[..., from_half]
    check_close(interleaved, via_half, "apply_rope(x, interleaved=True) equals the rotate-half "
                "result on x's features reordered (0, 2, 4, .., 1, 3, 5, ..), put back in order",
                input=shown(x, positions), atol=2 * position_atol(x, positions), rtol=0.0)


@kata_test(level=2, category="correctness", weight=2,
           description="rotary_dim (partial rotary) matches the reference, in both layouts")
@settings(max_examples=40)
@given(case=partial_cases(), interleaved=st.booleans())
def test_partial_rotary_matches_reference(solution, reference, case, interleaved):
    x, positions, rotary_dim = case
    expect_matches_reference(solution, reference, x, positions,
                             "apply_rope with rotary_dim matches the reference",
                             rotary_dim=rotary_dim, interleaved=interleaved)


@kata_test(level=2, category="correctness", weight=1,
           description="the rotated part equals apply_rope on x[..., :rotary_dim] alone")
@settings(max_examples=30)
@given(case=partial_cases(strictly_partial=True), interleaved=st.booleans())
def test_partial_rotary_equals_rotating_the_slice(solution, case, interleaved):
    x, positions, rotary_dim = case
    partial = rope(solution, x, positions, rotary_dim=rotary_dim, interleaved=interleaved)
    whole_slice = rope(solution, x[..., :rotary_dim].clone(), positions, interleaved=interleaved)
    expect(isinstance(partial, torch.Tensor) and partial.shape == x.shape,
           "apply_rope with rotary_dim returns x's shape",
           input=shown(x, positions, rotary_dim=rotary_dim), expected=tuple(x.shape),
           got=getattr(partial, "shape", partial))
    check_close(partial[..., :rotary_dim], whole_slice,
                "apply_rope(x, rotary_dim=R)[..., :R] equals apply_rope(x[..., :R]) "
                "(the frequencies use R as the dimension)",
                input=shown(x, positions, rotary_dim=rotary_dim, interleaved=interleaved),
                atol=2 * position_atol(x, positions), rtol=0.0)


@kata_test(level=2, category="correctness", weight=1,
           description="features beyond rotary_dim pass through untouched")
@settings(max_examples=30)
@given(case=partial_cases(strictly_partial=True), interleaved=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]))
def test_pass_through_features_untouched(solution, case, interleaved, dtype):
    x, positions, rotary_dim = case
    x = x.to(dtype)
    got = rope(solution, x, positions, rotary_dim=rotary_dim, interleaved=interleaved)
    expect(isinstance(got, torch.Tensor) and got.shape == x.shape,
           "apply_rope with rotary_dim returns x's shape",
           input=shown(x, positions, rotary_dim=rotary_dim), expected=tuple(x.shape),
           got=getattr(got, "shape", got))
    expect(torch.equal(got[..., rotary_dim:], x[..., rotary_dim:]),
           "out[..., rotary_dim:] equals x[..., rotary_dim:] exactly",
           input=shown(x, positions, rotary_dim=rotary_dim, interleaved=interleaved),
           expected=x[..., rotary_dim:], got=got[..., rotary_dim:])


@kata_test(level=2, category="api contract", weight=0.5,
           description="an odd rotary_dim or one larger than D raises ValueError")
@settings(max_examples=10)
@given(case=rope_cases(), odd=st.booleans(), excess=st.integers(1, 4))
def test_rejects_bad_rotary_dim(solution, case, odd, excess):
    x, positions = case
    head_dim = x.shape[-1]
    rotary_dim = head_dim - 1 if odd else head_dim + 2 * excess
    expect_value_error(lambda: rope(solution, x, positions, rotary_dim=rotary_dim),
                       "apply_rope with rotary_dim odd or > D",
                       shown(x, positions, rotary_dim=rotary_dim))


# ---------------------------------------------------------------------------- level 3

scaling_dims = st.integers(2, 16).map(lambda n: 2 * n)  # 4 .. 32: several bands for llama3


@st.composite
def llama3_scalings(draw) -> dict:
    return {"type": "llama3", "factor": draw(st.sampled_from([2.0, 4.0, 8.0, 32.0])),
            "low_freq_factor": draw(st.sampled_from([1.0, 2.0])),
            "high_freq_factor": draw(st.sampled_from([4.0, 8.0])),
            "original_max_position_embeddings": draw(st.sampled_from([64, 256, 1024, 8192]))}


linear_scalings = st.sampled_from([0.5, 2.0, 2.5, 4.0, 8.0]).map(
    lambda f: {"type": "linear", "factor": f})
scalings = st.one_of(st.none(), linear_scalings, llama3_scalings())


def wavelengths(dim: int, base: float) -> torch.Tensor:
    """2 pi / w_i in float64, to classify components away from the llama3 band edges."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return 2 * math.pi * base ** exponents


@kata_test(level=3, category="correctness", weight=1,
           description="linear scaling divides every frequency by the factor")
@settings(max_examples=20)
@given(dim=scaling_dims, base=bases, scaling=linear_scalings)
def test_linear_inv_freq_matches_reference(solution, reference, dim, base, scaling):
    got = inv_freq(solution, dim, base, scaling)
    check_close(got, reference.rope_inv_freq(dim, base, scaling),
                "linear scaling gives base ** (-2i / dim) / factor",
                input={"dim": dim, "base": base, "scaling": scaling}, atol=0.0, rtol=2e-6)


@kata_test(level=3, category="correctness", weight=2,
           description="llama3 scaling matches Hugging Face's _compute_llama3_parameters")
@settings(max_examples=40)
@given(dim=scaling_dims, base=bases, scaling=st.one_of(st.just(LLAMA31), llama3_scalings()))
def test_llama3_inv_freq_matches_reference(solution, reference, dim, base, scaling):
    got = inv_freq(solution, dim, base, scaling)
    check_close(got, reference.rope_inv_freq(dim, base, scaling),
                "llama3 frequencies match the Llama 3.1 rule",
                input={"dim": dim, "base": base, "scaling": scaling}, atol=0.0, rtol=1e-5)


def _llama3_bands(dim: int, base: float, scaling: dict) -> tuple[torch.Tensor, ...]:
    """Masks (high, medium, low) of components clearly inside each band (0.1% margin)."""
    wavelen = wavelengths(dim, base)
    original = scaling["original_max_position_embeddings"]
    high_edge = original / scaling["high_freq_factor"]
    low_edge = original / scaling["low_freq_factor"]
    high = wavelen < high_edge * 0.999
    low = wavelen > low_edge * 1.001
    medium = (wavelen > high_edge * 1.001) & (wavelen < low_edge * 0.999)
    return high, medium, low


@kata_test(level=3, category="correctness", weight=1,
           description="llama3 leaves high-frequency components (short wavelengths) untouched")
@settings(max_examples=30)
@given(dim=scaling_dims, base=bases, scaling=llama3_scalings())
def test_llama3_keeps_high_frequencies(solution, dim, base, scaling):
    high, _, _ = _llama3_bands(dim, base, scaling)
    plain, scaled = inv_freq(solution, dim, base), inv_freq(solution, dim, base, scaling)
    check_close(scaled[high], plain[high],
                "components with wavelength 2*pi/w < original / high_freq_factor keep w",
                input={"dim": dim, "base": base, "scaling": scaling,
                       "high-frequency components": high.nonzero().flatten().tolist()},
                atol=0.0, rtol=1e-6)


@kata_test(level=3, category="correctness", weight=1,
           description="llama3 divides low frequencies by factor and blends the band between")
@settings(max_examples=30)
@given(dim=scaling_dims, base=bases, scaling=llama3_scalings())
def test_llama3_divides_low_frequencies(solution, dim, base, scaling):
    _, medium, low = _llama3_bands(dim, base, scaling)
    plain, scaled = inv_freq(solution, dim, base), inv_freq(solution, dim, base, scaling)
    shown_input = {"dim": dim, "base": base, "scaling": scaling}
    check_close(scaled[low], plain[low] / scaling["factor"],
                "components with wavelength > original / low_freq_factor become w / factor",
                input={**shown_input, "low-frequency components": low.nonzero().flatten().tolist()},
                atol=0.0, rtol=1e-6)
    lower, upper = plain[medium] / scaling["factor"], plain[medium]
    inside = (scaled[medium] >= lower * (1 - 1e-6)) & (scaled[medium] <= upper * (1 + 1e-6))
    expect(bool(inside.all()), "components between the two wavelengths lie between w / factor "
           "and w", input={**shown_input, "medium components": medium.nonzero().flatten().tolist()},
           expected=f"between {lower.tolist()} and {upper.tolist()}", got=scaled[medium].tolist())


@kata_test(level=3, category="correctness", weight=1,
           description="linear scaling by f at position p equals no scaling at p / f")
@settings(max_examples=30)
@given(case=rope_cases(), factor=st.integers(2, 4))
def test_linear_scaling_equals_dividing_positions(solution, case, factor):
    x, positions = case
    scaling = {"type": "linear", "factor": float(factor)}
    scaled = rope(solution, x, positions * factor, scaling=scaling)
    check_close(scaled, rope(solution, x, positions),
                "apply_rope(x, f * p, scaling=linear f) equals apply_rope(x, p)",
                input=shown(x, positions * factor, scaling=scaling),
                atol=2 * position_atol(x, positions * factor), rtol=0.0)


BAD_SCALINGS = [
    {"type": "ntk", "factor": 2.0},
    {"factor": 2.0},
    {"type": "linear"},
    {"type": "linear", "factor": 0.0},
    {"type": "linear", "factor": -2.0},
    {**LLAMA31, "factor": 0.0},
    {**LLAMA31, "low_freq_factor": 4.0},
    {**LLAMA31, "low_freq_factor": 8.0},
] + [{key: value for key, value in LLAMA31.items() if key != missing}
     for missing in ("factor", "low_freq_factor", "high_freq_factor",
                     "original_max_position_embeddings")]


@kata_test(level=3, category="api contract", weight=1,
           description="bad scaling (unknown type, missing key, factor <= 0, low >= high) "
                       "raises ValueError")
@settings(max_examples=25)
@given(scaling=st.sampled_from(BAD_SCALINGS))
def test_scaling_rejects_bad_config(solution, scaling):
    expect_value_error(lambda: inv_freq(solution, 8, 10000.0, scaling),
                       "rope_inv_freq with a bad scaling", {"dim": 8, "scaling": scaling})


@kata_test(level=3, category="correctness", weight=1,
           description="apply_rope with linear or llama3 scaling matches the reference")
@settings(max_examples=30)
@given(case=partial_cases(), scaling=st.one_of(linear_scalings, llama3_scalings()),
       interleaved=st.booleans())
def test_apply_rope_with_scaling_matches_reference(solution, reference, case, scaling,
                                                   interleaved):
    x, positions, rotary_dim = case
    expect_matches_reference(solution, reference, x, positions,
                             "apply_rope with scaling matches the reference",
                             rotary_dim=rotary_dim, scaling=scaling, interleaved=interleaved)


def make_embedding(solution, dim: int, base: float = 10000.0, scaling: dict | None = None):
    return call(solution.RotaryEmbedding, dim, base, scaling, what="RotaryEmbedding")


def cached_positions(embedding) -> int:
    return call(lambda: embedding.cached_positions, what="RotaryEmbedding.cached_positions")


@kata_test(level=3, category="correctness", weight=2,
           description="RotaryEmbedding(dim)(x, positions) equals "
                       "apply_rope(x, positions, rotary_dim=dim)")
@settings(max_examples=30)
@given(case=partial_cases(), base=bases, scaling=scalings, batched=st.booleans(),
       data=st.data())
def test_rotary_embedding_matches_apply_rope(solution, reference, case, base, scaling,
                                             batched, data):
    x, positions, dim = case
    if batched:
        x, positions = data.draw(rope_cases(batched_positions=True, min_head_dim=dim))
    embedding = make_embedding(solution, dim, base, scaling)
    got = call(embedding, x, positions, what="RotaryEmbedding.__call__")
    expected = reference.apply_rope(x, positions, base, rotary_dim=dim, scaling=scaling)
    check_close(got, expected, "RotaryEmbedding equals apply_rope with rotary_dim=dim",
                input=shown(x, positions, dim=dim, base=base, scaling=scaling),
                atol=position_atol(x, positions), rtol=0.0)


@kata_test(level=3, category="correctness", weight=2,
           description="the cos/sin cache grows on demand, never shrinks, and agrees with "
                       "direct computation")
def test_cache_grows_and_agrees(solution, reference):
    class CacheMachine(RuleBasedStateMachine):
        """Drives one RotaryEmbedding through calls at arbitrary positions and decode
        steps, checking every output against the reference apply_rope."""

        def __init__(self) -> None:
            super().__init__()
            self.embedding = None
            self.dim, self.head_dim, self.next_position = 2, 2, 0
            self.table_len = 0

        @initialize(dim=st.sampled_from([2, 4, 6]), extra=st.sampled_from([0, 2]),
                    base=bases)
        def build(self, dim, extra, base):
            self.dim, self.head_dim, self.base = dim, dim + extra, base
            self.embedding = make_embedding(solution, dim, base)

        def _check_call(self, positions: torch.Tensor, seed: int) -> None:
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn(1, 2, len(positions), self.head_dim, generator=gen)
            got = call(self.embedding, x, positions, what="RotaryEmbedding.__call__")
            expected = reference.apply_rope(x, positions, self.base, rotary_dim=self.dim)
            check_close(got, expected, "RotaryEmbedding agrees with direct computation after "
                        "the calls before it", input=shown(x, positions, dim=self.dim),
                        atol=position_atol(x, positions), rtol=0.0)
            before, after = self.table_len, cached_positions(self.embedding)
            needed = int(positions.max()) + 1
            expect(after >= needed, "after a call, cached_positions covers max(positions) + 1",
                   input={"positions": positions.tolist()}, expected=f">= {needed}", got=after)
            expect(after >= before, "cached_positions never shrinks",
                   input={"positions": positions.tolist()}, expected=f">= {before}", got=after)
            if needed <= before:
                expect(after == before, "a call inside the table does not grow it",
                       input={"positions": positions.tolist()}, expected=before, got=after)
            self.table_len = after

        @rule(positions=st.lists(st.integers(0, 300), min_size=1, max_size=3),
              seed=st.integers(0, 2**16))
        def call_at(self, positions, seed):
            self._check_call(torch.tensor(positions), seed)

        @rule(num_tokens=st.integers(1, 3), seed=st.integers(0, 2**16))
        def decode_next(self, num_tokens, seed):
            start = self.next_position
            self._check_call(torch.arange(start, start + num_tokens), seed)
            self.next_position = start + num_tokens

        @invariant()
        def cached_positions_is_an_int(self):
            """cached_positions is a non-negative int at all times."""
            if self.embedding is not None:
                value = cached_positions(self.embedding)
                expect(isinstance(value, int) and value >= 0,
                       "cached_positions is a non-negative int", got=value)

    run_state_machine_as_test(CacheMachine, settings=settings(max_examples=15,
                                                              stateful_step_count=8))


@kata_test(level=3, category="correctness", weight=1,
           description="a prompt then token-by-token decoding equals one pass over all positions")
@settings(max_examples=20)
@given(num_prompt=st.integers(1, 3), num_decode=st.integers(1, 3), dim=head_dims,
       x_full=st.data())
def test_decode_steps_equal_full_pass(solution, reference, num_prompt, num_decode, dim, x_full):
    total = num_prompt + num_decode
    x = x_full.draw(tensors((1, 2, total, dim), low=-3, high=3, integers=True), label="x")
    full = reference.apply_rope(x, torch.arange(total), rotary_dim=dim)
    embedding = make_embedding(solution, dim)
    pieces = [call(embedding, x[..., :num_prompt, :], torch.arange(num_prompt),
                   what="RotaryEmbedding.__call__")]
    for position in range(num_prompt, total):
        pieces.append(call(embedding, x[..., position:position + 1, :],
                           torch.tensor([position]), what="RotaryEmbedding.__call__"))
    expect(all(isinstance(p, torch.Tensor) for p in pieces), "RotaryEmbedding returns tensors",
           got=[type(p).__name__ for p in pieces])
    check_close(torch.cat(pieces, dim=-2), full,
                "the prompt at positions 0..P-1, then each new token at its own position, "
                "equals rotating the whole sequence at once",
                input={"x": x, "prompt length": num_prompt, "decode steps": num_decode},
                atol=position_atol(x, torch.arange(total)), rtol=0.0)


@kata_test(level=3, category="api contract", weight=0.5,
           description="RotaryEmbedding(dim) on x with D < dim raises ValueError")
@settings(max_examples=10)
@given(case=rope_cases(), excess=st.integers(1, 3))
def test_rotary_embedding_rejects_dim_larger_than_input(solution, case, excess):
    x, positions = case
    dim = x.shape[-1] + 2 * excess
    embedding = make_embedding(solution, dim)
    expect_value_error(lambda: call(embedding, x, positions, what="RotaryEmbedding.__call__"),
                       "RotaryEmbedding with dim > D", shown(x, positions, dim=dim))
