"""Hidden suite of the quant kata: INT8 per output channel (level 1), group-wise asymmetric
INT4 packed two per byte (level 2), FP8 E4M3 with delayed scaling and an FP8 GEMM (level 3).

Files:
    strategies.py    hypothesis strategies (weights of every dtype, group sizes, amax
                     sequences) and the constructed cases the targeted tests loop over
    checks.py        comparisons with the reference (exact codes, allowing a step only
                     where w / scale sits on a rounding tie), candidate calls that show
                     their input when they raise
    cast_trial.py    a harness run in the candidate's process: FP8Scaler.quantize under a
                     float8 conversion that does not saturate (older torch turns values past
                     448 into NaN), so code that relies on the cast to saturate is seen
    test_level1.py   RULES map + quantize_int8, dequantize_int8, int8_linear
    test_level2.py   RULES map + quantize_int4, dequantize_int4
    test_level3.py   RULES map + FP8Scaler, fp8_matmul

Codes are compared exactly with the reference, except where the reference's w / scale is
within 1e-4 of a rounding tie: there a candidate that divides in another order may land one
step away. Ties themselves (scale exactly 1) are constructed by the rounding tests.
"""
