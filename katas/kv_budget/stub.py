"""The serving ledger: parameters, weight and KV-cache bytes per GPU, capacity, roofline.

Every quantity is per GPU; bytes are plain bytes (1 GB = 1e9). Plain Python arithmetic.

Level 1  param_count, weight_bytes, kv_bytes_per_token
Level 2  max_kv_tokens, max_concurrent_seqs
Level 3  decode_step_time, prefill_time

Worked example: Llama-3-8B (32 layers, d_model 4096, 32 heads, 8 KV heads, head_dim 128,
d_ff 14336, vocab 128256, untied, gated) has 8,030,261,248 parameters; in BF16 that is
16,060,522,496 bytes of weights and 2 * 32 * 8 * 128 * 2 = 131,072 bytes of KV per token.
On GPU(80e9, 3.35e12, 989e12) with a 10 % reserve: 426,784 KV tokens; 52 sequences of 8192.
A decode step at batch 1, context 8192 takes max(17,134,264,320 / 3.35e12,
20,355,489,792 / 989e12) = 5.115 ms: memory-bound.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, Llama-style.

    Embedding (vocab_size, d_model); per layer two RMSNorms (d_model each), q/k/v/o
    projections without bias (q: d_model -> n_heads*head_dim, k and v: d_model ->
    n_kv_heads*head_dim, o: n_heads*head_dim -> d_model), an MLP without bias (gated:
    gate, up d_model -> d_ff and down d_ff -> d_model; plain: up and down); a final RMSNorm;
    lm_head (d_model -> vocab_size) unless tied_embeddings.
    """

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
    """Bytes of weights on one GPU: (replicated + sharded / tp) * bytes_per_param.

    Tensor parallelism splits heads and d_ff: q, k, v, o and the MLP matrices are cut into
    tp shards; the embedding, lm_head and all RMSNorms are replicated on every GPU.

    Raises:
        ValueError: tp < 1, or tp does not divide n_heads, n_kv_heads and d_ff.
    """
    # TODO
    raise NotImplementedError


def kv_bytes_per_token(spec: ModelSpec, bytes_per_elem: float, tp: int = 1) -> float:
    """KV-cache bytes of one token on one GPU: 2 * n_layers * (n_kv_heads / tp) * head_dim
    * bytes_per_elem.

    Raises:
        ValueError: tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError


# ------------------------------------------------------------------------------ level 2


def max_kv_tokens(spec: ModelSpec, gpu: GPU, bytes_per_param: float, bytes_per_elem: float,
                  tp: int = 1, reserve_fraction: float = 0.1, block_size: int | None = None) -> int:
    """KV tokens that fit on one GPU: floor(free / kv_bytes_per_token) with
    free = hbm_bytes * (1 - reserve_fraction) - weight_bytes; with a block_size, whole blocks
    only: floor(free / (kv_bytes_per_token * block_size)) * block_size. An int.

    Raises:
        ValueError: the weights alone do not fit (free < 0); reserve_fraction outside [0, 1);
            block_size < 1; tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError


def max_concurrent_seqs(spec: ModelSpec, gpu: GPU, context_len: int, bytes_per_param: float,
                        bytes_per_elem: float, tp: int = 1, reserve_fraction: float = 0.1,
                        block_size: int | None = 16) -> int:
    """Sequences of context_len tokens whose KV caches fit at once: each holds
    ceil(context_len / block_size) whole blocks of the pool of max_kv_tokens(...,
    block_size); with block_size None, exactly context_len tokens. An int.

    Raises:
        ValueError: context_len < 1, and the errors of max_kv_tokens.
    """
    # TODO
    raise NotImplementedError


# ------------------------------------------------------------------------------ level 3


def decode_step_time(spec: ModelSpec, gpu: GPU, batch: int, context_len: int,
                     bytes_per_param: float, bytes_per_elem: float, tp: int = 1) -> float:
    """Seconds of one decode step: max(bytes / hbm_bytes_per_s, flops / flops_per_s) with
    bytes = weight_bytes + batch * context_len * kv_bytes_per_token and
    flops = batch * (2 * P + 4 * n_layers * (n_heads / tp) * head_dim * context_len),
    P = the parameters one GPU holds (replicated + sharded / tp).

    Raises:
        ValueError: batch < 1, context_len < 1; tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError


def prefill_time(spec: ModelSpec, gpu: GPU, prompt_len: int, bytes_per_param: float,
                 tp: int = 1) -> float:
    """Seconds of a prefill of one prompt: max(weight_bytes / hbm_bytes_per_s,
    flops / flops_per_s) with flops = prompt_len * 2 * P
    + 4 * n_layers * (n_heads / tp) * head_dim * prompt_len * (prompt_len + 1) / 2.

    Raises:
        ValueError: prompt_len < 1; tp as in weight_bytes.
    """
    # TODO
    raise NotImplementedError
