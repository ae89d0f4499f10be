"""Strategies and fixed batches shared by the ppo suite's levels.

Inputs are small right-padded (B, T) batches (B <= 3, T <= 5) with values on a grid of
eighths, so a shrunk counterexample can be checked by hand. Besides the random batches, every
level runs FIXED_MASKS: the edge layouts a random draw may miss (one valid token, T = 1, rows
without padding, rows of very different lengths).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import settings, strategies as st

NAN, INF = float("nan"), float("inf")
# What padding may hold: the functions must give the same answer whatever is there.
PAD_SPECIALS = (NAN, INF, -INF, 1e30, -1e30, 1e4)
DTYPES = (torch.float64, torch.float32)
# Every float dtype the statement's "(B, T) float" allows; the half precisions are checked
# against a float64 computation with a looser tolerance (see checks.check_low_precision).
ALL_FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
MASK_KINDS = ("bool", "float32", "float64")
FAST = settings(max_examples=12)
MEDIUM = settings(max_examples=20)
FEW = settings(max_examples=6)  # tests that loop over every case themselves

# Right-padded masks the random draws may miss: each row has at least one valid token.
FIXED_MASKS = {
    "one sequence of one token (T = 1)": [[1]],
    "one valid token then padding": [[1, 0, 0]],
    "no padding at all": [[1, 1, 1], [1, 1, 1]],
    "rows of 1 and 4 valid tokens": [[1, 0, 0, 0], [1, 1, 1, 1]],
    "three rows of 2, 1 and 3 tokens": [[1, 1, 0], [1, 0, 0], [1, 1, 1]],
}
# Every float dtype a 0/1 mask may come in.
MASK_FLOAT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
# Counts a narrow float cannot hold: a row of 257 valid tokens (bfloat16 rounds 257 to 256)
# and 2,057 in all (float16 rounds it to 2,056). A count taken in the mask's dtype is off.
LONG_ROW_LENGTHS = (257, 300, 300, 300, 300, 300, 300)


def right_padded_rows(lengths: tuple[int, ...], T: int) -> list[list[int]]:
    """Mask rows (0/1 lists) of `T` columns holding `lengths` valid tokens each."""
    return [[1] * n + [0] * (T - n) for n in lengths]


@st.composite
def valid_masks(draw: Any, *, max_b: int = 3, max_t: int = 5, min_total: int = 1) -> torch.Tensor:
    """A right-padded bool mask (B, T), every row with at least one valid token."""
    B = draw(st.integers(1, max_b))
    need_two = B == 1 and min_total >= 2
    T = draw(st.integers(2 if need_two else 1, max_t))
    lengths = draw(st.lists(st.integers(2 if need_two else 1, T), min_size=B, max_size=B))
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]


def grid_from_seed(seed: int, shape: tuple[int, ...], dtype: torch.dtype, lo: int = -16,
                   hi: int = 16) -> torch.Tensor:
    """Values k / 8 for integers k in [lo, hi]: exact in every float dtype."""
    gen = torch.Generator().manual_seed(seed)
    ints = torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int64)
    return (ints.to(torch.float64) / 8).to(dtype)


def grid(draw: Any, shape: tuple[int, ...], dtype: torch.dtype, lo: int = -16,
         hi: int = 16) -> torch.Tensor:
    """A grid tensor from a drawn seed (one draw per tensor: grading stays fast)."""
    return grid_from_seed(draw(st.integers(0, 2**16)), shape, dtype, lo, hi)


def with_padding(x: torch.Tensor, valid: torch.Tensor, fill: float) -> torch.Tensor:
    return torch.where(valid, x, torch.full_like(x, fill))


def as_mask(valid: torch.Tensor, kind: str) -> torch.Tensor:
    """The mask in a form a caller may pass: bool, or 0/1 floats of any float dtype."""
    return valid if kind == "bool" else valid.to(getattr(torch, kind))


@st.composite
def batches(draw: Any, names: tuple[str, ...], *, min_total: int = 1, dtypes=DTYPES,
            specials: bool = False, lo: int = -16, hi: int = 16) -> dict[str, Any]:
    """Named (B, T) tensors on the grid plus a mask; padding holds finite junk, or (with
    `specials`) one of PAD_SPECIALS per tensor, alongside a copy `clean` padded with 0."""
    valid = draw(valid_masks(min_total=min_total))
    dtype = draw(st.sampled_from(dtypes))
    kind = draw(st.sampled_from(MASK_KINDS))
    out: dict[str, Any] = {"mask": as_mask(valid, kind)}
    clean: dict[str, Any] = {"mask": out["mask"]}
    for name in names:
        x = grid(draw, tuple(valid.shape), dtype, lo, hi)
        clean[name] = with_padding(x, valid, 0.0)
        fill = draw(st.sampled_from(PAD_SPECIALS)) if specials else draw(st.sampled_from((0.0, 5.0, -3.0)))
        out[name] = with_padding(x, valid, fill)
    if specials:
        out["clean"] = clean
    return out


def fixed_batch(mask_rows: list[list[int]], names: tuple[str, ...], *, dtype: torch.dtype = torch.float64,
                seed: int = 0, fill: float = NAN, lo: int = -16, hi: int = 16) -> dict[str, Any]:
    """A batch on `mask_rows` with grid values from `seed` and `fill` in the padding."""
    valid = torch.tensor(mask_rows, dtype=torch.bool)
    out: dict[str, Any] = {"mask": valid}
    for i, name in enumerate(names):
        x = grid_from_seed(seed * 31 + i, tuple(valid.shape), dtype, lo, hi)
        out[name] = with_padding(x, valid, fill)
    return out


def valid_of(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else mask != 0


def leaf(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)


def token_mean(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    return torch.where(valid, x, torch.zeros_like(x)).sum() / valid.sum()


def last_valid_one_hot(valid: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: True at each row's last valid token."""
    return torch.arange(valid.shape[1])[None, :] == (valid.sum(1) - 1)[:, None]
