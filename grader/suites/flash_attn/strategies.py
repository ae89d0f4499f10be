"""Strategies, oracles and checks shared by the flash-attn levels.

The oracles are dense float64 computations written here, independent of the reference:
attention with its log-sum-exp, the merge of partials, and per-sequence decode attention
read token by token through the block table. Inputs are small (sizes 1-5) and values
rounded to one decimal, so shrunk counterexamples stay readable.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from hypothesis import strategies as st

from grader.protocol import PropertyFailure, call, show
from grader.suites._common import check_close

FLOATS = (torch.float32, torch.float64)
HALVES = (torch.float16, torch.bfloat16)
INF = math.inf

seeds = st.integers(0, 2**16)
# 1 and sizes that leave a partial last tile, and one larger than every length drawn
block_sizes = st.sampled_from([1, 2, 3, 4, 5, 64])


def randn(seed: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32,
          scale: float = 1.0) -> torch.Tensor:
    """Normal values rounded to one decimal (readable), from a seed (fast to draw)."""
    gen = torch.Generator().manual_seed(seed)
    values = (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).round(decimals=1)
    return values.to(dtype)


# ------------------------------------------------------------------------------ level 1, 2


@st.composite
def attention_cases(draw: Any, dtypes: tuple[torch.dtype, ...] = FLOATS, min_keys: int = 0,
                    max_len: int = 8, scale: float = 1.0) -> dict:
    """q (B, H, Tq, D), k / v (B, H_kv, Tk, D) with H = H_kv * group, and tile sizes."""
    B, H_kv, group, D = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), \
        draw(st.integers(1, 4))
    Tq, Tk = draw(st.integers(1, max_len)), draw(st.integers(min_keys, max_len))
    dtype, seed = draw(st.sampled_from(dtypes)), draw(seeds)
    return {"q": randn(seed, (B, H_kv * group, Tq, D), dtype, scale),
            "k": randn(seed + 1, (B, H_kv, Tk, D), dtype, scale),
            "v": randn(seed + 2, (B, H_kv, Tk, D), dtype),
            "block_q": draw(block_sizes), "block_k": draw(block_sizes)}


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                    scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) in float64: softmax over every key a row may attend; rows with none give
    out 0 and lse -inf. GQA by repeat_interleave (query head h reads KV head h // group)."""
    B, H, Tq, D = q.shape
    group, Tk = H // k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    keys = k.double().repeat_interleave(group, dim=1)
    values = v.double().repeat_interleave(group, dim=1)
    s = (q.double() @ keys.transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
    if causal:
        allowed = torch.arange(Tk)[None, :] <= torch.arange(Tq)[:, None] + (Tk - Tq)
        s = s.masked_fill(~allowed, -INF)
    lse = torch.logsumexp(s, dim=-1) if Tk else torch.full((B, H, Tq), -INF, dtype=torch.float64)
    shift = torch.where(lse == -INF, 0.0, lse)
    out = torch.exp(s - shift[..., None]) @ values
    return out, lse


def run_attention(solution: Any, case: dict, **kwargs: Any) -> tuple[Any, Any]:
    """The candidate's flash_attention on copies of q, k, v; (out, lse) or a failure when the
    result is not a pair."""
    result = call(solution.flash_attention, case["q"].clone(), case["k"].clone(), case["v"].clone(),
                  what="flash_attention()", block_q=case["block_q"], block_k=case["block_k"], **kwargs)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise PropertyFailure("flash_attention returns a tuple (out, lse)", input=shown(case, **kwargs),
                              got=type(result).__name__)
    return result


def shown(case: dict, **kwargs: Any) -> dict:
    """A case as the scorecard shows it: 4-D tensors with their values."""
    return readable({**case, **{k: v for k, v in kwargs.items() if v is not None}})


def check_out(got: Any, case: dict, expected: torch.Tensor, prop: str, *, input: Any,
              atol: float | None = None, rtol: float | None = None) -> None:
    """out against the float64 oracle cast to q's dtype (shape, dtype, values)."""
    close(got, expected.to(case["q"].dtype), prop + " (out)", input=input, atol=atol, rtol=rtol)


def check_lse(got: Any, expected: torch.Tensor, prop: str, *, input: Any, rtol: float = 1e-5) -> None:
    """lse is float32 of shape (B, H, Tq), -inf exactly where the oracle's is."""
    close(got, expected.to(torch.float32), prop + " (lse, float32)", input=input, atol=1e-5, rtol=rtol)


# ------------------------------------------------------------------------------ readable failures


class _Readable:
    """A tensor of 4 or more dims rendered with its values (protocol.show elides them)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        t = self.tensor.detach().cpu()
        if t.numel() > 64:
            values: Any = f"first values {t.flatten()[:8].double().round(decimals=4).tolist()}, ..."
        else:
            values = t.tolist() if not t.is_floating_point() else t.double().round(decimals=5).tolist()
        return f"tensor({values}, shape={tuple(t.shape)}, dtype={str(t.dtype).replace('torch.', '')})"


def readable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _Readable(value) if value.dim() >= 4 else value
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(readable(v) for v in value)
    return value


def close(got: Any, expected: torch.Tensor, prop: str, *, input: Any, **tolerance: Any) -> None:
    """_common.check_close, with 4-D inputs and results shown with their values."""
    try:
        check_close(got, expected, prop, input=input, **tolerance)
    except PropertyFailure as exc:
        if exc.note is None:  # shape / dtype / type mismatch: the message is complete
            raise PropertyFailure(exc.prop, input=readable(input), expected=exc.expected,
                                  got=exc.got) from None
        raise PropertyFailure(exc.prop, input=readable(input), expected=readable(expected),
                              got=readable(got), note=exc.note) from None


def raises_value_error(fn: Callable[[], Any], what: str) -> tuple[bool, str]:
    """(True, ...) when fn() raises ValueError; otherwise what happened instead."""
    try:
        fn()
    except ValueError:
        return True, "ValueError"
    except NotImplementedError as exc:
        raise PropertyFailure(f"{what} is not implemented yet (NotImplementedError)") from exc
    except Exception as exc:  # noqa: BLE001 - any other exception is the wrong answer
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return False, "no exception (it returned)"


def visible_tile_pairs(Tq: int, Tk: int, block_q: int, block_k: int, causal: bool) -> list[tuple[int, int]]:
    """(bq, bk) of every (query tile, key tile) pair that some query of the tile may see."""
    pairs = []
    for q_start in range(0, Tq, block_q):
        q_end = min(q_start + block_q, Tq)
        for k_start in range(0, Tk, block_k):
            if causal and k_start > q_end - 1 + (Tk - Tq):
                break
            pairs.append((q_end - q_start, min(k_start + block_k, Tk) - k_start))
    return pairs


def expected_flops(B: int, H: int, Tq: int, Tk: int, D: int, block_q: int, block_k: int,
                   causal: bool) -> int:
    return sum(4 * B * H * bq * bk * D for bq, bk in visible_tile_pairs(Tq, Tk, block_q, block_k, causal))


def storage_text(storage: tuple[int, tuple[int, ...], str]) -> str:
    numel, shape, dtype = storage
    return f"{numel} elements, shape {shape}, {dtype}"


def accumulator_like(storage: tuple[int, tuple[int, ...], str], B: int, H: int, Tq: int, D: int,
                     q_dtype: str) -> bool:
    """A tensor the memory rule always allows: of out's shape (B, H, Tq, D) or lse's shape
    (B, H, Tq) (also (B, H, Tq, 1)) in float32 / float64, or out's shape in q's dtype."""
    _, shape, dtype = storage
    if shape == (B, H, Tq, D) and dtype in ("float32", "float64", q_dtype):
        return True
    return shape in ((B, H, Tq), (B, H, Tq, 1)) and dtype in ("float32", "float64")


# ------------------------------------------------------------------------------ level 3


@st.composite
def decode_cases(draw: Any, dtypes: tuple[torch.dtype, ...] = FLOATS + HALVES,
                 shared_prefix: bool = False, nan_unowned: bool = False,
                 index_dtype: torch.dtype | None = None) -> dict:
    """A paged cache and B sequences. Every sequence owns ceil(len / BS) distinct blocks (a
    shared prefix: sequences 1.. reuse sequence 0's first blocks); table entries past a
    sequence's last block hold garbage (out of range too); slots no sequence owns hold random
    values, or NaN."""
    B, H_kv, group, D = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 2)), \
        draw(st.integers(1, 4))
    block_size, max_blocks = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    capacity = block_size * max_blocks
    seq_lens = draw(st.lists(st.integers(0, capacity), min_size=B, max_size=B))
    if shared_prefix:
        shared = draw(st.integers(1, max_blocks))
        seq_lens = [max(n, shared * block_size) for n in seq_lens]
    else:
        shared = 0
    num_blocks = B * max_blocks + draw(st.integers(0, 2))
    gen = torch.Generator().manual_seed(draw(seeds))
    perm = torch.randperm(num_blocks, generator=gen)
    table = torch.randint(-3, num_blocks + 5, (B, max_blocks), generator=gen)  # garbage by default
    for b, n in enumerate(seq_lens):
        used = -(-n // block_size)
        table[b, :used] = perm[b * max_blocks: b * max_blocks + used]
        table[b, :min(shared, used)] = table[0, :min(shared, used)]
    dtype, seed = draw(st.sampled_from(dtypes)), draw(seeds)
    k_cache = randn(seed, (num_blocks, block_size, H_kv, D), dtype)
    v_cache = randn(seed + 1, (num_blocks, block_size, H_kv, D), dtype)
    if nan_unowned:
        owned = owned_slots(table, seq_lens, num_blocks, block_size)
        k_cache[~owned], v_cache[~owned] = float("nan"), float("nan")
    index = index_dtype or draw(st.sampled_from([torch.int64, torch.int32]))
    return {"q": randn(seed + 2, (B, H_kv * group, D), dtype),
            "k_cache": k_cache, "v_cache": v_cache, "block_table": table.to(index),
            "seq_lens": torch.tensor(seq_lens, dtype=index), "num_splits": draw(st.integers(1, 5))}


def owned_slots(table: torch.Tensor, seq_lens: list[int], num_blocks: int, block_size: int) -> torch.Tensor:
    """(NB, BS) bool: the slots holding some sequence's token."""
    owned = torch.zeros(num_blocks, block_size, dtype=torch.bool)
    for b, n in enumerate(seq_lens):
        for t in range(n):
            owned[int(table[b, t // block_size]), t % block_size] = True
    return owned


def dense_decode(case: dict, scale: float | None = None) -> torch.Tensor:
    """(B, H, D) float64: each sequence's query over its own tokens, read token by token."""
    q, k_cache, v_cache = case["q"].double(), case["k_cache"].double(), case["v_cache"].double()
    B, H, D = q.shape
    block_size, group = k_cache.shape[1], H // k_cache.shape[2]
    out = torch.zeros(B, H, D, dtype=torch.float64)
    for b, n in enumerate(case["seq_lens"].tolist()):
        if n == 0:
            continue
        slots = [(int(case["block_table"][b, t // block_size]), t % block_size) for t in range(n)]
        keys = torch.stack([k_cache[blk, s] for blk, s in slots]).repeat_interleave(group, 1)  # (n, H, D)
        values = torch.stack([v_cache[blk, s] for blk, s in slots]).repeat_interleave(group, 1)
        scores = torch.einsum("hd,thd->ht", q[b], keys) * (1.0 / math.sqrt(D) if scale is None else scale)
        out[b] = torch.einsum("ht,thd->hd", torch.softmax(scores, dim=-1), values)
    return out


def run_decode(solution: Any, case: dict, **kwargs: Any) -> Any:
    """The candidate's flash_decode on copies of the case's tensors."""
    tensors = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in case.items()}
    return call(solution.flash_decode, tensors["q"], tensors["k_cache"], tensors["v_cache"],
                tensors["block_table"], tensors["seq_lens"], num_splits=case["num_splits"],
                what="flash_decode()", **kwargs)


def decode_shown(case: dict, **kwargs: Any) -> dict:
    return readable({**case, **kwargs})


__all__ = ["FLOATS", "HALVES", "INF", "accumulator_like", "attention_cases", "block_sizes", "check_lse",
           "check_out", "close", "decode_cases", "decode_shown", "dense_attention", "dense_decode",
           "expected_flops", "owned_slots", "raises_value_error", "randn", "readable", "run_attention",
           "run_decode", "seeds", "show", "shown", "storage_text", "visible_tile_pairs"]
