"""Models, prompts, the oracle and the checks shared by the slow-decode suite's levels.

The oracle gives `generate_slow`'s tokens without paying for its slowness: the reference
proposes each request's tokens, and one full forward pass over prompt + tokens (teacher
forcing, no cache, no batching tricks) confirms that every token is the argmax of its
position's logits by at least MIN_MARGIN. A confirmed token is what `generate_slow`'s full
recompute picks too (float64 rounding is far below the margin), so a correct solution's
different order of operations never flips one; an input without a clear margin is not used.
The project's tests check the oracle against `generate_slow` itself.

The FLOP budget of the efficiency tests is counted, not measured: `cached_flops` adds up the
matmuls of a KV-cached generation the way torch.utils.flop_counter.FlopCounterMode counts
them (2·m·n·k each), so the judge never pays for a counting mode; the project's tests check
it equals the count of the reference's generation.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch
from hypothesis import strategies as st

import reference.slow_decode as reference_decode  # also registers slow_decode_model outside the grader
from grader.protocol import PropertyFailure, call, expect
from slow_decode_model import TinyLM

# The judge's tensors are tiny: one thread computes them fastest, and spares the CPU time
# that idle OpenMP workers spin away on a busy machine.
torch.set_num_threads(1)

MIN_MARGIN = 1e-6
VOCAB = 64
D_MODEL = 32
NUM_LAYERS = 2
MAX_SEQ_LEN = 32
MODEL_SEEDS = st.integers(0, 31)
FLOPS_BUDGET = 1.2   # the statement: at most 1.2x the FLOPs of the cached reference


# Models of other shapes than the suite's default: every attribute a solution reads (head_dim
# for the scale, max_seq_len, vocab_size, d_model, num_layers) differs from TinyLM()'s.
OTHER_SHAPES = ({"vocab_size": 48, "d_model": 24, "num_heads": 1, "num_layers": 1, "max_seq_len": 20},
                {"vocab_size": 80, "d_model": 48, "num_heads": 3, "num_layers": 3, "max_seq_len": 40})


def fresh_model(seed: int, num_heads: int = 4, **shape: int) -> TinyLM:
    """A new TinyLM (never shared between calls: a solution that edits the weights must not
    change what the next test sees). `shape` overrides vocab_size, d_model, num_layers or
    max_seq_len."""
    config = {"vocab_size": VOCAB, "d_model": D_MODEL, "num_heads": num_heads, "num_layers": NUM_LAYERS,
              "max_seq_len": MAX_SEQ_LEN, **shape}
    model = TinyLM(**config, seed=seed)
    # How a failure's snippet rebuilds it (grader/engine/transcript.py): the same weights.
    model._kata_rebuild = (f"{TinyLM.__module__}.TinyLM("  # type: ignore[assignment]  # a str, not a tensor
                           + "".join(f"{k}={v}, " for k, v in config.items()) + f"seed={seed})")
    return model


def model_text(seed: int, **shape: int) -> str:
    """How a failure shows a model of another shape: TinyLM(seed=3, num_heads=1, ...)."""
    return f"TinyLM(seed={seed}" + "".join(f", {k}={v}" for k, v in shape.items()) + ")"


def random_prompts(seed: int, lengths: list[int], vocab_size: int = VOCAB) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab_size, (n,), generator=gen).tolist() for n in lengths]


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


@torch.no_grad()
def confirmed_margins(model: TinyLM, prompts: list[list[int]], outputs: list[list[int]]) -> list[float]:
    """For each request, the smallest lead of its proposed token over the runner-up in the
    logits of a full forward pass over prompt + outputs (inf for no tokens). The rows are
    right-padded into one batch: attention is causal, so padding after a row's last token
    changes none of its logits. A proposed token that is not the argmax is a suite error."""
    rows = [list(p) + list(o)[:-1] for p, o in zip(prompts, outputs)]
    T = max(len(r) for r in rows)
    logits = model(torch.tensor([r + [0] * (T - len(r)) for r in rows]))       # (R, T, V)
    margins = []
    for i, (prompt, out) in enumerate(zip(prompts, outputs)):
        if not out:
            margins.append(math.inf)
            continue
        top2 = logits[i, len(prompt) - 1: len(prompt) - 1 + len(out)].topk(2, dim=-1)  # (n, 2)
        lead = top2.values[:, 0] - top2.values[:, 1]
        margin = float(lead.min())
        if margin >= MIN_MARGIN and top2.indices[:, 0].tolist() != list(out):
            raise AssertionError(f"the reference's tokens are not greedy: {prompt} -> {out}")
        margins.append(margin)
    return margins


@lru_cache(maxsize=512)
def _greedy(model_seed: int, num_heads: int, prompts: tuple, max_new_tokens: int,
            shape: tuple[tuple[str, int], ...] = ()) -> tuple[tuple, float]:
    model = fresh_model(model_seed, num_heads, **dict(shape))
    outputs = reference_decode.generate(model, [list(p) for p in prompts], max_new_tokens)
    margin = min(confirmed_margins(model, [list(p) for p in prompts], outputs)) if max_new_tokens else math.inf
    return tuple(tuple(o) for o in outputs), margin


def slow_tokens(model_seed: int, prompts: list[list[int]], max_new_tokens: int,
                eos_id: int | None = None, num_heads: int = 4, **shape: int) -> list[list[int]]:
    """generate_slow's tokens (see the module's docstring; use only where clear_margin holds).
    With eos_id, each request's tokens are cut right after the first EOS: greedy decoding is
    deterministic, so that is generate_slow's output with eos_id. `shape` as for fresh_model."""
    greedy = _greedy(model_seed, num_heads, _key(prompts), max_new_tokens, tuple(sorted(shape.items())))
    out = [list(o) for o in greedy[0]]
    if eos_id is not None:
        out = [o[: o.index(eos_id) + 1] if eos_id in o else o for o in out]
    return out


def clear_margin(model_seed: int, prompts: list[list[int]], max_new_tokens: int,
                 num_heads: int = 4, **shape: int) -> bool:
    """True when every greedy choice of generate_slow on this input wins by MIN_MARGIN."""
    greedy = _greedy(model_seed, num_heads, _key(prompts), max_new_tokens, tuple(sorted(shape.items())))
    return greedy[1] >= MIN_MARGIN


# ------------------------------------------------------------------ the FLOP budget


def cached_flops(prompts: list[list[int]], outputs: list[list[int]], *, d_model: int = D_MODEL,
                 num_layers: int = NUM_LAYERS, vocab_size: int = VOCAB) -> int:
    """FLOPs of the reference's KV-cached generation of `outputs` from `prompts`, as
    FlopCounterMode counts them (matmuls only, 2·m·n·k). The prompts run once, left-padded to
    the longest (P); decode step s feeds one token per request that still needs one and
    attends over P + s + 1 cached positions; the logits are computed for the last position
    only. Per token and block the linears cost 2·C·(3C + C + 4C + 4C) = 24·C², attention over
    L keys 4·L·C (scores and weighted values), the logits 2·C·V."""
    C, R = d_model, len(prompts)
    longest_output = max((len(o) for o in outputs), default=0)
    if longest_output == 0:
        return 0
    P = max(len(p) for p in prompts)
    flops = num_layers * (R * P * 24 * C * C + 4 * R * P * P * C) + 2 * R * C * vocab_size
    for step in range(longest_output - 1):
        active = sum(len(o) > step + 1 for o in outputs)     # requests that need token step + 1
        flops += num_layers * (active * 24 * C * C + 4 * active * (P + step + 1) * C)
        flops += 2 * active * C * vocab_size
    return flops


# ------------------------------------------------------------------ EOS scenarios


@lru_cache(maxsize=16)
def _pool(model_seed: int, pool_seed: int, max_new_tokens: int) -> tuple[list, list, list]:
    """24 short random prompts, their greedy outputs and their margins."""
    model = fresh_model(model_seed)
    gen = torch.Generator().manual_seed(1000 * model_seed + pool_seed)
    lengths = torch.randint(1, 5, (24,), generator=gen).tolist()
    prompts = random_prompts(int(torch.randint(0, 2**16, (1,), generator=gen)), lengths)
    outputs = reference_decode.generate(model, prompts, max_new_tokens)
    return prompts, outputs, confirmed_margins(model, prompts, outputs)


@lru_cache(maxsize=16)
def eos_scenario(model_seed: int, *, runner: bool, max_new_tokens: int = 12) -> dict[str, Any]:
    """Prompts and an eos_id where requests finish at three or four different steps (the
    first at step 0, the last by step max_new_tokens // 2), plus, with `runner`, one request
    that never generates the EOS and runs to the end (without it, max_new_tokens is as large
    as the model allows). Found by a deterministic search over pools of short random prompts."""
    for pool_seed in range(20):
        pool, outputs, margins = _pool(model_seed, pool_seed, max_new_tokens)
        clear = [i for i in range(len(pool)) if margins[i] >= MIN_MARGIN]
        for eos_id in range(VOCAB):
            first_hit: dict[int, int] = {}
            never = []
            for i in clear:
                if eos_id not in outputs[i]:
                    never.append(i)
                elif outputs[i].index(eos_id) <= max_new_tokens // 2:
                    first_hit.setdefault(outputs[i].index(eos_id), i)
            steps = sorted(first_hit)[:4]
            if len(steps) < 3 or steps[0] != 0 or (runner and not never):
                continue
            prompts = [pool[first_hit[s]] for s in steps] + ([pool[never[0]]] if runner else [])
            # Without a runner, every request has finished by step max_new_tokens // 2; the
            # generation is then allowed to run as long as the model can, so a loop that goes
            # on after everyone finished has many steps to waste.
            longest = max_new_tokens if runner else MAX_SEQ_LEN - max(len(p) for p in prompts)
            return {"model_seed": model_seed, "prompts": prompts, "max_new_tokens": longest,
                    "eos_id": eos_id, "finish_steps": steps}
    raise AssertionError(f"no EOS scenario for model seed {model_seed}")  # pragma: no cover


@lru_cache(maxsize=16)
def same_step_scenario(model_seed: int) -> dict[str, Any]:
    """eos_scenario's first three finishing requests twice each, in rows that are not next to
    each other, around its runner: two requests generate the EOS at each of three steps (the
    first pair at step 0), while the runner never does."""
    work = eos_scenario(model_seed, runner=True)
    f0, f1, f2 = work["prompts"][:3]
    s0, s1, s2 = work["finish_steps"][:3]
    return {**work, "prompts": [f0, f1, work["prompts"][-1], f0, f2, f1, f2],
            "finish_steps": [s0, s0, s1, s1, s2, s2]}


@lru_cache(maxsize=1)
def eos_zero_workload(max_new_tokens: int = 12) -> dict[str, Any]:
    """eos_id = 0, a legal id that is falsy: one request that generates token 0 before its last
    step, one that never does. Found by a deterministic search over the pools of prompts."""
    for model_seed in range(40):
        for pool_seed in range(20):
            pool, outputs, margins = _pool(model_seed, pool_seed, max_new_tokens)
            clear = [i for i in range(len(pool)) if margins[i] >= MIN_MARGIN]
            hits = [i for i in clear if 0 in outputs[i][:-1]]
            never = [i for i in clear if 0 not in outputs[i]]
            if hits and never:
                return {"model_seed": model_seed, "prompts": [pool[hits[0]], pool[never[0]]],
                        "max_new_tokens": max_new_tokens, "eos_id": 0,
                        "finish_steps": [outputs[hits[0]].index(0)]}
    raise AssertionError("no workload that generates token 0")  # pragma: no cover


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
    # Copies of the prompts: the oracle reads work["prompts"] after the call (and the EOS
    # scenarios are cached, shared by tests), so an edited prompt must not reach them.
    prompts = [list(p) for p in work["prompts"]]
    return call(module.generate, model, prompts, n, work.get("eos_id"), what="generate")


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
