"""Models, prompts, the oracle and the checks shared by the slow-decode suite's levels.

The oracle is `generate_slow` itself, the statement's definition of the right tokens, run on
a fresh TinyLM built from a seed. An input is used only when every greedy choice of every
request wins by at least MIN_MARGIN in the logits (checked with one full forward pass per
request), so a correct solution's different order of float64 operations never flips a token.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch
from hypothesis import strategies as st

import reference.slow_decode as reference_decode  # also registers slow_decode_model outside the grader
from grader.protocol import PropertyFailure, call, expect
from slow_decode_model import TinyLM, generate_slow

MIN_MARGIN = 1e-6
VOCAB = 64
MAX_SEQ_LEN = 32
MODEL_SEEDS = st.integers(0, 31)
FLOPS_BUDGET = 1.2   # the statement: at most 1.2x the FLOPs of the cached reference


def fresh_model(seed: int, num_heads: int = 4) -> TinyLM:
    """A new TinyLM (never shared between calls: a solution that edits the weights must not
    change what the next test sees)."""
    return TinyLM(vocab_size=VOCAB, d_model=32, num_heads=num_heads, num_layers=2,
                  max_seq_len=MAX_SEQ_LEN, seed=seed)


def random_prompts(seed: int, lengths: list[int]) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (n,), generator=gen).tolist() for n in lengths]


@st.composite
def workloads(draw: Any, *, equal_lengths: bool, max_requests: int = 3, max_new: int = 8,
              min_requests: int = 1) -> dict[str, Any]:
    """A model seed, R prompts (one common length, or lengths that differ), max_new_tokens."""
    R = draw(st.integers(min_requests, max_requests))
    if equal_lengths:
        lengths = [draw(st.integers(1, 8))] * R
    else:
        lengths = draw(st.lists(st.integers(1, 8), min_size=R, max_size=R))
        if R > 1 and len(set(lengths)) == 1:   # at least two lengths differ
            lengths[0] = lengths[0] % 8 + 1
    return {"model_seed": draw(MODEL_SEEDS), "prompts": random_prompts(draw(st.integers(0, 2**16)), lengths),
            "max_new_tokens": draw(st.integers(0, max_new))}


# ------------------------------------------------------------------ the oracle


def _key(prompts: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(p) for p in prompts)


@lru_cache(maxsize=256)
def _slow_tokens(model_seed: int, num_heads: int, prompts: tuple, max_new_tokens: int) -> tuple:
    model = fresh_model(model_seed, num_heads)
    out = generate_slow(model, [list(p) for p in prompts], max_new_tokens)
    return tuple(tuple(o) for o in out)


def slow_tokens(model_seed: int, prompts: list[list[int]], max_new_tokens: int,
                eos_id: int | None = None, num_heads: int = 4) -> list[list[int]]:
    """generate_slow's tokens. With eos_id, each request's tokens without EOS cut right after
    the first EOS: greedy decoding is deterministic, so that is exactly generate_slow's output
    with eos_id (the project's tests check it), for the price of one slow run."""
    out = [list(o) for o in _slow_tokens(model_seed, num_heads, _key(prompts), max_new_tokens)]
    if eos_id is not None:
        out = [o[: o.index(eos_id) + 1] if eos_id in o else o for o in out]
    return out


@lru_cache(maxsize=256)
def _min_margin(model_seed: int, num_heads: int, prompts: tuple, max_new_tokens: int) -> float:
    model = fresh_model(model_seed, num_heads)
    outputs = _slow_tokens(model_seed, num_heads, prompts, max_new_tokens)
    smallest = float("inf")
    with torch.no_grad():
        for prompt, out in zip(prompts, outputs):
            if not out:
                continue
            sequence = torch.tensor([list(prompt) + list(out)[:-1]])
            logits = model(sequence)[0, len(prompt) - 1:]                   # (len(out), V)
            top2 = logits.topk(2, dim=-1).values
            smallest = min(smallest, float((top2[:, 0] - top2[:, 1]).min()))
    return smallest


def clear_margin(model_seed: int, prompts: list[list[int]], max_new_tokens: int,
                 num_heads: int = 4) -> bool:
    """True when every greedy choice of generate_slow on this input wins by MIN_MARGIN."""
    return _min_margin(model_seed, num_heads, _key(prompts), max_new_tokens) >= MIN_MARGIN


# ------------------------------------------------------------------ EOS scenarios


@lru_cache(maxsize=64)
def eos_scenario(model_seed: int, *, runner: bool, max_new_tokens: int = 12) -> dict[str, Any]:
    """Prompts and an eos_id where requests finish at several different steps (the first at
    step 0), plus, with `runner`, one request that never generates the EOS and runs to the
    end. Found by a deterministic search over pools of short random prompts."""
    model = fresh_model(model_seed)
    for pool_seed in range(50):
        gen = torch.Generator().manual_seed(1000 * model_seed + pool_seed)
        lengths = torch.randint(1, 5, (24,), generator=gen).tolist()
        pool = random_prompts(int(torch.randint(0, 2**16, (1,), generator=gen)), lengths)
        outputs = reference_decode.generate(model, pool, max_new_tokens)
        for eos_id in range(VOCAB):
            first_hit: dict[int, int] = {}
            never = []
            for i, out in enumerate(outputs):
                if eos_id in out:
                    first_hit.setdefault(out.index(eos_id), i)
                else:
                    never.append(i)
            steps = sorted(first_hit)[:4]
            if not steps or steps[0] != 0 or len(steps) < 3 or (runner and not never):
                continue
            chosen = [first_hit[s] for s in steps] + (never[:1] if runner else [])
            prompts = [pool[i] for i in chosen]
            if clear_margin(model_seed, prompts, max_new_tokens):
                return {"model_seed": model_seed, "prompts": prompts, "max_new_tokens": max_new_tokens,
                        "eos_id": eos_id, "finish_steps": steps}
    raise AssertionError(f"no EOS scenario for model seed {model_seed}")  # pragma: no cover


# ------------------------------------------------------------------ running and checking


def shown(work: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The input as a reader can replay it."""
    out = {"model": f"TinyLM(seed={work['model_seed']}" +
                    (f", num_heads={extra.pop('num_heads')})" if "num_heads" in extra else ")"),
           "prompts": work["prompts"], "max_new_tokens": work["max_new_tokens"]}
    if work.get("eos_id") is not None:
        out["eos_id"] = work["eos_id"]
    out.update(extra)
    return out


def run_generate(module: Any, model: TinyLM, work: dict[str, Any], max_new_tokens: int | None = None
                 ) -> Any:
    n = work["max_new_tokens"] if max_new_tokens is None else max_new_tokens
    return call(module.generate, model, work["prompts"], n, work.get("eos_id"), what="generate")


def check_tokens(got: Any, want: list[list[int]], prop: str, input: Any) -> None:
    """got is a list of R lists of Python ints equal to want; the failure names the first
    request and step that differ."""
    well_formed = (isinstance(got, list) and len(got) == len(want)
                   and all(isinstance(o, list) and all(type(t) is int for t in o) for o in got))
    if not well_formed:
        raise PropertyFailure(prop + " (generate returns a list of R lists of Python ints)",
                              input=input, expected=want, got=got)
    for r, (g, w) in enumerate(zip(got, want)):
        if g != w:
            step = next((i for i, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
            raise PropertyFailure(prop, input=input, expected=want, got=got,
                                  note=f"request {r} differs first at new token {step}: expected "
                                       f"{w[step] if step < len(w) else 'the end'}, got "
                                       f"{g[step] if step < len(g) else 'the end'}")


def snapshot(model: TinyLM) -> dict[str, torch.Tensor]:
    return {name: t.detach().clone() for name, t in model.state_dict().items()}


def check_weights_unchanged(model: TinyLM, before: dict[str, torch.Tensor], input: Any) -> None:
    after = model.state_dict()
    for name, old in before.items():
        new = after.get(name)
        same = (new is not None and new.dtype == old.dtype and new.shape == old.shape
                and bool(torch.equal(new.detach(), old)))
        expect(same, f"generate uses the model's weights without changing them: {name} changed",
               input=input, expected=f"{name}: {old.dtype}, unchanged values",
               got="missing" if new is None else f"{new.dtype}, max change "
                   f"{float((new.detach().double() - old.double()).abs().max()) if new.shape == old.shape else 'shape'}")
