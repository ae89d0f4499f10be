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
LSE = math.log(1 + math.e + math.e ** 2)


@kata_test(level=1, category="correctness", description="worked example: one query, three keys in tiles of 2")
def test_worked_example(solution):
    out, lse = solution.flash_attention(Q, K, V, scale=1.0, block_k=2)
    call = "flash_attention(q=[[1]], k=[[0],[1],[2]], v=[[10],[20],[30]], scale=1.0, block_k=2)"
    expect(close(out, t([[25.752]])), "the out flash_attention returns", input=call, expected=25.752,
           got=out)
    expect(close(lse, torch.tensor([[[LSE]]])) and lse.dtype == torch.float32,
           "the lse flash_attention returns (float32)", input=call, expected=LSE, got=lse)


@kata_test(level=1, category="edge cases", description="causal with Tq > Tk: rows that see nothing are 0 / -inf")
def test_causal_rows_with_nothing_to_attend(solution):
    out, lse = solution.flash_attention(t([[0.0]] * 4), t([[0.0], [0.0]]), t([[10.0], [20.0]]),
                                        causal=True, block_q=2, block_k=1)
    call = ("flash_attention(q=[[0],[0],[0],[0]], k=[[0],[0]], v=[[10],[20]], causal=True, block_q=2, "
            "block_k=1)")
    expect(close(out, t([[0.0], [0.0], [10.0], [15.0]])), "the out flash_attention returns",
           input=call, expected=[0, 0, 10, 15], got=out)
    expected_lse = torch.tensor([[[-math.inf, -math.inf, 0.0, math.log(2)]]])
    expect(isinstance(lse, torch.Tensor) and torch.allclose(lse, expected_lse, atol=1e-5),
           "the lse flash_attention returns", input=call, expected=expected_lse, got=lse)


@kata_test(level=2, category="correctness", description="combine_partials merges the two splits of the example")
def test_combine_worked_example(solution):
    outs = torch.tensor([[[[17.311]]], [[[30.0]]]])           # (S=2, B=1, H=1, D=1)
    lses = torch.tensor([[[1.0 + math.log(1 + math.exp(-1))]], [[2.0]]])
    out, lse = solution.combine_partials(outs, lses)
    call = "combine_partials(outs=[17.311, 30.0], lses=[1.3133, 2.0]), shapes (2, 1, 1, 1) and (2, 1, 1)"
    expect(close(out, torch.tensor([[[25.752]]])), "the out combine_partials returns", input=call,
           expected=25.752, got=out)
    expect(close(lse, torch.tensor([[LSE]])), "the lse combine_partials returns", input=call,
           expected=LSE, got=lse)


@kata_test(level=2, category="edge cases", description="an empty split (lse -inf, out NaN) contributes nothing")
def test_combine_empty_split(solution):
    outs = torch.tensor([[[[5.0]]], [[[float("nan")]]]])
    lses = torch.tensor([[[0.5]], [[-math.inf]]])
    out, lse = solution.combine_partials(outs, lses)
    expect(close(out, torch.tensor([[[5.0]]])) and close(lse, torch.tensor([[0.5]])),
           "the (out, lse) combine_partials returns", input="combine_partials(outs=[5.0, nan], "
           "lses=[0.5, -inf]), shapes (2, 1, 1, 1) and (2, 1, 1)", expected=(5.0, 0.5), got=(out, lse))


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
    expected = torch.tensor([[[20.0]], [[0.0]]])
    expect(close(out, expected), "the output flash_decode returns",
           input="flash_decode(q=zeros(2, 1, 1), k_cache=zeros(3, 2, 1, 1), v_cache with sequence 0's "
                 "tokens 10, 20, 30 in blocks 2, 0 and NaN in an unused slot, block_table=[[2, 0, 99], "
                 "[1, 1, 1]], seq_lens=[3, 0], num_splits=2)", expected=expected, got=out)
