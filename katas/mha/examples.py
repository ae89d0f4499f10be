"""Visible examples for the mha kata: `kata check` runs them against your solution.

Small fixed inputs you can check by hand. The hidden suite checks many more cases."""

import math

import torch

from grader.protocol import expect, expect_value_error, kata_test


def t(values):
    """A (1, 1, T, D) float32 tensor from a nested list of shape (T, D)."""
    return torch.tensor(values, dtype=torch.float32)[None, None]


def close(got, expected, atol=1e-4):
    return (isinstance(got, torch.Tensor) and got.shape == expected.shape
            and bool(torch.allclose(got.float(), expected.float(), atol=atol)))


Q, K, V = t([[1.0]]), t([[0.0], [1.0]]), t([[10.0], [20.0]])
QKV = "q=[[1.]], k=[[0.], [1.]], v=[[10.], [20.]] (each (1, 1, T, D), float32)"
W1 = math.exp(1) / (1 + math.exp(1))


@kata_test(level=1, category="correctness", description="worked example: one query, two keys")
def test_worked_example(solution):
    got = solution.attention(Q, K, V, scale=1.0)
    expected = t([[10 * (1 - W1) + 20 * W1]])
    expect(close(got, expected), "the output of attention()", input=f"attention({QKV}, scale=1.0)",
           expected=expected, got=got)


@kata_test(level=1, category="correctness", description="the default scale (scale=None), with D = 2")
def test_default_scale(solution):
    q, k, v = t([[2.0, 2.0]]), t([[0.0, 0.0], [1.0, 1.0]]), t([[0.0], [1.0]])
    got = solution.attention(q, k, v)
    s = 4 / math.sqrt(2)
    expected = t([[math.exp(s) / (1 + math.exp(s))]])
    expect(close(got, expected), "the output of attention() with the default scale",
           input="attention(q=[[2., 2.]], k=[[0., 0.], [1., 1.]], v=[[0.], [1.]])", expected=expected,
           got=got)


@kata_test(level=1, category="correctness", description="bool mask: False keys are ignored")
def test_bool_mask(solution):
    got = solution.attention(Q, K, V, attn_mask=torch.tensor([[True, False]]), scale=1.0)
    expect(close(got, t([[10.0]])), "the output of attention() with a bool mask",
           input=f"attention({QKV}, attn_mask=[[True, False]], scale=1.0)", expected=t([[10.0]]), got=got)


@kata_test(level=1, category="correctness", description="causal with Tq < Tk is bottom-right aligned")
def test_causal_bottom_right(solution):
    q = t([[0.0], [0.0]])
    k = t([[0.0], [0.0], [0.0]])
    v = t([[3.0], [6.0], [30.0]])
    got = solution.attention(q, k, v, is_causal=True)
    expected = t([[4.5], [13.0]])
    expect(close(got, expected), "the output of attention() with is_causal=True and Tq < Tk",
           input="attention(q=[[0.], [0.]], k=[[0.], [0.], [0.]], v=[[3.], [6.], [30.]], is_causal=True)",
           expected=expected, got=got)


@kata_test(level=1, category="edge cases", description="a fully masked row outputs zeros")
def test_fully_masked_row(solution):
    mask = torch.tensor([[False, False]])
    got = solution.attention(Q, K, V, attn_mask=mask)
    expect(close(got, t([[0.0]])), "the output of attention() when the mask removes every key",
           input=f"attention({QKV}, attn_mask=[[False, False]])", expected=t([[0.0]]), got=got)


@kata_test(level=1, category="api contract", description="attn_mask together with is_causal is a ValueError")
def test_mask_and_causal_rejected(solution):
    expect_value_error(lambda: solution.attention(Q, K, V, attn_mask=torch.tensor([[True, True]]), is_causal=True),
                       f"attention({QKV}, attn_mask=[[True, True]], is_causal=True)")


@kata_test(level=2, category="api contract", description="parameter names and shapes")
def test_mha_parameters(solution):
    mha = solution.MultiHeadAttention(8, 4, 2)
    shapes = {name: tuple(p.shape) for name, p in mha.state_dict().items()}
    expected = {"q_proj.weight": (8, 8), "k_proj.weight": (4, 8), "v_proj.weight": (4, 8),
                "o_proj.weight": (8, 8)}
    expect(shapes == expected, "the module's state_dict: names and shapes",
           input="MultiHeadAttention(d_model=8, n_heads=4, n_kv_heads=2)", expected=expected, got=shapes)


@kata_test(level=2, category="correctness", description="identity projections: MHA reduces to attention per head")
def test_mha_identity_projections(solution):
    mha = solution.MultiHeadAttention(2, 1)
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.o_proj):
            proj.weight.copy_(torch.eye(2))
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, 2, 2)
    got = mha(x, is_causal=True)
    w = 1 / (1 + math.exp(-1 / math.sqrt(2)))
    expected = torch.tensor([[[1.0, 0.0], [1 - w, w]]])
    expect(close(got, expected), "the output of forward()",
           input="mha = MultiHeadAttention(d_model=2, n_heads=1) with q_proj, k_proj, v_proj and o_proj "
                 "weights = I; mha(x=[[[1., 0.], [0., 1.]]], is_causal=True)", expected=expected, got=got)


@kata_test(level=2, category="api contract", description="d_model % n_heads != 0 is a ValueError")
def test_mha_bad_heads(solution):
    expect_value_error(lambda: solution.MultiHeadAttention(6, 4), "MultiHeadAttention(d_model=6, n_heads=4)")


@kata_test(level=3, category="correctness", description="prompt then one token equals the full causal pass")
def test_cached_decoding(solution):
    torch.manual_seed(0)
    mha = solution.MultiHeadAttention(4, 2, 1)
    x = torch.randn(1, 3, 4)
    with torch.no_grad():
        full = mha(x, is_causal=True)
        cache = solution.KVCache()
        prompt = mha(x[:, :2], is_causal=True, kv_cache=cache)
        step = mha(x[:, 2:], is_causal=True, kv_cache=cache)
    got = torch.cat([prompt, step], dim=1)
    calls = ("torch.manual_seed(0); mha = MultiHeadAttention(4, 2, 1); x = torch.randn(1, 3, 4); "
             "cache = KVCache(); mha(x[:, :2], is_causal=True, kv_cache=cache); "
             "mha(x[:, 2:], is_causal=True, kv_cache=cache)")
    expect(close(got, full), "the two cached calls' outputs, joined, against mha(x, is_causal=True)",
           input=calls, expected=full, got=got)
    expect(cache.seq_len == 3, "cache.seq_len after the two cached calls", input=calls, expected=3,
           got=cache.seq_len)
