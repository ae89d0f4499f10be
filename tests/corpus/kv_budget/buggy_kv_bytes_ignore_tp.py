"""KV bytes per token are not divided among the tp GPUs."""

import math
from dataclasses import dataclass


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


def _check_tp(spec, tp):
    if tp < 1 or spec.n_heads % tp != 0 or spec.n_kv_heads % tp != 0 or spec.d_ff % tp != 0:
        raise ValueError("tp must divide n_heads, n_kv_heads and d_ff")


def _split(spec):
    d = spec.d_model
    embed = spec.vocab_size * d
    lm_head = 0 if spec.tied_embeddings else spec.vocab_size * d
    norms = spec.n_layers * 2 * d + d
    q = d * spec.n_heads * spec.head_dim
    kv = 2 * d * spec.n_kv_heads * spec.head_dim
    o = spec.n_heads * spec.head_dim * d
    mlp = (3 if spec.gated_mlp else 2) * d * spec.d_ff
    return embed + lm_head + norms, spec.n_layers * (q + kv + o + mlp)


def param_count(spec):
    replicated, sharded = _split(spec)
    return replicated + sharded


def _params_per_gpu(spec, tp):
    _check_tp(spec, tp)
    replicated, sharded = _split(spec)
    return replicated + sharded // tp


def weight_bytes(spec, bytes_per_param, tp=1):
    return _params_per_gpu(spec, tp) * bytes_per_param


def kv_bytes_per_token(spec, bytes_per_elem, tp=1):
    _check_tp(spec, tp)
    return 2 * spec.n_layers * spec.n_kv_heads * spec.head_dim * bytes_per_elem


def max_kv_tokens(spec, gpu, bytes_per_param, bytes_per_elem, tp=1, reserve_fraction=0.1, block_size=None):
    if not 0 <= reserve_fraction < 1:
        raise ValueError("reserve_fraction must be in [0, 1)")
    if block_size is not None and block_size < 1:
        raise ValueError("block_size must be >= 1")
    free = gpu.hbm_bytes * (1 - reserve_fraction) - weight_bytes(spec, bytes_per_param, tp)
    if free < 0:
        raise ValueError("the weights do not fit")
    per_token = kv_bytes_per_token(spec, bytes_per_elem, tp)
    if block_size is None:
        return int(math.floor(free / per_token))
    return int(math.floor(free / (per_token * block_size))) * block_size


def max_concurrent_seqs(spec, gpu, context_len, bytes_per_param, bytes_per_elem, tp=1, reserve_fraction=0.1,
                        block_size=16):
    if context_len < 1:
        raise ValueError("context_len must be >= 1")
    tokens = max_kv_tokens(spec, gpu, bytes_per_param, bytes_per_elem, tp, reserve_fraction, block_size)
    if block_size is None:
        return tokens // context_len
    blocks_per_seq = math.ceil(context_len / block_size)
    return (tokens // block_size) // blocks_per_seq


def decode_step_time(spec, gpu, batch, context_len, bytes_per_param, bytes_per_elem, tp=1):
    if batch < 1 or context_len < 1:
        raise ValueError("batch and context_len must be >= 1")
    params = _params_per_gpu(spec, tp)
    kv = kv_bytes_per_token(spec, bytes_per_elem, tp)
    bytes_read = params * bytes_per_param + batch * context_len * kv
    attn = 4 * spec.n_layers * (spec.n_heads // tp) * spec.head_dim * context_len
    flops = batch * (2 * params + attn)
    return max(bytes_read / gpu.hbm_bytes_per_s, flops / gpu.flops_per_s)


def prefill_time(spec, gpu, prompt_len, bytes_per_param, tp=1):
    if prompt_len < 1:
        raise ValueError("prompt_len must be >= 1")
    params = _params_per_gpu(spec, tp)
    attn = 4 * spec.n_layers * (spec.n_heads // tp) * spec.head_dim * prompt_len * (prompt_len + 1) / 2
    flops = prompt_len * 2 * params + attn
    return max(params * bytes_per_param / gpu.hbm_bytes_per_s, flops / gpu.flops_per_s)
