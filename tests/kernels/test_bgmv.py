"""BGMV shrink / expand equal a per-row LoRA computed with plain torch, for any mix of adapters."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.kernels._support import SOME, dtypes_for, kernel_settings, randn, seeded, tolerance

pytest.importorskip("triton", reason="Triton is not installed: `pip install -e .[kernels]`")

from reference.kernels import bgmv_expand, bgmv_shrink, multi_lora_delta


def lora_oracle(x, lora_a, lora_b, scaling, slot_ids, ranks) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, delta) row by row in float64, each adapter cut to its true rank; slot -1 gives zeros."""
    num_rows, max_rank, out_features = x.shape[0], lora_a.shape[1], lora_b.shape[1]
    h = torch.zeros(num_rows, max_rank, dtype=torch.float64)
    delta = torch.zeros(num_rows, out_features, dtype=torch.float64)
    for row_id, slot_id in enumerate(slot_ids.tolist()):
        if slot_id < 0:
            continue
        rank = int(ranks[slot_id])
        a = lora_a[slot_id, :rank].double().cpu()     # (r, in)
        b = lora_b[slot_id, :, :rank].double().cpu()  # (out, r)
        h[row_id, :rank] = a @ x[row_id].double().cpu()
        delta[row_id] = (b @ h[row_id, :rank]) * float(scaling[slot_id])
    return h, delta


@st.composite
def lora_cases(draw):
    num_slots = draw(st.integers(1, 4))
    max_rank = draw(st.sampled_from([1, 2, 4, 8, 16]))
    num_rows = draw(st.integers(1, 8))
    return {
        "num_rows": num_rows,
        "num_slots": num_slots,
        "max_rank": max_rank,
        "ranks": [draw(st.integers(1, max_rank)) for _ in range(num_slots)],
        "slot_ids": [draw(st.integers(-1, num_slots - 1)) for _ in range(num_rows)],
        "in_features": draw(st.integers(1, 40)),
        "out_features": draw(st.integers(1, 40)),
        "pass_ranks": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


def make_lora_inputs(case: dict, dtype: torch.dtype, device: str):
    """Stacked adapters padded to max_rank. Without `ranks` the padding is zero (as a loader
    writes it); with `ranks` it holds garbage the kernels must not read."""
    gen = seeded(case["seed"])
    shape_a = (case["num_slots"], case["max_rank"], case["in_features"])
    shape_b = (case["num_slots"], case["out_features"], case["max_rank"])
    lora_a, lora_b = randn(gen, *shape_a, dtype=dtype, device=device), randn(gen, *shape_b, dtype=dtype, device=device)
    ranks = torch.tensor(case["ranks"], dtype=torch.int32)
    if not case["pass_ranks"]:
        for slot_id, rank in enumerate(case["ranks"]):
            lora_a[slot_id, rank:] = 0
            lora_b[slot_id, :, rank:] = 0
    x = randn(gen, case["num_rows"], case["in_features"], dtype=dtype, device=device)
    scaling = torch.rand(case["num_slots"], generator=gen) * 2
    slot_ids = torch.tensor(case["slot_ids"], dtype=torch.int64, device=device)
    return x, lora_a, lora_b, scaling, slot_ids, ranks


@kernel_settings(SOME)
@given(case=lora_cases())
def test_shrink_then_expand_match_per_row_lora(device, case):
    """h = A[slot] x and y += scaling * B[slot] h, rows with slot -1 untouched, padding ignored."""
    for dtype in dtypes_for(device):
        x, lora_a, lora_b, scaling, slot_ids, ranks = make_lora_inputs(case, dtype, device)
        kernel_ranks = ranks.to(device) if case["pass_ranks"] else None
        expected_h, expected_delta = lora_oracle(x, lora_a, lora_b, scaling, slot_ids, ranks)

        h = bgmv_shrink(x, lora_a, slot_ids, kernel_ranks)
        assert h.dtype == torch.float32 and h.shape == (case["num_rows"], case["max_rank"])
        torch.testing.assert_close(h.double().cpu(), expected_h, **tolerance(dtype))

        base = randn(seeded(case["seed"] + 1), case["num_rows"], case["out_features"], dtype=torch.float32, device=device)
        y = base.clone()
        assert bgmv_expand(h, lora_b, slot_ids, scaling, y, kernel_ranks) is y
        torch.testing.assert_close(y.double().cpu(), base.double().cpu() + expected_delta, **tolerance(dtype))
        untouched = slot_ids.cpu() < 0
        assert torch.equal(y[untouched.to(device)], base[untouched.to(device)]), "slot -1 rows must stay exactly base"


def test_no_adapter_rows_are_exact_zeros(device):
    """Regression: slot -1 must not wrap to the last adapter (Python negative indexing)."""
    case = {"num_rows": 3, "num_slots": 2, "max_rank": 4, "ranks": [4, 4], "slot_ids": [-1, 1, -1],
            "in_features": 8, "out_features": 5, "pass_ranks": False, "seed": 0}
    x, lora_a, lora_b, scaling, slot_ids, _ = make_lora_inputs(case, torch.float32, device)
    delta = multi_lora_delta(x, lora_a, lora_b, scaling, slot_ids)
    assert torch.equal(delta[0], torch.zeros_like(delta[0])) and torch.equal(delta[2], torch.zeros_like(delta[2]))
    assert delta[1].abs().sum() > 0


def test_bad_slot_ids_raise_value_error(device):
    x, lora_a = torch.randn(2, 8, device=device), torch.randn(3, 4, 8, device=device)
    with pytest.raises(ValueError, match="slot_ids"):
        bgmv_shrink(x, lora_a, torch.tensor([0, 3], device=device))
    with pytest.raises(ValueError, match="slot_ids"):
        bgmv_shrink(x, lora_a, torch.tensor([0, -2], device=device))
    with pytest.raises(ValueError, match="slot_ids"):
        bgmv_shrink(x, lora_a, torch.tensor([0], device=device))
