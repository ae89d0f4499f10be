"""The serving ledger: parameters, weight and KV-cache bytes per GPU, capacity, roofline.

Every quantity is per GPU; bytes are plain bytes (1 GB = 1e9). Plain Python arithmetic.

Level 1  param_count, weight_bytes, kv_bytes_per_token
Level 2  max_kv_tokens, max_concurrent_seqs
Level 3  decode_step_time, prefill_time

Sanity check: Llama-3-8B (32 layers, d_model 4096, 32 heads, 8 KV heads, head_dim 128,
d_ff 14336, vocab 128256, untied, gated) comes out at about 8.03 billion parameters.
The rules are in `kata show kv-budget` (its clarifications; `kata ask` in a mock).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, Llama-style (Hugging Face's LlamaForCausalLM)."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int      # need not be d_model // n_heads
    d_ff: int
    vocab_size: int
    tied_embeddings: bool = False
    gated_mlp: bool = True


@dataclass(frozen=True)
class GPU:
    """HBM capacity in bytes, HBM bandwidth in bytes/s, dense FLOP/s for the dtype used."""

    hbm_bytes: float
    hbm_bytes_per_s: float
    flops_per_s: float


# ------------------------------------------------------------------------------ level 1


def param_count(spec: ModelSpec) -> int:
    """Parameters of the model, exactly as Hugging Face's LlamaForCausalLM counts them
    (a tied lm_head is the embedding, counted once)."""
    # TODO
    raise NotImplementedError


def weight_bytes(spec: ModelSpec, bytes_per_param: float, tp: int = 1) -> float:
    """Bytes of weights one GPU holds when the model is sharded tensor-parallel over tp
    GPUs, Megatron style.

    Raises:
        ValueError: tp < 1, or tp does not divide n_heads, n_kv_heads and d_ff.
    """
    # TODO
    raise NotImplementedError


def kv_bytes_per_token(spec: ModelSpec, bytes_per_elem: float, tp: int = 1) -> float:
    """KV-cache bytes one token of context takes on one GPU.

    Raises:
        ValueError: tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError


# ------------------------------------------------------------------------------ level 2


def max_kv_tokens(spec: ModelSpec, gpu: GPU, bytes_per_param: float, bytes_per_elem: float,
                  tp: int = 1, reserve_fraction: float = 0.1, block_size: int | None = None) -> int:
    """Tokens of KV cache that fit on one GPU next to the weights, with reserve_fraction of
    HBM kept in reserve; block_size None: an unpaged cache, else a cache paged in blocks of
    block_size tokens. An int.

    Raises:
        ValueError: the weights alone do not fit (free < 0); reserve_fraction outside [0, 1);
            block_size < 1; tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError


def max_concurrent_seqs(spec: ModelSpec, gpu: GPU, context_len: int, bytes_per_param: float,
                        bytes_per_elem: float, tp: int = 1, reserve_fraction: float = 0.1,
                        block_size: int | None = 16) -> int:
    """How many sequences of context_len tokens have their KV caches in HBM at once (the
    cache as in max_kv_tokens). An int.

    Raises:
        ValueError: context_len < 1, and the errors of max_kv_tokens.
    """
    # TODO
    raise NotImplementedError


# ------------------------------------------------------------------------------ level 3


def decode_step_time(spec: ModelSpec, gpu: GPU, batch: int, context_len: int,
                     bytes_per_param: float, bytes_per_elem: float, tp: int = 1) -> float:
    """Seconds of one decode step (one new token for each of batch sequences, each with
    context_len tokens in its KV cache), by a roofline: bound by memory bandwidth or by
    compute.

    Raises:
        ValueError: batch < 1, context_len < 1; tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError


def prefill_time(spec: ModelSpec, gpu: GPU, prompt_len: int, bytes_per_param: float,
                 tp: int = 1) -> float:
    """Seconds of the prefill of one prompt of prompt_len tokens, by the same roofline.

    Raises:
        ValueError: prompt_len < 1; tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError
