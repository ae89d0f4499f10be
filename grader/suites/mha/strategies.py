"""Strategies and constructed cases shared by the mha levels.

Random draws stay small (sizes 1-4, values rounded to one decimal) so a shrunk failure is
readable. The constants at the bottom (every dtype, every mask broadcast form, every GQA
group size, every (Tq, Tk) alignment) are looped over by the targeted tests, so each
legal-but-rare option is exercised under every seed.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

FLOATS = (torch.float32, torch.float64)
HALVES = (torch.float16, torch.bfloat16)
ALL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

seeds = st.integers(0, 2**16)
sizes = st.integers(1, 4)


def randn(seed: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32,
          scale: float = 1.0) -> torch.Tensor:
    """Normal values rounded to one decimal (readable), from a seed (fast to draw)."""
    gen = torch.Generator().manual_seed(seed)
    values = (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).round(decimals=1)
    return values.to(dtype)


def make_case(B: int, H: int, Tq: int, Tk: int, D: int, Dv: int, seed: int,
              dtype: torch.dtype = torch.float32, scale: float = 1.0) -> dict:
    return {"q": randn(seed, (B, H, Tq, D), dtype, scale),
            "k": randn(seed + 1, (B, H, Tk, D), dtype, scale),
            "v": randn(seed + 2, (B, H, Tk, Dv), dtype)}


@st.composite
def qkv(draw: Any, dtypes: tuple[torch.dtype, ...] = FLOATS, scale: float = 1.0,
        min_keys: int = 1) -> dict:
    B, H, Tq, D, Dv = (draw(sizes) for _ in range(5))
    Tk = draw(st.integers(min_keys, 4))
    return make_case(B, H, Tq, Tk, D, Dv, draw(seeds), draw(st.sampled_from(dtypes)), scale)


def full_shape(case: dict) -> tuple[int, int, int, int]:
    B, H, Tq, _ = case["q"].shape
    return (B, H, Tq, case["k"].shape[2])


@st.composite
def mask_shapes(draw: Any, full: tuple[int, int, int, int]) -> tuple[int, ...]:
    """A shape broadcastable to `full`: some dims set to 1, some leading dims dropped."""
    shape = [n if draw(st.booleans()) else 1 for n in full]
    return tuple(shape[draw(st.integers(0, 2)):])


def bool_mask(shape: tuple[int, ...], seed: int, keep: float = 0.6) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=gen) < keep


def float_mask(shape: tuple[int, ...], seed: int, dtype: torch.dtype, drop: float = 0.3) -> torch.Tensor:
    """Finite offsets in [-2, 2] (one decimal) with some -inf entries."""
    gen = torch.Generator().manual_seed(seed)
    values = (torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2).round(decimals=1)
    dropped = torch.rand(shape, generator=gen) < drop
    return values.masked_fill(dropped, float("-inf")).to(dtype)


@st.composite
def bool_masks(draw: Any, full: tuple[int, int, int, int]) -> torch.Tensor:
    return bool_mask(draw(mask_shapes(full)), draw(seeds), draw(st.sampled_from([0.3, 0.6, 0.9])))


@st.composite
def float_masks(draw: Any, full: tuple[int, int, int, int], dtype: torch.dtype) -> torch.Tensor:
    return float_mask(draw(mask_shapes(full)), draw(seeds), dtype,
                      draw(st.sampled_from([0.0, 0.3, 0.7])))


# ------------------------------------------------------------------------------ modules


@st.composite
def mha_configs(draw: Any, gqa_only: bool = False) -> dict:
    n_kv_heads = draw(st.integers(1, 2))
    group = draw(st.integers(2 if gqa_only else 1, 3))
    n_heads = n_kv_heads * group
    head_dim = draw(st.integers(1, 3))
    return {"d_model": n_heads * head_dim, "n_heads": n_heads,
            "n_kv_heads": draw(st.sampled_from([n_kv_heads, None])) if group == 1 else n_kv_heads,
            "bias": draw(st.booleans()), "seed": draw(seeds)}


@st.composite
def mha_masks(draw: Any, batch: int, n_heads: int, num_queries: int, num_keys: int) -> dict:
    kind = draw(st.sampled_from(["none", "causal", "bool", "float"]))
    full = (batch, n_heads, num_queries, num_keys)
    if kind == "causal":
        return {"is_causal": True}
    if kind == "bool":
        return {"attn_mask": draw(bool_masks(full))}
    if kind == "float":
        return {"attn_mask": draw(float_masks(full, torch.float64))}
    return {}


def mha_input(config: dict, batch: int, num_tokens: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    return randn(seed, (batch, num_tokens, config["d_model"]), dtype)


# ------------------------------------------------------------------ constructed cases

# Scales a candidate must honour, 0.0 (falsy, not "not given") and negatives included.
SCALES = (0.0, -0.5, 1e-3, 0.3, 1.0, 2.0, 50.0)

# (Tq, Tk): equal, fewer queries (decode, chunked prefill), more queries than keys.
CAUSAL_ALIGNMENTS = ((1, 1), (3, 3), (1, 4), (2, 5), (3, 4), (4, 2), (3, 1))


def broadcast_forms(full: tuple[int, int, int, int]) -> list[tuple[int, ...]]:
    """Every way the statement lets a mask broadcast to (B, H, Tq, Tk), from (Tk,) to the
    full shape, each leading dim dropped or kept, each kept dim full or 1."""
    B, H, Tq, Tk = full
    return [(Tk,), (1, Tk), (Tq, Tk), (Tq, 1), (1, 1), (H, Tq, Tk), (H, 1, Tk), (1, Tq, Tk),
            (B, 1, 1, Tk), (B, 1, Tq, Tk), (1, H, Tq, Tk), (1, H, 1, Tk), (B, H, 1, Tk),
            (B, H, Tq, 1), (1, 1, 1, 1), (B, H, Tq, Tk)]


# A full shape with B == Tq, so a 2-D (Tq, Tk) mask read as a (B, Tk) padding mask differs.
BROADCAST_FULL = (2, 3, 2, 4)

# (d_model, n_heads, n_kv_heads): default KV heads, plain MHA, GQA groups 2 and 3, MQA.
GROUP_CONFIGS = ((4, 1, None), (6, 3, None), (6, 3, 3), (8, 4, 2), (12, 6, 2), (6, 6, 2),
                 (8, 4, 1), (6, 2, 1))

# float64 scores near 1e4 that differ by about 0.27: computed in float32 they lose ~1e-4.
FLOAT64_PRECISION_CASE = {"q": torch.tensor([[[[100.0]]]], dtype=torch.float64),
                          "k": torch.tensor([[[[100.0], [99.99731]]]], dtype=torch.float64),
                          "v": torch.tensor([[[[0.0], [1.0]]]], dtype=torch.float64)}

# Half-precision inputs whose scores are fine in float32 but not in half precision.
# fp16: 256 * 256 = 65536 overflows float16 (max 65504). bf16: 15 * 17.125 = 256.875 rounds
# to 256 in bfloat16, which moves the softmax weights by about 0.13.
HALF_OVERFLOW = {"q": torch.tensor([[[[256.0]]]]), "k": torch.tensor([[[[256.0], [0.0], [255.0]]]]),
                 "v": torch.tensor([[[[1.0], [2.0], [3.0]]]])}
HALF_ROUNDING = {"q": torch.tensor([[[[15.0]]]]), "k": torch.tensor([[[[17.0], [17.125]]]]),
                 "v": torch.tensor([[[[0.0], [1.0]]]])}
# With scale=100, q · scale (first case) or k · scale (second) is 1e5: over the float16 max.
HALF_SCALED_OVERFLOW = ({"q": torch.tensor([[[[1000.0]]]]), "k": torch.tensor([[[[0.01], [0.02]]]]),
                         "v": torch.tensor([[[[1.0], [2.0]]]])},
                        {"q": torch.tensor([[[[0.01]]]]), "k": torch.tensor([[[[1000.0], [2000.0]]]]),
                         "v": torch.tensor([[[[1.0], [2.0]]]])})
# A float32 mask added to half inputs' scores: -70000 on every key is a per-row constant (no
# mask at all) but -inf in float16; -1000 vs -1001 become equal in bfloat16.
HALF_MASK_CASE = {"q": torch.tensor([[[[1.0]]]]), "k": torch.tensor([[[[0.0], [1.0]]]]),
                  "v": torch.tensor([[[[10.0], [20.0]]]])}
HALF_WIDE_MASKS = ((torch.float16, torch.full((1, 2), -70000.0), "a float32 mask of -70000 overflows float16"),
                   (torch.bfloat16, torch.tensor([[-1000.0, -1001.0]]),
                    "a float32 mask [-1000, -1001] rounds to [-1000, -1000] in bfloat16"))
