"""Visible examples for the flash-attn kata: `kata check` runs them against your solution.

Small fixed inputs you can check by hand (the worked example of the statement). The hidden
suite checks many more cases, and measures memory, FLOPs and operation counts."""

import math

import torch

from grader.protocol import expect, kata_test


def t(values):
    """A (1, 1, T, D) float32 tensor from a nested list of shape (T, D)."""
    return torch.tensor(values, dtype=torch.float32)[None, None]


def close(got, expected, atol=1e-3):
    return (isinstance(got, torch.Tensor) and got.shape == expected.shape
            and bool(torch.allclose(got.float(), expected.float(), atol=atol, equal_nan=False)))


Q, K, V = t([[1.0]]), t([[0.0], [1.0], [2.0]]), t([[10.0], [20.0], [30.0]])
LSE = math.log(1 + math.e + math.e ** 2)  # 2.4076


@kata_test(level=1, category="correctness", description="worked example: one query, three keys in tiles of 2")
def test_worked_example(solution):
    out, lse = solution.flash_attention(Q, K, V, scale=1.0, block_k=2)
    expect(close(out, t([[25.752]])), "out = softmax([0, 1, 2]) · [10, 20, 30]", input="q=[[1]], "
           "k=[[0],[1],[2]], v=[[10],[20],[30]], scale=1, block_k=2", expected=25.752, got=out)
    expect(close(lse, torch.tensor([[[LSE]]])) and lse.dtype == torch.float32,
           "lse = ln(1 + e + e²) = 2.4076, float32", expected=LSE, got=lse)


@kata_test(level=1, category="edge cases", description="causal with Tq > Tk: rows that see nothing are 0 / -inf")
def test_causal_rows_with_nothing_to_attend(solution):
    out, lse = solution.flash_attention(t([[0.0]] * 4), t([[0.0], [0.0]]), t([[10.0], [20.0]]),
                                        causal=True, block_q=2, block_k=1)
    expect(close(out, t([[0.0], [0.0], [10.0], [15.0]])), "queries 0, 1 see no key; 2 sees key 0; 3 both",
           input="Tq=4, Tk=2, all scores 0, v=[10, 20]", expected=[0, 0, 10, 15], got=out)
    expected_lse = torch.tensor([[[-math.inf, -math.inf, 0.0, math.log(2)]]])
    expect(isinstance(lse, torch.Tensor) and torch.allclose(lse, expected_lse, atol=1e-5),
           "lse is -inf for rows with nothing to attend", expected=expected_lse, got=lse)


@kata_test(level=2, category="correctness", description="combine_partials merges the two splits of the example")
def test_combine_worked_example(solution):
    outs = torch.tensor([[[[17.311]]], [[[30.0]]]])           # (S=2, B=1, H=1, D=1)
    lses = torch.tensor([[[1.0 + math.log(1 + math.exp(-1))]], [[2.0]]])
    out, lse = solution.combine_partials(outs, lses)
    expect(close(out, torch.tensor([[[25.752]]])), "out = sum_s exp(lse_s - lse) out_s",
           input="outs [17.311, 30], lses [1.3133, 2]", expected=25.752, got=out)
    expect(close(lse, torch.tensor([[LSE]])), "lse = log(sum_s exp(lse_s))", expected=LSE, got=lse)


@kata_test(level=2, category="edge cases", description="an empty split (lse -inf, out NaN) contributes nothing")
def test_combine_empty_split(solution):
    outs = torch.tensor([[[[5.0]]], [[[float("nan")]]]])
    lses = torch.tensor([[[0.5]], [[-math.inf]]])
    out, lse = solution.combine_partials(outs, lses)
    expect(close(out, torch.tensor([[[5.0]]])) and close(lse, torch.tensor([[0.5]])),
           "the -inf split is ignored", input="outs [5, nan], lses [0.5, -inf]", expected=(5.0, 0.5), got=(out, lse))


@kata_test(level=3, category="correctness", description="a paged sequence read through its block table")
def test_flash_decode_paged(solution):
    # BS = 2; sequence 0 has 3 tokens in blocks [2, 0] (entry 99 is garbage); sequence 1 is empty
    k_cache = torch.zeros(3, 2, 1, 1)
    v_cache = torch.zeros(3, 2, 1, 1)
    v_cache[2, 0], v_cache[2, 1], v_cache[0, 0] = 10.0, 20.0, 30.0  # tokens 0, 1, 2
    v_cache[0, 1] = float("nan")                                      # a slot nobody owns
    q = torch.zeros(2, 1, 1)
    table = torch.tensor([[2, 0, 99], [1, 1, 1]])
    out = solution.flash_decode(q, k_cache, v_cache, table, torch.tensor([3, 0]), num_splits=2)
    expected = torch.tensor([[[20.0]], [[0.0]]])  # equal scores: the mean of 10, 20, 30
    expect(close(out, expected), "dense attention over each sequence's own tokens; empty -> 0",
           input="seq_lens [3, 0], block_table [[2, 0, 99], [1, 1, 1]]", expected=expected, got=out)
