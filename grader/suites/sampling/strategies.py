"""Strategies and builders shared by the sampling suite's levels: small logits batches for
the filter, runners that call the candidate and check the form of what comes back (so a
wrong form fails one property, not every test), and the speculative-decoding cases."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import settings, strategies as st

from grader.protocol import PropertyFailure, call, expect

NEG_INF = float("-inf")
# Every floating dtype the statement's "(B, V) float" allows.
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

settings_fast = settings(max_examples=15)
top_p_values = st.sampled_from([1e-9, 0.05, 0.3, 0.5, 0.6, 0.75, 0.9, 0.99, 1.0]) | st.floats(0.01, 1.0)
top_k_values = st.integers(-2, 7)

# ---------------------------------------------------------------------------- the filter


def kept_mask(out: torch.Tensor) -> torch.Tensor:
    return out != NEG_INF


def check_filter_output(logits: torch.Tensor, out: Any, inp: dict) -> torch.Tensor:
    """Shape, dtype, kept values unchanged and in place, removed ones -inf. Returns the mask."""
    expect(isinstance(out, torch.Tensor), "top_k_top_p_filter returns a tensor", input=inp,
           expected="torch.Tensor", got=type(out).__name__)
    expect(tuple(out.shape) == tuple(logits.shape) and out.dtype == logits.dtype,
           "the result has the shape and dtype of logits", input=inp,
           expected=f"shape {tuple(logits.shape)}, {logits.dtype}",
           got=f"shape {tuple(out.shape)}, {out.dtype}")
    keep = kept_mask(out)
    same = torch.where(keep, out == logits, torch.ones_like(keep))
    expect(bool(same.all()), "kept logits keep their value and position; removed ones are -inf",
           input=inp, expected="each entry equal to its logit, or -inf", got=out)
    return keep


def top_k_set(row: torch.Tensor, top_k: int, min_tokens_to_keep: int) -> torch.Tensor:
    """Mask of the tokens top-k keeps in one (V,) row (ties with the k-th value included)."""
    if top_k <= 0:
        return torch.ones_like(row, dtype=torch.bool)
    k = min(max(top_k, min_tokens_to_keep), row.numel())
    return row >= row.sort(descending=True).values[k - 1]


def nucleus_mass(row: torch.Tensor, allowed: torch.Tensor, keep: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(mass of `keep` under the softmax over `allowed`, the probabilities) in float64."""
    probs = row.double().masked_fill(~allowed, NEG_INF).softmax(-1)
    return float(probs[keep].sum()), probs


def filter_case(draw: Any, *, distinct: bool = False, max_vocab: int = 6, spread: int = 3) -> dict:
    """A small batch of logits: distinct values (a permutation, scaled) or small integers."""
    batch = draw(st.integers(1, 3))
    vocab = draw(st.integers(1, max_vocab))
    if distinct:
        rows = [draw(st.permutations(range(vocab))) for _ in range(batch)]
        scale = draw(st.sampled_from([0.5, 1.0, 1.5]))
        logits = torch.tensor(rows, dtype=torch.float32) * scale
    else:
        values = draw(st.lists(st.integers(-spread, spread), min_size=batch * vocab,
                               max_size=batch * vocab))
        logits = torch.tensor(values, dtype=torch.float32).reshape(batch, vocab)
    return {"logits": logits}


def kept(result: Any) -> Any:
    """A tensor result as a copy: the candidate's own tensor stays shared with it, and a later
    call could rewrite an earlier result that a test compares with."""
    return result.detach().clone() if isinstance(result, torch.Tensor) else result


def run_filter(solution: Any, logits: torch.Tensor, **kwargs: Any) -> tuple[torch.Tensor, dict]:
    inp = {"logits": logits.clone(), **kwargs}
    out = call(solution.top_k_top_p_filter, logits.clone(), what="top_k_top_p_filter", **kwargs)
    return kept(out), inp


def near_boundary(logits: torch.Tensor, top_k: int, top_p: float, mtk: int) -> bool:
    """Whether some cumulative probability (after top-k) is within 1e-4 of top_p: rounding
    may then legitimately decide either way."""
    for row in logits:
        allowed = top_k_set(row, top_k, mtk)
        probs = row.double().masked_fill(~allowed, NEG_INF).softmax(-1).sort(descending=True).values
        if bool(((probs.cumsum(0) - top_p).abs() < 1e-4).any()):
            return True
    return False


def expect_kept(solution: Any, logits: torch.Tensor, want: list[list[bool]], prop: str,
                **kwargs: Any) -> None:
    """Filter `logits` with `kwargs` and require exactly the kept pattern `want`."""
    out, inp = run_filter(solution, logits, **kwargs)
    keep = check_filter_output(logits, out, inp)
    expect(keep.tolist() == want, prop, input=inp, expected=f"kept {want}",
           got=f"kept {keep.tolist()}: {out}")


# ---------------------------------------------------------------------------- sample


def sample_ids(got: Any, num_rows: int, vocab: int, inp: Any) -> torch.Tensor:
    """The sampled ids as an int64 (B,) tensor; fails unless `got` is one id per row in
    [0, V). The exact dtype is checked by its own test."""
    ok = (isinstance(got, torch.Tensor) and tuple(got.shape) == (num_rows,)
          and not got.dtype.is_floating_point and got.dtype != torch.bool)
    expect(ok, "sample returns one integer token id per row, shape (B,)", input=inp,
           expected=f"integer tensor of shape ({num_rows},)", got=got)
    got = got.long().clone()  # a copy (.long() of an int64 tensor is the candidate's own)
    expect(bool(((got >= 0) & (got < vocab)).all()), "sampled ids are in [0, V)", input=inp, got=got)
    return got


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


SAMPLE_DRAWS = 20000


def sample_counts(solution: Any, logits: list[float], seed: int, **kwargs: Any) -> tuple[list[int], dict]:
    row = torch.tensor([logits], dtype=torch.float32)
    inp = {"logits": row, **kwargs, "draws": f"{SAMPLE_DRAWS} rows, generator seed {seed}"}
    got = call(solution.sample, row.repeat(SAMPLE_DRAWS, 1), generator=gen(seed), what="sample", **kwargs)
    got = sample_ids(got, SAMPLE_DRAWS, len(logits), inp)
    return torch.bincount(got, minlength=len(logits)).tolist(), inp


def filtered_probs(reference: Any, logits: list[float], temperature: float, top_k: int, top_p: float) -> list[float]:
    row = torch.tensor([logits], dtype=torch.float32) / temperature
    return reference.top_k_top_p_filter(row, top_k, top_p).double().softmax(-1)[0].tolist()


def expect_value_error(fn: Any, prop: str, input: Any) -> None:
    try:
        fn()
    except ValueError:
        return
    except PropertyFailure:
        raise
    except Exception as exc:  # the wrong exception is the verdict
        raise PropertyFailure(prop, input=input, expected="ValueError",
                              got=f"{type(exc).__name__}: {exc}") from exc
    raise PropertyFailure(prop, input=input, expected="ValueError", got="no exception")


# ---------------------------------------------------------------------------- speculative


@st.composite
def spec_cases(draw: Any, *, equal: bool = False) -> dict:
    """Random draft/target distributions and draft tokens drawn from the draft."""
    num_draft = draw(st.integers(1, 3))
    vocab = draw(st.integers(2, 5))
    g = gen(draw(st.integers(0, 2**16)))
    target = (torch.randn(num_draft + 1, vocab, generator=g, dtype=torch.float64) * 1.5).softmax(-1)
    if draw(st.booleans()):  # some zero-probability tokens in the target
        target[:, 0] = 0.0
        target = target / target.sum(-1, keepdim=True)
    draft = target[:num_draft].clone() if equal else (
        torch.randn(num_draft, vocab, generator=g, dtype=torch.float64) * 1.5).softmax(-1)
    draft_tokens = torch.multinomial(draft, 1, generator=g).squeeze(-1)
    return {"draft_tokens": draft_tokens, "draft_probs": draft.float(), "target_probs": target.float(),
            "seed": draw(st.integers(0, 2**16))}


def token_list(got: Any, num_draft: int, inp: Any) -> list[int]:
    """The emitted tokens as Python ints; fails unless `got` is a list of 1 to K + 1 integer
    ids. That they are Python ints (not 0-d tensors) is checked by its own test."""
    ok = isinstance(got, list) and 1 <= len(got) <= num_draft + 1 and all(
        isinstance(t, int) or (isinstance(t, torch.Tensor) and t.numel() == 1
                               and not t.dtype.is_floating_point) for t in got)
    expect(ok, f"speculative_verify returns a list of 1 to K + 1 = {num_draft + 1} token ids",
           input=inp, got=got)
    return [int(t) for t in got]


def run_verify(solution: Any, case: dict, seed: int | None = None,
               generator: torch.Generator | None = None) -> list[int]:
    args = [case["draft_tokens"].clone(), case["draft_probs"].clone(), case["target_probs"].clone()]
    g = generator if generator is not None else gen(case["seed"] if seed is None else seed)
    got = call(solution.speculative_verify, *args, generator=g, what="speculative_verify")
    return token_list(got, case["draft_tokens"].numel(), case)
