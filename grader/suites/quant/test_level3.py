"""Level 3 of quant: FP8 (E4M3) with Transformer Engine's delayed scaling (FP8Scaler) and an
FP8 GEMM emulating torch._scaled_mm on the CPU (fp8_matmul)."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from grader.protocol import expect, kata_test, run_in_one_process
from grader.suites.quant.cast_trial import quantize_without_saturating_cast
from grader.suites.quant.checks import (close, expect_tensor, expect_tuple, expect_value_error,
                                        guarded, readable, result_tolerance)
from grader.suites.quant.strategies import WEIGHT_DTYPES, amaxes, fp8_operands, with_amax

FP8 = torch.float8_e4m3fn
OUT_DTYPES = (torch.bfloat16, torch.float32, torch.float16)

RULES = {
    "the first call (empty history) scales by its own amax: scale = 448 / amax(x)":
        "test_fp8_first_call_uses_own_amax",
    "delayed scaling: a call's scale comes from max(amax history) before its own amax is recorded":
        ("test_fp8_scale_uses_history_before_current", "test_fp8_quantize_matches_reference"),
    "the history keeps the last history_len amaxes": ("test_fp8_history_truncated", "test_fp8_quantize_matches_reference"),
    "margin: scale = 448 / amax / 2 ** margin": "test_fp8_margin_divides",
    "an amax of 0 gives scale 1 (whatever the margin)": "test_fp8_zero_amax_scale_one",
    "x_fp8 = clamp(x * scale, -448, 448) in float8_e4m3fn, x's shape; scale a 0-d float32 tensor":
        ("test_fp8_output_types", "test_fp8_quantize_matches_reference"),
    "saturation: scaled values beyond +-448 are clamped before the cast, whatever the conversion does":
        "test_fp8_saturates_before_the_cast",
    "ValueError: NaN or inf in x; the rejected call records nothing": "test_fp8_rejects_non_finite",
    "ValueError: history_len < 1 or margin < 0": "test_fp8_scaler_rejects_bad_config",
    "fp8_matmul = (a.float() @ b.float()) / (a_scale * b_scale), b (k, n)":
        ("test_fp8_matmul_undoes_both_scales", "test_fp8_matmul_matches_reference"),
    "fp8_matmul returns out_dtype, bfloat16 by default": "test_fp8_matmul_out_dtype",
    "ValueError: fp8_matmul of operands that are not 2-D float8_e4m3fn or whose inner dimensions differ":
        "test_fp8_matmul_rejects_bad_operands",
    "inputs are not modified": "test_fp8_inputs_not_modified",
    "FP8Scaler() defaults to history_len 16 and margin 0": "test_fp8_scaler_defaults",
}

SETTLED_BY = {
    "the first call (empty history) scales by its own amax: scale = 448 / amax(x)": ("delayed", "fp8-scale"),
    "delayed scaling: a call's scale comes from max(amax history) before its own amax is recorded":
        ("ask", "delayed"),
    "the history keeps the last history_len amaxes": ("ask", "delayed"),
    "margin: scale = 448 / amax / 2 ** margin": "fp8-scale",
    "an amax of 0 gives scale 1 (whatever the margin)": "fp8-scale",
    "x_fp8 = clamp(x * scale, -448, 448) in float8_e4m3fn, x's shape; scale a 0-d float32 tensor":
        ("ask", "fp8-scale", "saturation"),
    "saturation: scaled values beyond +-448 are clamped before the cast, whatever the conversion does":
        "saturation",
    "ValueError: NaN or inf in x; the rejected call records nothing": ("ask", "fp8-errors"),
    "ValueError: history_len < 1 or margin < 0": "fp8-errors",
    "fp8_matmul = (a.float() @ b.float()) / (a_scale * b_scale), b (k, n)": ("ask", "scaled-mm"),
    "fp8_matmul returns out_dtype, bfloat16 by default": "ask",
    "ValueError: fp8_matmul of operands that are not 2-D float8_e4m3fn or whose inner dimensions differ":
        "fp8-errors",
    "inputs are not modified": "ask",
    "FP8Scaler() defaults to history_len 16 and margin 0": "ask",
}
# Rules that are details of the level: an edge an interviewer notes, not one you fail on.
# A scaler's configuration checks and the output dtype of the GEMM are conventions of the API;
# the recipe and the GEMM's arithmetic are the level's point. So are the constructor's defaults.
DETAILS = {"ValueError: history_len < 1 or margin < 0", "fp8_matmul returns out_dtype, bfloat16 by default",
           "FP8Scaler() defaults to history_len 16 and margin 0"}


def make_scaler(solution, history_len: int = 16, margin: int = 0):
    return guarded(solution.FP8Scaler, history_len, margin, what="FP8Scaler",
                   input={"history_len": history_len, "margin": margin})


def quantize(scaler, x: torch.Tensor, calls: list) -> tuple[torch.Tensor, torch.Tensor]:
    """scaler.quantize(x), checked for its types; `calls` is the sequence shown on failure."""
    shown = {"FP8Scaler calls so far (x's amax, dtype)": list(calls)}
    got = guarded(scaler.quantize, x, what="FP8Scaler.quantize", input=shown)
    expect_tuple(got, 2, "FP8Scaler.quantize", input=shown)
    x_fp8, scale = got
    expect_tensor(x_fp8, tuple(x.shape), FP8, "FP8Scaler.quantize's x_fp8", input=shown)
    expect_tensor(scale, (), torch.float32, "FP8Scaler.quantize's scale", input=shown)
    return x_fp8, scale


def run_stream(solution, reference, xs: list[torch.Tensor], prop: str, history_len: int = 16,
               margin: int = 0) -> None:
    """Quantize xs in order with the candidate's and the reference's scalers; every call's
    scale (relative 1e-6) and values (within one E4M3 step) must agree."""
    mine, ref = make_scaler(solution, history_len, margin), reference.FP8Scaler(history_len, margin)
    calls: list = [f"FP8Scaler(history_len={history_len}, margin={margin})"]
    for x in xs:
        calls.append((float(x.float().abs().max()) if x.numel() else 0.0, str(x.dtype)[6:]))
        x_fp8, scale = quantize(mine, x, calls)
        ref_fp8, ref_scale = ref.quantize(x)
        shown = {"calls (x's amax, dtype)": list(calls)}
        close(scale, ref_scale, prop + f" (call {len(calls) - 1}'s scale)", input=shown, atol=0.0, rtol=1e-6)
        close(x_fp8.float(), ref_fp8.float(), prop + f" (call {len(calls) - 1}'s x_fp8 = clamp(x * scale, -448, 448))",
              input={**shown, "x": x}, atol=2.0 ** -9, rtol=0.125)


@kata_test(level=3, category="correctness", weight=1,
           description="the first call scales by its own amax: scale = 448 / amax(x)")
def test_fp8_first_call_uses_own_amax(solution, reference):
    for i, amax in enumerate((1.0, 3.0, 7.5, 1e-3, 1000.0)):
        for dtype in WEIGHT_DTYPES:
            run_stream(solution, reference, [with_amax(i, (2, 5), amax, dtype)],
                       "a fresh scaler's first call maps its own amax to 448")


@kata_test(level=3, category="correctness", weight=2,
           description="delayed scaling: each call's scale comes from the earlier calls' amaxes, not its own")
def test_fp8_scale_uses_history_before_current(solution, reference):
    xs = [with_amax(0, (3, 4), 1.0), with_amax(1, (3, 4), 4.0), with_amax(2, (3, 4), 0.5), with_amax(3, (3, 4), 2.0)]
    # scales 448 (own), 448 (history [1]: the 4.0 tensor saturates), 112, 112
    run_stream(solution, reference, xs, "a call is quantized with the scale of the history before its own "
               "amax is recorded")


@kata_test(level=3, category="correctness", weight=1,
           description="the amax history keeps only the last history_len amaxes")
def test_fp8_history_truncated(solution, reference):
    amax_list = (8.0, 1.0, 1.0, 1.0, 0.5, 0.5)
    for history_len in (1, 2, 3):
        xs = [with_amax(10 + i, (2, 3), a) for i, a in enumerate(amax_list)]
        run_stream(solution, reference, xs, f"history_len = {history_len}: the 8.0 leaves the history after "
                   f"{history_len} more calls", history_len=history_len)


@kata_test(level=3, category="correctness", weight=1,
           description="margin m divides the scale by 2 ** m")
def test_fp8_margin_divides(solution, reference):
    for margin in (1, 2, 3):
        xs = [with_amax(20, (2, 4), 2.0), with_amax(21, (2, 4), 3.0)]
        run_stream(solution, reference, xs, f"margin = {margin}: scale = 448 / amax / 2 ** {margin}", margin=margin)


@kata_test(level=3, category="edge cases", weight=1,
           description="an amax of 0 (an all-zero tensor) gives scale 1, not inf")
def test_fp8_zero_amax_scale_one(solution, reference):
    for margin in (0, 2):
        xs = [with_amax(30, (2, 3), 0.0), with_amax(31, (2, 3), 2.0), with_amax(32, (2, 3), 1.0)]
        run_stream(solution, reference, xs, f"margin = {margin}: an amax of 0 gives scale 1.0 (then the "
                   "history's max decides)", margin=margin)
        run_stream(solution, reference, [with_amax(33, (4,), 0.0), with_amax(34, (4,), 0.0)],
                   f"margin = {margin}: all-zero tensors quantize with scale 1.0", margin=margin)


@st.composite
def streams(draw):
    history_len = draw(st.integers(1, 4))
    margin = draw(st.integers(0, 2))
    num_calls = draw(st.integers(1, 7))
    xs = []
    for _ in range(num_calls):
        shape = draw(st.sampled_from([(3,), (2, 3), (1, 2, 2)]))
        xs.append(with_amax(draw(st.integers(0, 2**16)), shape, draw(amaxes), draw(st.sampled_from(WEIGHT_DTYPES))))
    return history_len, margin, xs


@kata_test(level=3, category="correctness", weight=3,
           description="random streams of tensors: every call's scale and FP8 values match the reference")
@settings(max_examples=25)
@given(stream=streams())
def test_fp8_quantize_matches_reference(solution, reference, stream):
    history_len, margin, xs = stream
    run_stream(solution, reference, xs, "delayed scaling matches the reference", history_len, margin)


@kata_test(level=3, category="api contract", weight=1,
           description="x_fp8 is float8_e4m3fn of x's shape, scale a 0-d float32 tensor")
def test_fp8_output_types(solution):
    scaler = make_scaler(solution)
    for dtype in WEIGHT_DTYPES:
        for shape in ((), (3,), (2, 3), (2, 1, 4)):
            x = with_amax(40, shape, 2.0, dtype) if shape else torch.tensor(2.0, dtype=dtype)
            quantize(scaler, x, [f"x of shape {shape}, {str(dtype)[6:]}"])


@kata_test(level=3, category="numerics", weight=2,
           description="scaled values beyond +-448 are clamped before the cast (no NaN from a non-saturating cast)")
def test_fp8_saturates_before_the_cast(solution, reference):
    xs = [with_amax(50, (2, 4), 1.0), with_amax(51, (2, 4), 8.0), with_amax(52, (2, 4), 2.0, torch.bfloat16)]
    got = run_in_one_process(quantize_without_saturating_cast, solution, 16, 0, xs)
    ref = reference.FP8Scaler(16, 0)
    calls: list = ["FP8Scaler(16, 0)"]
    for x, outcome in zip(xs, got):
        calls.append((float(x.float().abs().max()), str(x.dtype)[6:]))
        ref_fp8, _ = ref.quantize(x)
        expect(outcome[0] == "ok", "FP8Scaler.quantize runs under a float8 conversion that does not saturate",
               input=readable({"calls (x's amax, dtype)": list(calls)}), got=outcome[-1])
        values = torch.tensor(outcome[1])
        close(values, ref_fp8.float().flatten(), "values past 448 after scaling become +-448: clamp before the "
              "cast (under a conversion that does not saturate, as in older torch, they became NaN)",
              input={"calls (x's amax, dtype)": list(calls), "x": x}, atol=2.0 ** -9, rtol=0.125)


@kata_test(level=3, category="api contract", weight=1,
           description="NaN or inf in x raises ValueError, and the rejected call records nothing")
def test_fp8_rejects_non_finite(solution, reference):
    for dtype in WEIGHT_DTYPES:
        bad_values = (float("nan"), float("inf"), float("-inf"))
        for bad in bad_values:
            mine, ref = make_scaler(solution, 2), reference.FP8Scaler(2)
            first = with_amax(60, (2, 3), 2.0, dtype)
            quantize(mine, first, ["first x, amax 2.0"])
            ref.quantize(first)
            x = with_amax(61, (2, 3), 100.0, dtype)
            x[1, 2] = bad
            expect_value_error(lambda: mine.quantize(x.clone()), f"FP8Scaler.quantize of a {str(dtype)[6:]} x "
                               f"holding {bad}", {"x": x})
            calls: list = [f"FP8Scaler(history_len=2): x of amax 2.0, then x holding {bad} (rejected)"]
            for i, amax in enumerate((1.0, 0.5, 0.25)):
                nxt = with_amax(62 + i, (2, 3), amax, dtype)
                calls.append((amax, str(dtype)[6:]))
                _, scale = quantize(mine, nxt, calls)
                _, ref_scale = ref.quantize(nxt)
                close(scale, ref_scale, "after a rejected call, the scales are those of the calls that were "
                      "accepted (the rejected x's amax is not recorded)", input={"calls": list(calls)},
                      atol=0.0, rtol=1e-6)


@kata_test(level=3, category="api contract", weight=0.5,
           description="FP8Scaler() keeps 16 amaxes and uses margin 0")
def test_fp8_scaler_defaults(solution, reference):
    mine = guarded(solution.FP8Scaler, what="FP8Scaler", input="FP8Scaler()")
    ref = reference.FP8Scaler()
    calls: list = ["FP8Scaler()"]
    for i, amax in enumerate([8.0] + [1.0] * 17):  # the 8.0 leaves a 16-long history at call 18
        x = with_amax(80 + i, (2, 2), amax)
        calls.append((amax, "float32"))
        _, scale = quantize(mine, x, calls)
        _, ref_scale = ref.quantize(x)
        close(scale, ref_scale, "FP8Scaler() defaults: history_len 16, margin 0", input={"calls": list(calls)},
              atol=0.0, rtol=1e-6)


@kata_test(level=3, category="api contract", weight=0.5,
           description="FP8Scaler with history_len < 1 or margin < 0 raises ValueError")
def test_fp8_scaler_rejects_bad_config(solution):
    for history_len, margin in ((0, 0), (-1, 0), (4, -1)):
        expect_value_error(lambda: solution.FP8Scaler(history_len, margin),
                           f"FP8Scaler(history_len={history_len}, margin={margin})",
                           {"history_len": history_len, "margin": margin})


@kata_test(level=3, category="correctness", weight=2,
           description="fp8_matmul divides the float32 product by both scales")
def test_fp8_matmul_undoes_both_scales(solution, reference):
    a = torch.tensor([[2.0, 1.0], [-4.0, 0.5]]).to(FP8)  # (m=2, k=2)
    b = torch.tensor([[3.0, 0.0, 1.0], [2.0, -1.0, 8.0]]).to(FP8)  # (k=2, n=3)
    for a_scale, b_scale in ((4.0, 0.5), (448.0 / 3.0, 2.0), (0.25, 0.25)):
        sa, sb = torch.tensor(a_scale), torch.tensor(b_scale)
        shown = {"a_fp8": a, "a_scale": sa, "b_fp8": b, "b_scale": sb, "out_dtype": "torch.float32"}
        got = guarded(solution.fp8_matmul, a, sa, b, sb, torch.float32, what="fp8_matmul", input=shown)
        close(got, reference.fp8_matmul(a, sa, b, sb, torch.float32),
              "fp8_matmul = (a @ b) / (a_scale * b_scale): a_fp8 holds a * a_scale, b_fp8 holds b * b_scale",
              input=shown, atol=0.0, rtol=1e-6)


@kata_test(level=3, category="correctness", weight=2,
           description="fp8_matmul matches the reference for random FP8 operands and scales")
@settings(max_examples=25)
@given(operands=fp8_operands(), out_dtype=st.sampled_from(OUT_DTYPES))
def test_fp8_matmul_matches_reference(solution, reference, operands, out_dtype):
    a, sa, b, sb = operands
    shown = {"a_fp8": a, "a_scale": sa, "b_fp8": b, "b_scale": sb, "out_dtype": str(out_dtype)}
    got = guarded(solution.fp8_matmul, a, sa, b, sb, out_dtype, what="fp8_matmul", input=shown)
    expected = reference.fp8_matmul(a, sa, b, sb, out_dtype)
    expect(isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(expected.shape),
           "fp8_matmul returns (m, n)", input=readable(shown), expected=tuple(expected.shape),
           got=tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__)
    # values in float32 whatever dtype came back (the dtype is test_fp8_matmul_out_dtype's)
    close(got.float(), expected.float(), "(a.float() @ b.float()) / (a_scale * b_scale), accumulated in float32",
          input=shown, **result_tolerance(expected))


@kata_test(level=3, category="api contract", weight=0.5,
           description="fp8_matmul returns out_dtype, bfloat16 by default")
def test_fp8_matmul_out_dtype(solution):
    a = torch.tensor([[1.0, 2.0]]).to(FP8)
    b = torch.tensor([[1.0], [0.5]]).to(FP8)
    sa, sb = torch.tensor(2.0), torch.tensor(1.0)
    shown = {"a_fp8": a, "a_scale": sa, "b_fp8": b, "b_scale": sb}
    got = guarded(solution.fp8_matmul, a, sa, b, sb, what="fp8_matmul", input=shown)
    expect_tensor(got, (1, 1), torch.bfloat16, "fp8_matmul without out_dtype returns bfloat16", input=shown)
    for dtype in OUT_DTYPES:
        got = guarded(solution.fp8_matmul, a, sa, b, sb, dtype, what="fp8_matmul", input=shown)
        expect_tensor(got, (1, 1), dtype, f"fp8_matmul(..., out_dtype={dtype}) returns {dtype}", input=shown)


@kata_test(level=3, category="api contract", weight=0.5,
           description="fp8_matmul of operands that do not fit raises ValueError")
def test_fp8_matmul_rejects_bad_operands(solution):
    one = torch.tensor(1.0)
    a, b = torch.ones(2, 3).to(FP8), torch.ones(3, 4).to(FP8)
    bad = {"inner dimensions 3 and 2": (a, torch.ones(2, 4).to(FP8)),
           "b (4, 3): b must be (k, n), not (n, k)": (a, torch.ones(4, 3).to(FP8)),
           "a 1-D (3,)": (torch.ones(3).to(FP8), b),
           "a float32 (2, 3)": (torch.ones(2, 3), b),
           "b bfloat16 (3, 4)": (a, torch.ones(3, 4, dtype=torch.bfloat16))}
    for what, (x, y) in bad.items():
        expect_value_error(lambda: solution.fp8_matmul(x.clone(), one.clone(), y.clone(), one.clone()),
                           f"fp8_matmul with {what}", {"a": x, "b": y})


@kata_test(level=3, category="api contract", weight=1,
           description="FP8Scaler.quantize and fp8_matmul do not modify their inputs")
def test_fp8_inputs_not_modified(solution):
    scaler = make_scaler(solution)
    for dtype in WEIGHT_DTYPES:
        x = with_amax(70, (2, 4), 600.0, dtype)
        before = x.clone()
        scaler.quantize(x)  # no copies: an in-place edit must show here
        expect(torch.equal(x, before), "FP8Scaler.quantize leaves x unchanged", input=readable({"x": before}),
               expected=readable(before), got=readable(x))
    a, b = torch.ones(2, 3).to(FP8), (torch.arange(12.0).reshape(3, 4) * 10).to(FP8)
    sa, sb = torch.tensor(3.0), torch.tensor(0.5)
    kept = [t.clone() for t in (a, sa, b, sb)]
    solution.fp8_matmul(a, sa, b, sb)
    expect(all(torch.equal(t.view(torch.uint8) if t.dtype == FP8 else t, k.view(torch.uint8) if k.dtype == FP8 else k)
               for t, k in zip((a, sa, b, sb), kept)),
           "fp8_matmul leaves a_fp8, a_scale, b_fp8 and b_scale unchanged",
           input=readable(dict(zip(("a_fp8", "a_scale", "b_fp8", "b_scale"), kept))),
           got=readable({"a_fp8": a, "a_scale": sa, "b_fp8": b, "b_scale": sb}))
