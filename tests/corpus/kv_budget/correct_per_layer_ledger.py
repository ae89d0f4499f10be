"""A correct kv-budget solution written differently: a per-layer ledger of matrices with their
TP sharding, exact rational arithmetic for the capacity, and the roofline from an arithmetic
intensity ("bytes vs FLOPs") helper."""

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class ModelSpec:
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    tied_embeddings: bool = False
    gated_mlp: bool = True


@dataclass(frozen=True)
class GPU:
    hbm_bytes: float
    hbm_bytes_per_s: float
    flops_per_s: float


def _matrices(spec):
    """(rows, cols, sharded) of every weight of the model."""
    d, hd = spec.d_model, spec.head_dim
    mats = [(spec.vocab_size, d, False)]
    layer = [(spec.n_heads * hd, d, True), (spec.n_kv_heads * hd, d, True), (spec.n_kv_heads * hd, d, True),
             (d, spec.n_heads * hd, True), (spec.d_ff, d, True), (d, spec.d_ff, True), (1, d, False), (1, d, False)]
    if spec.gated_mlp:
        layer.append((spec.d_ff, d, True))
    mats += layer * spec.n_layers
    mats.append((1, d, False))
    if not spec.tied_embeddings:
        mats.append((spec.vocab_size, d, False))
    return mats


def _validate_tp(spec, tp):
    for n in (spec.n_heads, spec.n_kv_heads, spec.d_ff):
        if tp <= 0 or n % tp:
            raise ValueError(f"tp={tp} does not divide {n}")


def param_count(spec):
    return sum(r * c for r, c, _ in _matrices(spec))


def _per_gpu(spec, tp):
    _validate_tp(spec, tp)
    return sum(r * c // tp if sharded else r * c for r, c, sharded in _matrices(spec))


def weight_bytes(spec, bytes_per_param, tp=1):
    return float(_per_gpu(spec, tp) * bytes_per_param)


def kv_bytes_per_token(spec, bytes_per_elem, tp=1):
    _validate_tp(spec, tp)
    return float(2 * spec.n_layers * spec.n_kv_heads * spec.head_dim * bytes_per_elem / tp)


def _free(spec, gpu, bytes_per_param, tp, reserve_fraction):
    if reserve_fraction < 0 or reserve_fraction >= 1:
        raise ValueError("reserve_fraction out of [0, 1)")
    free = (Fraction(gpu.hbm_bytes) * (1 - Fraction(reserve_fraction))
            - _per_gpu(spec, tp) * Fraction(bytes_per_param))
    if free < 0:
        raise ValueError("weights alone exceed the usable memory")
    return free


def max_kv_tokens(spec, gpu, bytes_per_param, bytes_per_elem, tp=1, reserve_fraction=0.1, block_size=None):
    free = _free(spec, gpu, bytes_per_param, tp, reserve_fraction)
    per_token = 2 * spec.n_layers * Fraction(spec.n_kv_heads, tp) * spec.head_dim * Fraction(bytes_per_elem)
    if block_size is None:
        return int(free // per_token)
    if block_size < 1:
        raise ValueError("block_size must be positive")
    return int(free // (per_token * block_size)) * block_size


def max_concurrent_seqs(spec, gpu, context_len, bytes_per_param, bytes_per_elem, tp=1, reserve_fraction=0.1,
                        block_size=16):
    if context_len <= 0:
        raise ValueError("context_len must be positive")
    if block_size is None:
        return max_kv_tokens(spec, gpu, bytes_per_param, bytes_per_elem, tp, reserve_fraction) // context_len
    pool_blocks = max_kv_tokens(spec, gpu, bytes_per_param, bytes_per_elem, tp, reserve_fraction,
                                block_size) // block_size
    return pool_blocks // -(-context_len // block_size)


def _roofline(gpu, bytes_moved, flops):
    return max(bytes_moved / gpu.hbm_bytes_per_s, flops / gpu.flops_per_s)


def decode_step_time(spec, gpu, batch, context_len, bytes_per_param, bytes_per_elem, tp=1):
    if batch <= 0 or context_len <= 0:
        raise ValueError("batch and context_len must be positive")
    n = _per_gpu(spec, tp)
    per_key = 4 * spec.n_layers * spec.n_heads // tp * spec.head_dim
    bytes_moved = n * bytes_per_param + batch * context_len * kv_bytes_per_token(spec, bytes_per_elem, tp)
    return _roofline(gpu, bytes_moved, batch * (2 * n + per_key * context_len))


def prefill_time(spec, gpu, prompt_len, bytes_per_param, tp=1):
    if prompt_len <= 0:
        raise ValueError("prompt_len must be positive")
    n = _per_gpu(spec, tp)
    per_key = 4 * spec.n_layers * spec.n_heads // tp * spec.head_dim
    causal_keys = prompt_len * (prompt_len + 1) // 2
    return _roofline(gpu, n * bytes_per_param, 2 * n * prompt_len + per_key * causal_keys)
