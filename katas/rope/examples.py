"""Visible examples for the `rope` kata (`kata check` runs them against your file).

Small fixed inputs with numbers you can check by hand. The hidden suite tests much more
(random shapes, large positions, bf16, properties such as norm preservation).
"""

from __future__ import annotations

import pytest
import torch

from grader.protocol import expect, kata_test
from grader.suites._common import check_close

X = torch.tensor([[1.0, 2.0, 3.0, 4.0]])  # (T=1, D=4)
AT_1 = torch.tensor([1])
X_AT_1 = torch.tensor([[-1.98411, 1.95990, 2.46238, 4.01980]])  # the worked example
LLAMA3 = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 2048}


# ---------------------------------------------------------------------------- level 1


@kata_test(level=1, category="correctness", description="rope_inv_freq(4) is [1, 0.01]")
def test_inv_freq_dim_4(solution):
    got = solution.rope_inv_freq(4)
    check_close(got, torch.tensor([1.0, 0.01]), "rope_inv_freq(4) = [1, 10000 ** -0.5]",
                input={"dim": 4})


@kata_test(level=1, category="correctness",
           description="the worked example: x = [1, 2, 3, 4] at position 1")
def test_worked_example(solution):
    got = solution.apply_rope(X, AT_1)
    check_close(got, X_AT_1, "pairs (x0, x2) turn by 1 rad, (x1, x3) by 0.01 rad",
                input={"x": X, "positions": AT_1}, atol=1e-4)


@kata_test(level=1, category="edge cases", description="position 0 leaves x unchanged")
def test_position_zero(solution):
    x = torch.arange(16.0).reshape(2, 2, 4)  # (B=2, T=2, D=4)
    check_close(solution.apply_rope(x, torch.tensor([0, 0])), x, "position 0 is the identity",
                input={"x": x, "positions": [0, 0]})


@kata_test(level=1, category="correctness",
           description="positions (B, T): each batch row uses its own positions")
def test_batched_positions(solution):
    x = X.expand(2, 1, 1, 4)  # (B=2, H=1, T=1, D=4)
    positions = torch.tensor([[0], [1]])  # (B=2, T=1)
    got = solution.apply_rope(x, positions)
    expected = torch.stack((X, X_AT_1))[:, None]  # (2, 1, 1, 4)
    check_close(got, expected, "row 0 at position 0, row 1 at position 1",
                input={"x": x, "positions": positions}, atol=1e-4)


@kata_test(level=1, category="api contract",
           description="positions of the wrong length raise ValueError")
def test_positions_must_match_t(solution):
    with pytest.raises(ValueError):
        solution.apply_rope(X, torch.tensor([0, 1]))


# ---------------------------------------------------------------------------- level 2


@kata_test(level=2, category="correctness",
           description="interleaved=True: pairs (x0, x1) and (x2, x3)")
def test_interleaved_example(solution):
    got = solution.apply_rope(X, AT_1, interleaved=True)
    expected = torch.tensor([[-1.14264, 1.92207, 2.95990, 4.02980]])
    check_close(got, expected, "GPT-J pairs turn by 1 rad and 0.01 rad",
                input={"x": X, "positions": AT_1, "interleaved": True}, atol=1e-4)


@kata_test(level=2, category="correctness",
           description="rotary_dim=2 rotates (x0, x1) with w = [1.0] and passes x2, x3 through")
def test_partial_rotary_example(solution):
    got = solution.apply_rope(X, AT_1, rotary_dim=2)
    expected = torch.tensor([[-1.14264, 1.92207, 3.0, 4.0]])
    check_close(got, expected, "only the first rotary_dim features turn",
                input={"x": X, "positions": AT_1, "rotary_dim": 2}, atol=1e-4)


@kata_test(level=2, category="api contract", description="an odd rotary_dim raises ValueError")
def test_odd_rotary_dim(solution):
    with pytest.raises(ValueError):
        solution.apply_rope(X, AT_1, rotary_dim=3)


# ---------------------------------------------------------------------------- level 3


@kata_test(level=3, category="correctness",
           description="linear scaling by 2 at position 2 equals no scaling at position 1")
def test_linear_scaling(solution):
    linear = {"type": "linear", "factor": 2.0}
    check_close(solution.rope_inv_freq(4, scaling=linear), torch.tensor([0.5, 0.005]),
                "linear scaling divides the frequencies", input={"dim": 4, "scaling": linear})
    got = solution.apply_rope(X, torch.tensor([2]), scaling=linear)
    check_close(got, X_AT_1, "position 2 / factor 2 = position 1 (the worked example)",
                input={"x": X, "positions": [2], "scaling": linear}, atol=1e-4)


@kata_test(level=3, category="correctness",
           description="llama3: keep short wavelengths, divide long ones, blend in between")
def test_llama3_example(solution):
    got = solution.rope_inv_freq(8, scaling=LLAMA3)
    expected = torch.tensor([1.0, 0.1, 0.0078402, 0.000125])
    check_close(got, expected, "wavelengths 6.3 and 63 kept, 628 blended, 6283 divided by 8",
                input={"dim": 8, "scaling": LLAMA3}, atol=0.0, rtol=1e-4)


@kata_test(level=3, category="correctness",
           description="RotaryEmbedding grows its table and equals apply_rope")
def test_rotary_embedding_example(solution):
    embedding = solution.RotaryEmbedding(4)
    x = torch.arange(12.0).reshape(1, 3, 4)  # (B=1, T=3, D=4)
    positions = torch.tensor([0, 1, 2])
    got = embedding(x, positions)
    check_close(got, solution.apply_rope(x, positions), "RotaryEmbedding(4) = apply_rope",
                input={"x": x, "positions": positions})
    expect(embedding.cached_positions >= 3, "the table covers positions 0..2",
           expected=">= 3", got=embedding.cached_positions)
