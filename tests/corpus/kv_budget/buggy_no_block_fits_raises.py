"""max_kv_tokens raises ValueError (vLLM's 'no memory for cache blocks') when 0 whole blocks fit, where the answer is 0."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, Llama-style (see the module docstring)."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int      # need not be d_model // n_heads
    d_ff: int
    vocab_size: int
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU: gate, up and down matrices; plain: up and down


@dataclass(frozen=True)
class GPU:
    hbm_bytes: float
    hbm_bytes_per_s: float
    flops_per_s: float  # dense, for the dtype used


# Published configurations (Hugging Face config.json) and data-sheet numbers, dense BF16.
LLAMA3_8B = ModelSpec(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128,
                      d_ff=14336, vocab_size=128256)
LLAMA3_70B = ModelSpec(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, head_dim=128,
                       d_ff=28672, vocab_size=128256)
H100_SXM = GPU(hbm_bytes=80e9, hbm_bytes_per_s=3.35e12, flops_per_s=989e12)
H200 = GPU(hbm_bytes=141e9, hbm_bytes_per_s=4.8e12, flops_per_s=989e12)


def _check_tp(spec: ModelSpec, tp: int) -> None:
    if tp < 1 or spec.n_heads % tp or spec.n_kv_heads % tp or spec.d_ff % tp:
        raise ValueError(f"tp={tp} must be >= 1 and divide n_heads={spec.n_heads}, "
                         f"n_kv_heads={spec.n_kv_heads} and d_ff={spec.d_ff}")


def _sharded_params(spec: ModelSpec) -> int:
    """Parameters that tensor parallelism splits: attention projections and MLP, all layers."""
    d, hd = spec.d_model, spec.head_dim
    attention = d * spec.n_heads * hd + 2 * d * spec.n_kv_heads * hd + spec.n_heads * hd * d
    mlp = (3 if spec.gated_mlp else 2) * d * spec.d_ff
    return spec.n_layers * (attention + mlp)


def _replicated_params(spec: ModelSpec) -> int:
    """Parameters every GPU holds whole: embedding, lm_head (unless tied), the norms."""
    embeddings = spec.vocab_size * spec.d_model * (1 if spec.tied_embeddings else 2)
    norms = (2 * spec.n_layers + 1) * spec.d_model
    return embeddings + norms


def _params_per_gpu(spec: ModelSpec, tp: int) -> int:
    _check_tp(spec, tp)
    return _replicated_params(spec) + _sharded_params(spec) // tp  # tp divides every shard


# ------------------------------------------------------------------------------ level 1


def param_count(spec: ModelSpec) -> int:
    """Parameters of the model, as Hugging Face's LlamaForCausalLM counts them."""
    return _replicated_params(spec) + _sharded_params(spec)


def weight_bytes(spec: ModelSpec, bytes_per_param: float, tp: int = 1) -> float:
    """Bytes of weights on each GPU under tensor parallelism of degree tp."""
    return _params_per_gpu(spec, tp) * bytes_per_param


def kv_bytes_per_token(spec: ModelSpec, bytes_per_elem: float, tp: int = 1) -> float:
    """KV-cache bytes one token takes on each GPU: K and V, every layer, the GPU's KV heads."""
    _check_tp(spec, tp)
    return 2 * spec.n_layers * (spec.n_kv_heads // tp) * spec.head_dim * bytes_per_elem


# ------------------------------------------------------------------------------ level 2


def _free_kv_bytes(spec: ModelSpec, gpu: GPU, bytes_per_param: float, tp: int,
                   reserve_fraction: float) -> float:
    """HBM left for the KV cache on each GPU after the reserve and the weights."""
    if not 0 <= reserve_fraction < 1:
        raise ValueError(f"reserve_fraction must be in [0, 1); got {reserve_fraction}")
    usable = gpu.hbm_bytes * (1 - reserve_fraction)
    weights = weight_bytes(spec, bytes_per_param, tp)
    if weights > usable:
        raise ValueError(f"the weights ({weights:.4g} bytes per GPU) do not fit in "
                         f"{usable:.4g} usable bytes (HBM minus the reserve)")
    return usable - weights


def max_kv_tokens(spec: ModelSpec, gpu: GPU, bytes_per_param: float, bytes_per_elem: float,
                  tp: int = 1, reserve_fraction: float = 0.1, block_size: int | None = None) -> int:
    """Tokens of KV cache that fit on each GPU; with a block_size, whole blocks only."""
    if block_size is not None and block_size < 1:
        raise ValueError(f"block_size must be >= 1; got {block_size}")
    free = _free_kv_bytes(spec, gpu, bytes_per_param, tp, reserve_fraction)
    per_token = kv_bytes_per_token(spec, bytes_per_elem, tp)
    if block_size is None:
        return math.floor(free / per_token)
    blocks = math.floor(free / (per_token * block_size))
    if blocks < 1:
        raise ValueError("no room for even one KV block")
    return blocks * block_size


def max_concurrent_seqs(spec: ModelSpec, gpu: GPU, context_len: int, bytes_per_param: float,
                        bytes_per_elem: float, tp: int = 1, reserve_fraction: float = 0.1,
                        block_size: int | None = 16) -> int:
    """Sequences of context_len tokens whose KV caches fit at once; each sequence holds
    ceil(context_len / block_size) whole blocks (exactly context_len tokens when block_size
    is None)."""
    if context_len < 1:
        raise ValueError(f"context_len must be >= 1; got {context_len}")
    tokens = max_kv_tokens(spec, gpu, bytes_per_param, bytes_per_elem, tp, reserve_fraction, block_size)
    if block_size is None:
        return tokens // context_len
    blocks_per_seq = -(-context_len // block_size)
    return (tokens // block_size) // blocks_per_seq


# ------------------------------------------------------------------------------ level 3


def _attention_flops_per_key(spec: ModelSpec, tp: int) -> int:
    """q·k and p·v for one query token against one key, every layer, the GPU's heads."""
    return 4 * spec.n_layers * (spec.n_heads // tp) * spec.head_dim


def decode_step_time(spec: ModelSpec, gpu: GPU, batch: int, context_len: int,
                     bytes_per_param: float, bytes_per_elem: float, tp: int = 1) -> float:
    """Seconds of one decode step (one new token for each of `batch` sequences that attend
    context_len cached tokens each): max(bytes / bandwidth, FLOPs / peak)."""
    if batch < 1 or context_len < 1:
        raise ValueError(f"batch and context_len must be >= 1; got {batch} and {context_len}")
    params = _params_per_gpu(spec, tp)
    bytes_read = params * bytes_per_param + batch * context_len * kv_bytes_per_token(spec, bytes_per_elem, tp)
    flops = batch * (2 * params + _attention_flops_per_key(spec, tp) * context_len)
    return max(bytes_read / gpu.hbm_bytes_per_s, flops / gpu.flops_per_s)


def prefill_time(spec: ModelSpec, gpu: GPU, prompt_len: int, bytes_per_param: float,
                 tp: int = 1) -> float:
    """Seconds of a prefill of one prompt: the weights read once; 2 FLOPs per parameter per
    token, and causal attention (token i, from 1, attends i keys)."""
    if prompt_len < 1:
        raise ValueError(f"prompt_len must be >= 1; got {prompt_len}")
    params = _params_per_gpu(spec, tp)
    attended_keys = prompt_len * (prompt_len + 1) // 2
    flops = prompt_len * 2 * params + _attention_flops_per_key(spec, tp) * attended_keys
    return max(params * bytes_per_param / gpu.hbm_bytes_per_s, flops / gpu.flops_per_s)
