"""Level 3 of rope: context extension by "linear" and "llama3" frequency scaling, and the
RotaryEmbedding cos/sin cache. The scaling tests are here; the RotaryEmbedding tests are in
test_level3_cache.py; the RULES map below covers both."""

from __future__ import annotations

import copy

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import expect, kata_test
from grader.suites.rope.checks import (close, embed, expect_matches_reference, expect_rotated,
                                       expect_value_error, guarded, inv_freq, make_embedding,
                                       position_atol, readable, rope, shown)
from grader.suites.rope.strategies import (BAD_SCALINGS, LLAMA3_FRACTIONAL_THRESHOLDS, LLAMA31,
                                           SCALING_CONFIGS, bases, llama3, llama3_scalings,
                                           linear_scalings, partial_cases, rope_cases,
                                           scaling_dims, seeded_x, wavelengths)

RULES = {
    "linear scaling divides every w_i by factor (factor 1.0 and factors below 1 included)":
        ("test_linear_every_factor", "test_linear_inv_freq_matches_reference"),
    "linear scaling by f at position f * p equals no scaling at p": "test_linear_scaling_equals_dividing_positions",
    "llama3: the Llama 3.1 rule of Hugging Face's _compute_llama3_parameters (the worked example; "
    "factor 1.0 changes nothing)": ("test_llama3_worked_example", "test_llama3_inv_freq_matches_reference"),
    "llama3 keeps w when the wavelength 2 pi / w < L / high_freq_factor": "test_llama3_keeps_high_frequencies",
    "llama3 divides w by factor when the wavelength > L / low_freq_factor, blends in between":
        "test_llama3_divides_low_frequencies",
    "llama3 compares the wavelength with L / low_freq_factor and L / high_freq_factor exactly "
    "(non-integer quotients are not rounded)": "test_llama3_fractional_thresholds",
    "ValueError: scaling without 'type' (the empty dict included) or of another type, a missing "
    "key, factor <= 0, low_freq_factor >= high_freq_factor (with factor 1.0 too)":
        "test_scaling_rejects_bad_config",
    "apply_rope and RotaryEmbedding apply every scaling (None, linear, llama3)":
        ("test_every_scaling_type_in_apply_rope_and_embedding", "test_apply_rope_with_scaling_matches_reference"),
    "a scaling dict is not modified and can be reused; calls with other scalings share nothing":
        "test_scaling_configs_reused_and_alternated",
    "RotaryEmbedding(dim, base, scaling)(x, positions) equals apply_rope(x, positions, base, "
    "rotary_dim=dim, scaling=scaling); D may exceed dim": "test_rotary_embedding_matches_apply_rope",
    "RotaryEmbedding takes positions as apply_rope does: any integer dtype (int32, int16, int8, "
    "uint8 too), (T,) or (B, T)": "test_rotary_embedding_integer_position_dtypes",
    "ValueError: RotaryEmbedding called on x with D < dim": "test_rotary_embedding_rejects_dim_larger_than_input",
    "the table covers every position a call needs, a call inside it leaves it unchanged, it never "
    "shrinks (grown, then reused)":
        ("test_cache_grown_then_reused", "test_cache_grows_and_agrees"),
    "one RotaryEmbedding serves calls of every dtype and shape in turn (cos/sin stay float32)":
        "test_embedding_reused_across_dtypes_and_shapes",
    "a prompt, then each new token at its own position, equals one pass": "test_decode_steps_equal_full_pass",
    "a rejected call leaves the table, and the next call, as they were": "test_rotary_embedding_after_rejected_call",
}

# Where the statement settles each rule: "ask" (its Ask says it), or the ids of the
# clarifications that answer it (tests/test_katas.py checks every rule has its entry).
SETTLED_BY = {
    'linear scaling divides every w_i by factor (factor 1.0 and factors below 1 included)':
        'linear-scaling',
    'linear scaling by f at position f * p equals no scaling at p':
        'linear-scaling',
    "llama3: the Llama 3.1 rule of Hugging Face's _compute_llama3_parameters (the worked "
    'example; factor 1.0 changes nothing)':
        'llama3-bands',
    'llama3 keeps w when the wavelength 2 pi / w < L / high_freq_factor':
        'llama3-bands',
    'llama3 divides w by factor when the wavelength > L / low_freq_factor, blends in '
    'between':
        'llama3-bands',
    'llama3 compares the wavelength with L / low_freq_factor and L / high_freq_factor '
    'exactly (non-integer quotients are not rounded)':
        'llama3-thresholds',
    "ValueError: scaling without 'type' (the empty dict included) or of another type, a "
    'missing key, factor <= 0, low_freq_factor >= high_freq_factor (with factor 1.0 too)':
        'scaling-errors',
    'apply_rope and RotaryEmbedding apply every scaling (None, linear, llama3)':
        'ask',
    'a scaling dict is not modified and can be reused; calls with other scalings share '
    'nothing':
        ('ask', 'scaling-errors'),
    'RotaryEmbedding(dim, base, scaling)(x, positions) equals apply_rope(x, positions, '
    'base, rotary_dim=dim, scaling=scaling); D may exceed dim':
        ('ask', 'embedding-inputs'),
    'RotaryEmbedding takes positions as apply_rope does: any integer dtype (int32, int16,'
    ' int8, uint8 too), (T,) or (B, T)':
        ('embedding-inputs', 'position-dtypes'),
    'ValueError: RotaryEmbedding called on x with D < dim':
        'embedding-inputs',
    'the table covers every position a call needs, a call inside it leaves it unchanged, '
    'it never shrinks (grown, then reused)':
        'table-growth',
    'one RotaryEmbedding serves calls of every dtype and shape in turn (cos/sin stay '
    'float32)':
        'embedding-inputs',
    'a prompt, then each new token at its own position, equals one pass':
        'table-growth',
    'a rejected call leaves the table, and the next call, as they were':
        'embedding-inputs',
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# Unrounded thresholds only matter when L / lo or L / hi is not an integer (never in a
# published config); integer position dtypes as in level 1; a rejected call that grew the
# table first is an ordering slip, not a wrong cache.
DETAILS = {
    'RotaryEmbedding takes positions as apply_rope does: any integer dtype (int32, int16,'
    ' int8, uint8 too), (T,) or (B, T)',
    'a rejected call leaves the table, and the next call, as they were',
    'llama3 compares the wavelength with L / low_freq_factor and L / high_freq_factor '
    'exactly (non-integer quotients are not rounded)',
}


# ---------------------------------------------------------------------------- frequencies


@kata_test(level=3, category="correctness", weight=1,
           description="linear scaling divides every frequency by the factor")
@settings(max_examples=15)
@given(dim=scaling_dims, base=bases, scaling=linear_scalings)
def test_linear_inv_freq_matches_reference(solution, reference, dim, base, scaling):
    got = inv_freq(solution, dim, base, scaling)
    close(got, reference.rope_inv_freq(dim, base, scaling), "linear scaling gives base ** (-2i / dim) / factor",
          input={"dim": dim, "base": base, "scaling": scaling}, atol=0.0, rtol=2e-6)


@kata_test(level=3, category="correctness", weight=1,
           description="linear scaling with factors 1.0, 0.5, 0.25, 2, 8 and 1000 (int or float)")
def test_linear_every_factor(solution, reference):
    for factor in (1.0, 0.5, 0.25, 2.0, 8.0, 1000.0, 3):
        scaling = {"type": "linear", "factor": factor}
        close(inv_freq(solution, 16, 10000.0, scaling), reference.rope_inv_freq(16, 10000.0, scaling),
              f"linear scaling with factor {factor!r} divides every frequency by it (only factor <= 0 "
              "is an error)", input={"dim": 16, "base": 10000.0, "scaling": scaling}, atol=0.0, rtol=2e-6)


@kata_test(level=3, category="correctness", weight=2,
           description="llama3 scaling matches Hugging Face's _compute_llama3_parameters")
@settings(max_examples=30)
@given(dim=scaling_dims, base=bases, scaling=st.one_of(st.just(LLAMA31), llama3_scalings()))
def test_llama3_inv_freq_matches_reference(solution, reference, dim, base, scaling):
    scaling = copy.deepcopy(scaling)
    got = inv_freq(solution, dim, base, scaling)
    close(got, reference.rope_inv_freq(dim, base, scaling), "llama3 frequencies match the Llama 3.1 rule",
          input={"dim": dim, "base": base, "scaling": scaling}, atol=0.0, rtol=1e-5)


@kata_test(level=3, category="correctness", weight=1,
           description="the llama3 worked example (dim 8, factor 8, low 1, high 4, L 2048) and factor 1.0")
def test_llama3_worked_example(solution, reference):
    cases = ((8, 10000.0, llama3(8.0), "the worked example: [1.0, 0.1, 0.00784, 0.000125] (two kept, "
              "one blended with smooth = 0.753, one divided by 8)"),
             (16, 10000.0, llama3(1.0), "factor 1.0: every frequency unchanged"),
             (32, 500000.0, LLAMA31, "Llama 3.1's own configuration"),
             (16, 10000.0, llama3(4.0, 1.0, 4.0, 256), "L = 256: several blended components"))
    for dim, base, scaling, what in cases:
        close(inv_freq(solution, dim, base, dict(scaling)), reference.rope_inv_freq(dim, base, scaling),
              f"llama3, {what}", input={"dim": dim, "base": base, "scaling": scaling}, atol=0.0, rtol=1e-5)


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
@settings(max_examples=20)
@given(dim=scaling_dims, base=bases, scaling=llama3_scalings())
def test_llama3_keeps_high_frequencies(solution, dim, base, scaling):
    high, _, _ = _llama3_bands(dim, base, scaling)
    plain, scaled = inv_freq(solution, dim, base), inv_freq(solution, dim, base, dict(scaling))
    close(scaled[high], plain[high], "components with wavelength 2*pi/w < original / high_freq_factor keep w",
          input={"dim": dim, "base": base, "scaling": scaling,
                 "high-frequency components": high.nonzero().flatten().tolist()}, atol=0.0, rtol=1e-6)


@kata_test(level=3, category="correctness", weight=1,
           description="llama3 divides low frequencies by factor and blends the band between")
@settings(max_examples=20)
@given(dim=scaling_dims, base=bases, scaling=llama3_scalings())
def test_llama3_divides_low_frequencies(solution, dim, base, scaling):
    _, medium, low = _llama3_bands(dim, base, scaling)
    plain, scaled = inv_freq(solution, dim, base), inv_freq(solution, dim, base, dict(scaling))
    shown_input = {"dim": dim, "base": base, "scaling": scaling}
    close(scaled[low], plain[low] / scaling["factor"],
          "components with wavelength > original / low_freq_factor become w / factor",
          input={**shown_input, "low-frequency components": low.nonzero().flatten().tolist()}, atol=0.0, rtol=1e-6)
    lower, upper = plain[medium] / scaling["factor"], plain[medium]
    inside = (scaled[medium] >= lower * (1 - 1e-6)) & (scaled[medium] <= upper * (1 + 1e-6))
    expect(bool(inside.all()), "components between the two wavelengths lie between w / factor and w",
           input={**shown_input, "medium components": medium.nonzero().flatten().tolist()},
           expected=f"between {lower.tolist()} and {upper.tolist()}", got=scaled[medium].tolist())


@kata_test(level=3, category="correctness", weight=1,
           description="llama3 thresholds L / low_freq_factor and L / high_freq_factor that are not integers")
def test_llama3_fractional_thresholds(solution, reference):
    for scaling, what in LLAMA3_FRACTIONAL_THRESHOLDS:
        close(inv_freq(solution, 16, 10000.0, dict(scaling)), reference.rope_inv_freq(16, 10000.0, scaling),
              f"llama3 compares each wavelength with L / lo and L / hi exactly, not rounded: {what}",
              input={"dim": 16, "base": 10000.0, "scaling": scaling}, atol=0.0, rtol=1e-5)


@kata_test(level=3, category="correctness", weight=1,
           description="linear scaling by f at position p equals no scaling at p / f")
@settings(max_examples=20)
@given(case=rope_cases(), factor=st.integers(2, 4))
def test_linear_scaling_equals_dividing_positions(solution, case, factor):
    x, positions = case
    scaling = {"type": "linear", "factor": float(factor)}
    scaled = rope(solution, x, positions * factor, scaling=scaling)
    close(scaled, rope(solution, x, positions), "apply_rope(x, f * p, scaling=linear f) equals apply_rope(x, p)",
          input=shown(x, positions * factor, scaling=scaling), atol=2 * position_atol(x, positions * factor), rtol=0.0)


@kata_test(level=3, category="api contract", weight=1,
           description="bad scaling (no or unknown type, the empty dict, a missing key, factor <= 0, "
                       "low >= high; with factor 1.0 too) raises ValueError in rope_inv_freq and apply_rope")
def test_scaling_rejects_bad_config(solution):
    x, positions = torch.ones(2, 8), torch.tensor([0, 1])
    for scaling in BAD_SCALINGS:
        expect_value_error(lambda: solution.rope_inv_freq(8, 10000.0, dict(scaling)),
                           "rope_inv_freq with a bad scaling", {"dim": 8, "scaling": scaling})
        expect_value_error(lambda: solution.apply_rope(x.clone(), positions.clone(), scaling=dict(scaling)),
                           "apply_rope with a bad scaling", shown(x, positions, scaling=scaling))


@kata_test(level=3, category="correctness", weight=1,
           description="apply_rope with linear or llama3 scaling matches the reference")
@settings(max_examples=20)
@given(case=partial_cases(), scaling=st.one_of(linear_scalings, llama3_scalings()), interleaved=st.booleans())
def test_apply_rope_with_scaling_matches_reference(solution, reference, case, scaling, interleaved):
    x, positions, rotary_dim = case
    expect_matches_reference(solution, reference, x, positions, "apply_rope with scaling matches the reference",
                             rotary_dim=rotary_dim, scaling=scaling, interleaved=interleaved)


@kata_test(level=3, category="correctness", weight=1,
           description="every scaling (none, linear 1.0 / 0.5 / 4, llama3 1 / 8 / 32) in apply_rope and RotaryEmbedding")
def test_every_scaling_type_in_apply_rope_and_embedding(solution, reference):
    x, positions = seeded_x(70, (1, 3, 16)), torch.tensor([0, 9, 3000])
    for scaling in SCALING_CONFIGS:
        kwargs = {"rotary_dim": 12, "scaling": copy.deepcopy(scaling)}
        expect_matches_reference(solution, reference, x, positions, f"apply_rope with scaling={scaling}",
                                 **kwargs)
        embedding = make_embedding(solution, 12, 10000.0, copy.deepcopy(scaling))
        expect_rotated(embed(embedding, x, positions, dim=12, scaling=scaling), reference, x, positions,
                       f"RotaryEmbedding(12, scaling={scaling})(x, positions) equals apply_rope(x, positions, "
                       "rotary_dim=12, scaling=scaling)", shown_input=shown(x, positions, dim=12, scaling=scaling),
                       **kwargs)


@kata_test(level=3, category="correctness", weight=1,
           description="one scaling dict reused for several calls is not modified; scalings used in turn share nothing")
def test_scaling_configs_reused_and_alternated(solution, reference):
    x, positions = seeded_x(80, (3, 8)), torch.tensor([0, 100, 2000])
    configs = (None, {"type": "linear", "factor": 4.0}, llama3(8.0, 1.0, 4.0, 64), None,
               {"type": "linear", "factor": 2.0})
    for round_ in range(2):  # every dict used twice: a popped key shows on its second use
        for scaling in configs:
            before = copy.deepcopy(scaling)
            shown_input = {"dim": 8, "scaling": before, "call round": round_ + 1}
            got = guarded(solution.rope_inv_freq, 8, 10000.0, scaling, what="rope_inv_freq", input=shown_input)
            expect(scaling == before, "rope_inv_freq does not modify the scaling dict it is given "
                   "(one config dict is shared by every layer)", input=shown_input, expected=before, got=scaling)
            close(got, reference.rope_inv_freq(8, 10000.0, before), f"rope_inv_freq(8, scaling={before}): the "
                  "frequencies of this scaling, whatever the calls before", input=shown_input, atol=0.0, rtol=1e-5)
            got = guarded(solution.apply_rope, x.clone(), positions.clone(), scaling=scaling, what="apply_rope",
                          input={**shown(x, positions, scaling=before), "call round": round_ + 1})
            expect(scaling == before, "apply_rope does not modify the scaling dict it is given",
                   input=readable({"scaling": before}), expected=before, got=scaling)
            expect_rotated(got, reference, x, positions, f"apply_rope(x, positions, scaling={before}): the "
                           "same result whatever the calls before", scaling=before)
