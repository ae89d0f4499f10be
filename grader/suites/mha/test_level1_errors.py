"""Level 1 of mha, argument checks: every ValueError the statement names for attention(),
one constructed call each, and a look forward after every rejected call (the next valid
call equals the reference). Their rules are listed in test_level1.py's RULES map."""

from __future__ import annotations

from typing import Any, Callable

import torch

from grader.protocol import expect, kata_test
from grader.suites.mha.checks import close, expect_tensor, raises_value_error, run, shown
from grader.suites.mha.strategies import make_case

# q (1, 2, 3, 4), k (1, 2, 5, 4), v (1, 2, 5, 6): Tq = 3, Tk = 5, D = 4, Dv = 6.
Q, K, V = torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 6)
SHOWN = "q (1, 2, 3, 4), k (1, 2, 5, 4), v (1, 2, 5, 6)"


def _mask_with_is_causal(solution: Any) -> dict[str, Callable[[], Any]]:
    return {
        "a bool attn_mask with is_causal=True":
            lambda: solution.attention(Q, K, V, torch.ones(3, 5, dtype=torch.bool), True),
        "a float attn_mask with is_causal=True":
            lambda: solution.attention(Q, K, V, attn_mask=torch.zeros(3, 5), is_causal=True),
    }


def _non_float_masks(solution: Any) -> dict[str, Callable[[], Any]]:
    def with_mask_of(dtype: torch.dtype) -> Callable[[], Any]:
        return lambda: solution.attention(Q, K, V, torch.ones(3, 5, dtype=dtype))

    return {f"an attn_mask of dtype {str(dtype)[6:]}": with_mask_of(dtype)
            for dtype in (torch.int64, torch.int32, torch.uint8)}


def _bad_shapes(solution: Any) -> dict[str, Callable[[], Any]]:
    a = solution.attention
    return {
        "q of 3 dims": lambda: a(Q[0], K, V),
        "k of 3 dims": lambda: a(Q, K[0], V),
        "v of 3 dims": lambda: a(Q, K, V[0]),
        "q of 5 dims": lambda: a(Q[None], K, V),
        "q of 3 dims (2, 3, 4) whose first dims match k (2, 3, 5, 4) and v (2, 3, 5, 6)":
            lambda: a(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5, 4), torch.zeros(2, 3, 5, 6)),
        "k with another batch size": lambda: a(Q, torch.zeros(2, 2, 5, 4), torch.zeros(2, 2, 5, 6)),
        "v with another batch size": lambda: a(Q, K, torch.zeros(2, 2, 5, 6)),
        "k and v with other heads": lambda: a(Q, torch.zeros(1, 1, 5, 4), torch.zeros(1, 1, 5, 6)),
        "v with other heads": lambda: a(Q, K, torch.zeros(1, 3, 5, 6)),
        "k with another head dim": lambda: a(Q, torch.zeros(1, 2, 5, 3), V),
        "v with another number of keys": lambda: a(Q, K, torch.zeros(1, 2, 4, 6)),
        "a bool mask (3, 4) for Tq=3, Tk=5": lambda: a(Q, K, V, torch.ones(3, 4, dtype=torch.bool)),
        "a float mask (4, 5) for Tq=3, Tk=5": lambda: a(Q, K, V, torch.zeros(4, 5)),
        "a mask of 5 dims (1, 1, 2, 3, 5)": lambda: a(Q, K, V, torch.ones(1, 1, 2, 3, 5, dtype=torch.bool)),
        "a mask with a larger batch (3, 2, 3, 5) for B=1":
            lambda: a(Q, K, V, torch.ones(3, 2, 3, 5, dtype=torch.bool)),
        "a mask with more heads (1, 4, 3, 5) for H=2": lambda: a(Q, K, V, torch.zeros(1, 4, 3, 5)),
    }


def _expect_all_rejected(cases: dict[str, Callable[[], Any]], rule: str) -> None:
    for what, fn in cases.items():
        ok, got = raises_value_error(fn, "attention()")
        expect(ok, f"ValueError for {what} ({rule})", input=SHOWN, expected="ValueError", got=got)


@kata_test(level=1, category="api contract", weight=0.5,
           description="ValueError for attn_mask together with is_causal=True")
def test_rejects_mask_with_is_causal(solution):
    _expect_all_rejected(_mask_with_is_causal(solution), "pass attn_mask or is_causal, not both")


@kata_test(level=1, category="api contract", weight=0.5,
           description="ValueError for an attn_mask neither bool nor floating (int64, int32, uint8)")
def test_rejects_mask_neither_bool_nor_float(solution):
    _expect_all_rejected(_non_float_masks(solution), "a mask is bool or floating")


@kata_test(level=1, category="api contract", weight=1,
           description="ValueError for shapes that do not fit: q, k, v not 4-D, B/H/D/Tk mismatches, "
                       "a mask that does not broadcast")
def test_rejects_invalid_arguments(solution):
    _expect_all_rejected(_bad_shapes(solution), "shapes that do not fit")


@kata_test(level=1, category="api contract", weight=0.5,
           description="after a rejected call, the next valid call gives the same result as before it")
def test_valid_call_after_rejected_call(solution):
    # Compared with the candidate's own result before any rejection, so that only a leak
    # fails here (a wrong result is the other tests' business).
    case = make_case(1, 2, 3, 5, D=4, Dv=6, seed=9)
    mask = torch.tensor([[True, False, True, True, False]] * 3)[None, None]  # (1, 1, Tq, Tk)
    calls = ({"is_causal": True}, {"attn_mask": mask})
    before = [run(solution, case, **kwargs) for kwargs in calls]
    for got in before:
        expect_tensor(got, (1, 2, 3, 6), "attention returns a (B, H, Tq, Dv) tensor", input=shown(case))
    rejected = {**_mask_with_is_causal(solution), **_non_float_masks(solution), **_bad_shapes(solution)}
    for what, fn in rejected.items():
        try:
            fn()
        except Exception:  # noqa: BLE001 - whether it raised is the other tests' business
            pass
        for kwargs, expected in zip(calls, before):
            close(run(solution, case, **kwargs), expected.detach().clone(),
                  f"after a call with {what} was rejected, the next valid call gives the same "
                  "result as before it (a rejected call leaves nothing behind)",
                  input=shown(case, **kwargs), atol=0.0, rtol=0.0)
