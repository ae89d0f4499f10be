"""Strategies, the exact ledger oracle and helpers shared by the kv-budget levels.

param_count is judged against Hugging Face's Llama parameter table (llama_params.py, checked
against transformers by tests/test_kata_kv_budget.py). The other values use a closed form of
its counts (pinned equal to the table by the same tests), split into what tensor parallelism
shards (the *_proj matrices) and what it replicates (embedding, lm_head, norms), and exact
fractions, so that a floor is never decided by a rounding error: draws whose exact quotient
lies within 1e-6 of an integer are nudged away from it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

from hypothesis import strategies as st

from grader.protocol import PropertyFailure, call, expect

LLAMA3_8B = dict(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, d_ff=14336,
                 vocab_size=128256, tied_embeddings=False, gated_mlp=True)
LLAMA3_70B = dict(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, head_dim=128, d_ff=28672,
                  vocab_size=128256, tied_embeddings=False, gated_mlp=True)
H100 = dict(hbm_bytes=80e9, hbm_bytes_per_s=3.35e12, flops_per_s=989e12)
REL_TOL = 1e-9


# ------------------------------------------------------------------------------ oracle


def counts(spec: dict) -> tuple[int, int]:
    """(replicated, sharded) parameters: embedding, lm_head and norms vs the *_proj matrices.
    A closed form, pinned equal to the parameter table (llama_params) by the project's tests."""
    d, hd, layers = spec["d_model"], spec["head_dim"], spec["n_layers"]
    embeddings = spec["vocab_size"] * d * (1 if spec.get("tied_embeddings", False) else 2)
    attention = 2 * d * spec["n_heads"] * hd + 2 * d * spec["n_kv_heads"] * hd
    mlp = (3 if spec.get("gated_mlp", True) else 2) * d * spec["d_ff"]
    return embeddings + (2 * layers + 1) * d, layers * (attention + mlp)


def param_total(spec: dict) -> int:
    """The parameter count of Hugging Face's LlamaForCausalLM, from its parameter table."""
    from grader.suites.kv_budget.llama_params import llama_param_count

    return llama_param_count(spec)


def params_per_gpu(spec: dict, tp: int) -> Fraction:
    replicated, sharded = counts(spec)
    return replicated + Fraction(sharded, tp)


def exact(x: float) -> Fraction:
    return Fraction(x)


def weight_bytes(spec: dict, bpp: float, tp: int) -> Fraction:
    return params_per_gpu(spec, tp) * exact(bpp)


def kv_per_token(spec: dict, bpe: float, tp: int) -> Fraction:
    return 2 * spec["n_layers"] * Fraction(spec["n_kv_heads"], tp) * spec["head_dim"] * exact(bpe)


def free_bytes(case: dict) -> Fraction:
    return exact(case["gpu"]["hbm_bytes"]) * (1 - exact(case["reserve_fraction"])) - \
        weight_bytes(case["spec"], case["bpp"], case["tp"])


def tokens(case: dict, block_size: int | None) -> int:
    per_token = kv_per_token(case["spec"], case["bpe"], case["tp"])
    if block_size is None:
        return math.floor(free_bytes(case) / per_token)
    return math.floor(free_bytes(case) / (per_token * block_size)) * block_size


def decode_terms(case: dict, batch: int, context_len: int) -> tuple[Fraction, Fraction]:
    """(seconds if memory-bound, seconds if compute-bound)."""
    spec, tp, gpu = case["spec"], case["tp"], case["gpu"]
    params = params_per_gpu(spec, tp)
    read = params * exact(case["bpp"]) + batch * context_len * kv_per_token(spec, case["bpe"], tp)
    attention = 4 * spec["n_layers"] * Fraction(spec["n_heads"], tp) * spec["head_dim"]
    flops = batch * (2 * params + attention * context_len)
    return read / exact(gpu["hbm_bytes_per_s"]), flops / exact(gpu["flops_per_s"])


def prefill_terms(case: dict, prompt_len: int) -> tuple[Fraction, Fraction]:
    spec, tp, gpu = case["spec"], case["tp"], case["gpu"]
    params = params_per_gpu(spec, tp)
    attention = 4 * spec["n_layers"] * Fraction(spec["n_heads"], tp) * spec["head_dim"]
    flops = prompt_len * 2 * params + attention * Fraction(prompt_len * (prompt_len + 1), 2)
    return params * exact(case["bpp"]) / exact(gpu["hbm_bytes_per_s"]), flops / exact(gpu["flops_per_s"])


def crossover_batch(case: dict, context_len: int) -> Fraction | None:
    """The batch b* at which memory and compute time are equal (None if never compute-bound)."""
    mem1, comp1 = decode_terms(case, 1, context_len)
    mem2, _ = decode_terms(case, 2, context_len)
    kv_time_per_seq, weight_time = mem2 - mem1, 2 * mem1 - mem2
    slope = comp1 - kv_time_per_seq
    return weight_time / slope if slope > 0 else None


# ------------------------------------------------------------------------------ strategies


@st.composite
def small_specs(draw: Any) -> dict:
    """Small random configs: head_dim independent of d_model, GQA groups, tied or not."""
    n_kv_heads = draw(st.integers(1, 4))
    return dict(n_layers=draw(st.integers(1, 3)), d_model=draw(st.integers(1, 48)),
                n_heads=n_kv_heads * draw(st.integers(1, 4)), n_kv_heads=n_kv_heads,
                head_dim=draw(st.integers(1, 24)), d_ff=draw(st.integers(1, 96)),
                vocab_size=draw(st.integers(1, 300)), tied_embeddings=draw(st.booleans()),
                gated_mlp=draw(st.booleans()))


@st.composite
def tp_specs(draw: Any, min_tp: int = 1) -> tuple[dict, int]:
    """(spec, tp) with tp dividing n_heads, n_kv_heads and d_ff."""
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if t >= min_tp]))
    n_kv_heads = tp * draw(st.integers(1, 2))
    spec = dict(n_layers=draw(st.integers(1, 6)), d_model=draw(st.integers(1, 40)) * 8,
                n_heads=n_kv_heads * draw(st.sampled_from([1, 2, 4])), n_kv_heads=n_kv_heads,
                head_dim=draw(st.sampled_from([8, 16, 24, 64])), d_ff=tp * draw(st.integers(1, 40)) * 4,
                vocab_size=draw(st.integers(1, 5000)), tied_embeddings=draw(st.booleans()),
                gated_mlp=draw(st.booleans()))
    return spec, tp


GPUS = (dict(hbm_bytes=24e9, hbm_bytes_per_s=1.0e12, flops_per_s=165e12),
        dict(hbm_bytes=80e9, hbm_bytes_per_s=3.35e12, flops_per_s=989e12),
        dict(hbm_bytes=141e9, hbm_bytes_per_s=4.8e12, flops_per_s=989e12),
        dict(hbm_bytes=192e9, hbm_bytes_per_s=8e12, flops_per_s=2250e12))


@st.composite
def serving_cases(draw: Any) -> dict:
    """A model at serving scale on a GPU whose usable HBM holds its weights, with dtypes, tp
    and a reserve; the HBM size is nudged so that no floor sits on a rounding boundary."""
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    n_kv_heads = tp * draw(st.integers(1, 2))
    spec = dict(n_layers=draw(st.integers(2, 48)), d_model=draw(st.integers(4, 40)) * 128,
                n_heads=n_kv_heads * draw(st.sampled_from([1, 2, 4, 8])), n_kv_heads=n_kv_heads,
                head_dim=draw(st.sampled_from([64, 128])), d_ff=tp * draw(st.integers(8, 112)) * 128,
                vocab_size=draw(st.sampled_from([32000, 128256, 151936])),
                tied_embeddings=draw(st.booleans()), gated_mlp=draw(st.booleans()))
    case = {"spec": spec, "tp": tp, "gpu": dict(draw(st.sampled_from(GPUS))),
            "bpp": draw(st.sampled_from([0.5, 1.0, 2.0, 4.0])), "bpe": draw(st.sampled_from([1.0, 2.0, 4.0])),
            "reserve_fraction": draw(st.sampled_from([0.0, 0.05, 0.1, 0.3]))}
    weights = weight_bytes(spec, case["bpp"], tp)
    usable = exact(case["gpu"]["hbm_bytes"]) * (1 - exact(case["reserve_fraction"]))
    if weights > usable * Fraction(9, 10):  # a bigger GPU of the same make: weights take <= 90 %
        case["gpu"]["hbm_bytes"] = float(math.ceil(weights / (1 - exact(case["reserve_fraction"])) * 2))
    return nudged(case)


def nudged(case: dict) -> dict:
    """Move hbm_bytes by whole bytes until every exact quotient behind a floor is at least
    1e-6 away from an integer (then float arithmetic cannot change the floor)."""
    for _ in range(100):
        per_token = kv_per_token(case["spec"], case["bpe"], case["tp"])
        quotients = [free_bytes(case) / (per_token * bs) for bs in (1, 16)]
        if all(abs(q - round(q)) > Fraction(1, 10**6) for q in quotients):
            return case
        case["gpu"]["hbm_bytes"] += 1.0 + float(per_token) / 7
    return case


# ------------------------------------------------------------------------------ calling the solution


def make_spec(solution: Any, spec: dict) -> Any:
    return call(solution.ModelSpec, what="ModelSpec(...)", **spec)


def make_gpu(solution: Any, gpu: dict) -> Any:
    return call(solution.GPU, what="GPU(...)", **gpu)


def spec_text(spec: dict) -> str:
    defaults = {"tied_embeddings": False, "gated_mlp": True}
    fields = ", ".join(f"{k}={v}" for k, v in spec.items() if defaults.get(k, object()) != v)
    return f"ModelSpec({fields})"


def case_text(case: dict, **extra: Any) -> dict:
    shown = {"spec": spec_text(case["spec"]), "gpu": case["gpu"], "tp": case["tp"],
             "bytes_per_param": case["bpp"], "bytes_per_elem": case["bpe"],
             "reserve_fraction": case["reserve_fraction"]}
    return {**shown, **extra}


def expect_int(got: Any, want: int, prop: str, *, input: Any) -> None:
    expect(type(got) is int and got == want, prop, input=input, expected=want,
           got=f"{got!r} ({type(got).__name__})")


def expect_close(got: Any, want: Fraction | float, prop: str, *, input: Any) -> None:
    ok = isinstance(got, (int, float)) and not isinstance(got, bool) and \
        math.isclose(float(got), float(want), rel_tol=REL_TOL, abs_tol=0.0)
    expect(ok, prop, input=input, expected=float(want), got=got)


def expect_value_error(fn: Callable[[], Any], prop: str, *, input: Any, what: str) -> None:
    try:
        got = fn()
    except ValueError:
        return
    except NotImplementedError as exc:
        raise PropertyFailure(f"{what} is not implemented yet (NotImplementedError)") from exc
    except Exception as exc:  # noqa: BLE001 - another exception is the failure shown
        raise PropertyFailure(prop, input=input, expected="ValueError",
                              got=f"{type(exc).__name__}: {exc}") from None
    raise PropertyFailure(prop, input=input, expected="ValueError", got=f"returned {got!r}")


def expect_accepted(fn: Callable[[], Any], prop: str, *, input: Any) -> Any:
    """fn() must not raise; its result is returned. NotImplementedError (and the failure `call`
    makes of it) stays a 'not implemented' verdict."""
    try:
        return fn()
    except (NotImplementedError, PropertyFailure):
        raise
    except Exception as exc:  # noqa: BLE001 - any exception is the failure shown
        raise PropertyFailure(prop, input=input, expected="no exception",
                              got=f"{type(exc).__name__}: {exc}") from None
