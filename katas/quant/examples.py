"""Visible examples for the `quant` kata (`kata check` runs them against your file).

Small fixed inputs with numbers you can check by hand: the statement's worked examples. The
hidden suite tests much more (every dtype, random weights, rounding ties, all-zero rows, the
group axis, saturation, long streams for the scaler).
"""

from __future__ import annotations

import torch

from grader.protocol import expect, expect_value_error, kata_test
from grader.suites._common import check_close

W8 = torch.tensor([[0.5, -1.27, 0.3, 0.0], [0.0, 0.0, 0.0, 0.0], [2.54, 1.0, -0.02, 0.01]])
Q8 = torch.tensor([[50, -127, 30, 0], [0, 0, 0, 0], [127, 50, -1, 0]], dtype=torch.int8)
SCALE8 = torch.tensor([0.01, torch.finfo(torch.float32).eps, 0.02])
W4 = torch.tensor([[-2.0, 0.0, 2.5, 13.0, 1.0, 2.0, 3.0, 4.0]])
FP8 = torch.float8_e4m3fn


# ---------------------------------------------------------------------------- level 1


@kata_test(level=1, category="correctness", description="quantize_int8 on the worked example")
def test_quantize_int8_example(solution):
    q, scale = solution.quantize_int8(W8)
    check_close(scale, SCALE8, "the scale quantize_int8 returns", input="quantize_int8(w of the worked example)",
                atol=0.0, rtol=1e-6)
    expect(isinstance(q, torch.Tensor) and q.dtype == torch.int8 and torch.equal(q, Q8),
           "q = clamp(round(w / scale), -127, 127), int8", input="quantize_int8(w of the worked example)",
           expected=Q8, got=q)


@kata_test(level=1, category="correctness", description="dequantize_int8 and int8_linear on the worked example")
def test_int8_linear_example(solution):
    check_close(solution.dequantize_int8(Q8, SCALE8), Q8.float() * SCALE8[:, None],
                "dequantize_int8(q, scale)", input="dequantize_int8(q, scale of the worked example)")
    x = torch.tensor([[1.0, 2.0, 0.0, -1.0]])
    check_close(solution.int8_linear(x, Q8, SCALE8), torch.tensor([[-2.04, 0.0, 4.54]]),
                "int8_linear(x, q, scale)", input="int8_linear(x=[[1., 2., 0., -1.]], q, scale)", atol=1e-5)


@kata_test(level=1, category="api contract", description="int8_linear with x of the wrong width raises ValueError")
def test_int8_linear_bad_width(solution):
    expect_value_error(lambda: solution.int8_linear(torch.ones(1, 3), Q8, SCALE8),
                       "int8_linear(x of shape (1, 3), q of shape (3, 4), scale)")


# ---------------------------------------------------------------------------- level 2


@kata_test(level=2, category="correctness", description="quantize_int4 on the worked example (group_size 4)")
def test_quantize_int4_example(solution):
    packed, scales, zeros = solution.quantize_int4(W4, 4)
    expected = torch.tensor([[0x20, 0xF4, 0xA5, 0xFF]], dtype=torch.uint8)
    expect(isinstance(packed, torch.Tensor) and packed.dtype == torch.uint8 and torch.equal(packed, expected),
           "packed codes, column 2j in the low nibble", input="quantize_int4(w of the worked example, 4)",
           expected=[hex(v) for v in expected[0].tolist()],
           got=[hex(v) for v in packed.flatten().tolist()] if isinstance(packed, torch.Tensor) else packed)
    check_close(scales, torch.tensor([[1.0, 0.2]]), "scales", input="quantize_int4(w, 4)", atol=0.0, rtol=1e-6)
    expect(torch.equal(zeros, torch.tensor([[2, 0]], dtype=torch.uint8)), "zero points (uint8)",
           input="quantize_int4(w, 4)", expected=[[2, 0]], got=zeros)


@kata_test(level=2, category="correctness", description="dequantize_int4 on the worked example")
def test_dequantize_int4_example(solution):
    packed = torch.tensor([[0x20, 0xF4, 0xA5, 0xFF]], dtype=torch.uint8)
    got = solution.dequantize_int4(packed, torch.tensor([[1.0, 0.2]]), torch.tensor([[2, 0]], dtype=torch.uint8), 4)
    check_close(got, torch.tensor([[-2.0, 0.0, 2.0, 13.0, 1.0, 2.0, 3.0, 3.0]]), "dequantize_int4",
                input="dequantize_int4(packed, scales, zeros of the worked example, 4)", atol=1e-6)


@kata_test(level=2, category="api contract", description="an odd group_size raises ValueError")
def test_int4_odd_group_size(solution):
    expect_value_error(lambda: solution.quantize_int4(torch.ones(2, 6), 3), "quantize_int4(w (2, 6), group_size=3)")


# ---------------------------------------------------------------------------- level 3


@kata_test(level=3, category="correctness", description="FP8Scaler(history_len=2) on the worked example's stream")
def test_fp8_scaler_example(solution):
    scaler = solution.FP8Scaler(history_len=2)
    stream = [([1.0, -0.5], 448.0, [448.0, -224.0]), ([4.0, 0.1], 448.0, [448.0, 44.0]),
              ([0.0, 0.0], 112.0, [0.0, 0.0]), ([2.0, 1.0], 112.0, [224.0, 112.0]),
              ([2.0, 1.0], 224.0, [448.0, 224.0])]
    for i, (x, scale, values) in enumerate(stream):
        x_fp8, got_scale = scaler.quantize(torch.tensor(x))
        what = f"call {i + 1} of the worked example, quantize({x})"
        check_close(got_scale, torch.tensor(scale), f"the scale of {what}", input=what, atol=0.0, rtol=1e-6)
        expect(isinstance(x_fp8, torch.Tensor) and x_fp8.dtype == FP8, f"{what} returns float8_e4m3fn",
               input=what, expected="torch.float8_e4m3fn", got=getattr(x_fp8, "dtype", x_fp8))
        check_close(x_fp8.float(), torch.tensor(values), f"the values of {what}", input=what, atol=0.0, rtol=0.0)


@kata_test(level=3, category="correctness", description="fp8_matmul on the worked example")
def test_fp8_matmul_example(solution):
    a = torch.tensor([[224.0, 448.0]]).to(FP8)
    b = torch.tensor([[320.0], [56.0]]).to(FP8)
    got = solution.fp8_matmul(a, torch.tensor(224.0), b, torch.tensor(112.0))
    check_close(got, torch.tensor([[3.857]], dtype=torch.bfloat16), "fp8_matmul(a, 224, b, 112)",
                input="fp8_matmul(a=[[224, 448]], a_scale=224, b=[[320], [56]], b_scale=112)", atol=1e-2, rtol=0.0)
