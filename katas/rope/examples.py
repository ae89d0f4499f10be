"""Visible examples for the `rope` kata (`kata check` runs them against your file).

Small fixed inputs with numbers you can check by hand. The hidden suite tests much more
(random shapes, large positions, bf16, properties such as norm preservation).
"""

from __future__ import annotations

import torch

from grader.protocol import expect, expect_value_error, kata_test
from grader.suites._common import check_close

X = torch.tensor([[1.0, 2.0, 3.0, 4.0]])  # (T=1, D=4)
AT_1 = torch.tensor([1])
X_AT_1 = torch.tensor([[-1.98411, 1.95990, 2.46238, 4.01980]])  # the worked example
LLAMA3 = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 2048}


# ---------------------------------------------------------------------------- level 1


@kata_test(level=1, category="correctness", description="rope_inv_freq with dim 4")
def test_inv_freq_dim_4(solution):
    got = solution.rope_inv_freq(4)
    check_close(got, torch.tensor([1.0, 0.01]), "the value rope_inv_freq(4) returns",
                input="rope_inv_freq(dim=4)")


@kata_test(level=1, category="correctness",
           description="the worked example: x = [1, 2, 3, 4] at position 1")
def test_worked_example(solution):
    got = solution.apply_rope(X, AT_1)
    check_close(got, X_AT_1, "the output of apply_rope(x, positions)",
                input="apply_rope(x=[[1., 2., 3., 4.]], positions=[1])", atol=1e-4)


@kata_test(level=1, category="edge cases", description="position 0 leaves x unchanged")
def test_position_zero(solution):
    x = torch.arange(16.0).reshape(2, 2, 4)  # (B=2, T=2, D=4)
    check_close(solution.apply_rope(x, torch.tensor([0, 0])), x, "the output of apply_rope(x, positions)",
                input={"call": "apply_rope(x=arange(16.).reshape(2, 2, 4), positions=[0, 0])", "x": x})


@kata_test(level=1, category="correctness",
           description="positions (B, T): each batch row uses its own positions")
def test_batched_positions(solution):
    x = X.expand(2, 1, 1, 4)  # (B=2, H=1, T=1, D=4)
    positions = torch.tensor([[0], [1]])  # (B=2, T=1)
    got = solution.apply_rope(x, positions)
    expected = torch.stack((X, X_AT_1))[:, None]  # (2, 1, 1, 4)
    check_close(got, expected, "the output of apply_rope(x, positions) with (B, T) positions",
                input="apply_rope(x=[[1., 2., 3., 4.]] for each of B=2 rows (shape (2, 1, 1, 4)), "
                      "positions=[[0], [1]])", atol=1e-4)


@kata_test(level=1, category="api contract",
           description="positions of the wrong length raise ValueError")
def test_positions_must_match_t(solution):
    expect_value_error(lambda: solution.apply_rope(X, torch.tensor([0, 1])),
                       "apply_rope(x=[[1., 2., 3., 4.]], positions=[0, 1])")


# ---------------------------------------------------------------------------- level 2


@kata_test(level=2, category="correctness",
           description="interleaved=True on the worked example")
def test_interleaved_example(solution):
    got = solution.apply_rope(X, AT_1, interleaved=True)
    expected = torch.tensor([[-1.14264, 1.92207, 2.95990, 4.02980]])
    check_close(got, expected, "the output of apply_rope(x, positions, interleaved=True)",
                input="apply_rope(x=[[1., 2., 3., 4.]], positions=[1], interleaved=True)", atol=1e-4)


@kata_test(level=2, category="correctness",
           description="rotary_dim=2 on the worked example")
def test_partial_rotary_example(solution):
    got = solution.apply_rope(X, AT_1, rotary_dim=2)
    expected = torch.tensor([[-1.14264, 1.92207, 3.0, 4.0]])
    check_close(got, expected, "the output of apply_rope(x, positions, rotary_dim=2)",
                input="apply_rope(x=[[1., 2., 3., 4.]], positions=[1], rotary_dim=2)", atol=1e-4)


@kata_test(level=2, category="api contract", description="an odd rotary_dim raises ValueError")
def test_odd_rotary_dim(solution):
    expect_value_error(lambda: solution.apply_rope(X, AT_1, rotary_dim=3),
                       "apply_rope(x=[[1., 2., 3., 4.]], positions=[1], rotary_dim=3)")


# ---------------------------------------------------------------------------- level 3


@kata_test(level=3, category="correctness",
           description="linear scaling with factor 2")
def test_linear_scaling(solution):
    linear = {"type": "linear", "factor": 2.0}
    check_close(solution.rope_inv_freq(4, scaling=linear), torch.tensor([0.5, 0.005]),
                "the value rope_inv_freq returns with linear scaling",
                input=f"rope_inv_freq(dim=4, scaling={linear})")
    got = solution.apply_rope(X, torch.tensor([2]), scaling=linear)
    check_close(got, X_AT_1, "the output of apply_rope with linear scaling",
                input=f"apply_rope(x=[[1., 2., 3., 4.]], positions=[2], scaling={linear})", atol=1e-4)


@kata_test(level=3, category="correctness",
           description="llama3 scaling of rope_inv_freq with dim 8")
def test_llama3_example(solution):
    got = solution.rope_inv_freq(8, scaling=LLAMA3)
    expected = torch.tensor([1.0, 0.1, 0.0078402, 0.000125])
    check_close(got, expected, "the value rope_inv_freq returns with llama3 scaling",
                input=f"rope_inv_freq(dim=8, scaling={LLAMA3})", atol=0.0, rtol=1e-4)


@kata_test(level=3, category="correctness",
           description="RotaryEmbedding grows its table and equals apply_rope")
def test_rotary_embedding_example(solution):
    embedding = solution.RotaryEmbedding(4)
    x = torch.arange(12.0).reshape(1, 3, 4)  # (B=1, T=3, D=4)
    positions = torch.tensor([0, 1, 2])
    got = embedding(x, positions)
    calls = "embedding = RotaryEmbedding(4); embedding(x=arange(12.).reshape(1, 3, 4), positions=[0, 1, 2])"
    check_close(got, solution.apply_rope(x, positions),
                "the output of embedding(x, positions) against your apply_rope(x, positions)", input=calls)
    expect(embedding.cached_positions >= 3, "embedding.cached_positions after the call", input=calls,
           expected=">= 3", got=embedding.cached_positions)
