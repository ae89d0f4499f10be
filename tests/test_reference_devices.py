"""The references compute on their inputs' device, so they run on a GPU as they do on the CPU.

The first GPU run (scripts/gpu_check.sh on an H200) found rope's apply_rope mixing a CPU
frequency table with CUDA positions, and flash-attn's reference allocating its accumulators on
the CPU. Without a GPU, PyTorch's "meta" device stands in for any other device: a tensor made
without a device lands on the CPU, and an operation mixing it with a meta tensor raises just as
it does with a CUDA one. Calls whose input checks read values (`.item()`, `float()`) cannot run
on meta; they run in the CUDA test alone, which compares every call's result with the CPU's
(scripts/gpu_check.sh runs this file on a GPU).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest
import torch
from torch import nn

from reference import dpo, flash_attn, lora, mha, ppo, rope, sampling
from reference import quant
from reference import train_memory


def _inputs(device: str) -> Callable[..., torch.Tensor]:
    """Seeded standard-normal tensors drawn on the CPU, then moved: the same values anywhere."""
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)
    return randn


def _module(device: str, make: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)  # the same initial weights on every device
    return make().to(device)


def _lora(device: str) -> Any:
    def make() -> nn.Module:
        layer = lora.LoRALinear(nn.Linear(4, 3), r=2, alpha=4.0)
        nn.init.normal_(layer.lora_B)  # B starts at zero: make the adapter count (on the CPU)
        return layer
    return _module(device, make)(_inputs(device)(2, 4))


def _multi_lora(device: str) -> Any:
    randn = _inputs(device)
    layer = _module(device, lambda: lora.MultiLoRALinear(nn.Linear(4, 3), max_rank=2))
    layer.add_adapter("a", randn(2, 4), randn(3, 2), alpha=4.0)
    layer.add_adapter("b", randn(1, 4), randn(3, 1), alpha=1.0)
    return layer(randn(3, 4), torch.tensor([0, -1, 1], device=device))


def _mask(device: str) -> torch.Tensor:
    return torch.tensor([[True, True, False], [True, True, True]], device=device)


def _fp8_stream(device: str) -> Any:
    """Three delayed-scaling calls (the second saturates), FP8 values returned as float32."""
    randn, scaler = _inputs(device), quant.FP8Scaler(history_len=2)
    return [t.float() for x in (randn(2, 4), randn(2, 4) * 8, randn(2, 4).to(torch.bfloat16))
            for t in scaler.quantize(x)]


def _flash_decode(device: str) -> Any:
    randn = _inputs(device)
    table = torch.tensor([[3, 0, 5], [1, 4, 2]], dtype=torch.int32, device=device)
    seq_lens = torch.tensor([4, 6], dtype=torch.int32, device=device)
    return flash_attn.flash_decode(randn(2, 4, 8), randn(6, 2, 2, 8), randn(6, 2, 2, 8), table,
                                   seq_lens, num_splits=2)


def _beam_search(device: str) -> Any:
    table = torch.log_softmax(_inputs(device)(7, 5), dim=-1)  # log-probs by last token

    def step_fn(batch: torch.Tensor) -> torch.Tensor:
        return table[batch[:, -1].to(device)]
    return sampling.beam_search(step_fn, [1], num_beams=2, max_new_tokens=3, eos_token_id=0)


def _train_memory_batch(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor([[1, 5, 9, 2], [3, 3, 8, 0], [4, 6, 0, 0]], device=device)
    labels = torch.tensor([[5, 9, 2, -100], [3, 8, -100, -100], [6, -100, -100, -100]], device=device)
    return ids, labels


def _train_memory_logits(device: str) -> Any:
    """The checkpointed forward and its backward (the fine-tune without its .item() reads)."""
    model = train_memory.TinyLM(seed=0).to(device)
    ids, _ = _train_memory_batch(device)
    logits = train_memory._logits(model, ids, checkpoint=True)
    logits.sum().backward()
    return [logits, *(p.grad for p in model.parameters())]


def _train_memory_finetune(device: str) -> Any:
    model = train_memory.TinyLM(seed=0).to(device)
    losses = train_memory.finetune(model, [_train_memory_batch(device)], lr=1e-2, steps=2,
                                   micro_batch_size=2, checkpoint=True)
    return [torch.tensor(losses, dtype=torch.float64, device=device), *model.parameters()]


# Calls that run on any device, meta included: name -> call(device).
ANY_DEVICE: dict[str, Callable[[str], Any]] = {
    "mha.attention": lambda d: mha.attention(*(_inputs(d)(1, 2, 3, 4) for _ in range(3))),
    "mha.MultiHeadAttention": lambda d: _module(d, lambda: mha.MultiHeadAttention(8, 2))(
        _inputs(d)(1, 3, 8)),
    "rope.apply_rope": lambda d: rope.apply_rope(_inputs(d)(1, 2, 5, 8), torch.arange(5, device=d)),
    "rope.apply_rope (B, T) positions, partial": lambda d: rope.apply_rope(
        _inputs(d)(2, 5, 8), torch.arange(10, device=d).reshape(2, 5), rotary_dim=4),
    "rope.RotaryEmbedding, positions on the CPU": lambda d: rope.RotaryEmbedding(8)(
        _inputs(d)(1, 2, 5, 8), torch.arange(5)),
    "quant.quantize_int8, bf16": lambda d: quant.quantize_int8(_inputs(d)(4, 8, dtype=torch.bfloat16)),
    "quant.int8_linear": lambda d: quant.int8_linear(_inputs(d)(2, 8), *quant.quantize_int8(_inputs(d)(3, 8)),
                                                     _inputs(d)(3)),
    "quant.quantize_int4, dequantize_int4": lambda d: quant.dequantize_int4(
        *quant.quantize_int4(_inputs(d)(3, 16), 8), 8),
    "quant.fp8_matmul": lambda d: quant.fp8_matmul(
        (_inputs(d)(2, 4) * 100).to(torch.float8_e4m3fn), torch.tensor(100.0, device=d),
        (_inputs(d)(4, 3) * 50).to(torch.float8_e4m3fn), torch.tensor(50.0, device=d), torch.float32),
    "flash_attn.flash_attention": lambda d: flash_attn.flash_attention(
        *(_inputs(d)(1, h, t, 4) for h, t in ((4, 3), (2, 5), (2, 5))), causal=True,
        block_q=2, block_k=2),
    "flash_attn.split_ranges": lambda d: flash_attn.split_ranges(
        torch.tensor([0, 5], dtype=torch.int32, device=d), 3),
    "lora.LoRALinear": _lora,
    "ppo.ppo_policy_loss": lambda d: ppo.ppo_policy_loss(*(_inputs(d)(2, 3) for _ in range(3)),
                                                         _mask(d)),
    "ppo.compute_gae": lambda d: ppo.compute_gae(*(_inputs(d)(2, 3) for _ in range(2)), _mask(d),
                                                 0.9, 0.95),
    "dpo.dpo_loss": lambda d: dpo.dpo_loss(*(_inputs(d)(2) for _ in range(4))),
    "sampling.top_k_top_p_filter": lambda d: sampling.top_k_top_p_filter(_inputs(d)(2, 5),
                                                                         top_k=2, top_p=0.9),
    "train_memory checkpointed forward and backward": _train_memory_logits,
}

# Calls that read values of their inputs: a real device only.
REAL_DEVICE: dict[str, Callable[[str], Any]] = {
    "lora.MultiLoRALinear": _multi_lora,
    "quant.FP8Scaler": _fp8_stream,
    "rope.RotaryEmbedding": lambda d: rope.RotaryEmbedding(8)(_inputs(d)(1, 2, 5, 8),
                                                               torch.arange(5, device=d)),
    "ppo.masked_whiten": lambda d: ppo.masked_whiten(_inputs(d)(2, 3), _mask(d)),
    # more valid tokens than float16 can count (65,504): the count must not be cast to float16
    "ppo.masked_mean, 70,000 float16 tokens": lambda d: ppo.masked_mean(
        torch.full((2, 35_000), 0.5, dtype=torch.float16, device=d),
        torch.ones(2, 35_000, dtype=torch.bool, device=d)),
    "dpo.sequence_logprobs": lambda d: dpo.sequence_logprobs(
        _inputs(d)(2, 3, 5), torch.tensor([[1, 4, -100], [0, 2, 3]], device=d), _mask(d)),
    "flash_attn.flash_decode": _flash_decode,
    "sampling.beam_search": _beam_search,
    "train_memory.finetune": _train_memory_finetune,
}


def _tensors(result: Any) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for item in result for t in _tensors(item)]
    if isinstance(result, dict):
        return [t for item in result.values() for t in _tensors(item)]
    return []


@pytest.mark.parametrize("name", sorted(ANY_DEVICE))
def test_reference_computes_on_its_inputs_device(name):
    """No tensor the reference makes is left on the CPU when its inputs live elsewhere (meta)."""
    tensors = _tensors(ANY_DEVICE[name]("meta"))
    assert tensors, f"{name} returned no tensor"
    for tensor in tensors:
        assert tensor.device.type == "meta", f"{name} returned a tensor on {tensor.device}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu_check.sh)")
@pytest.mark.parametrize("name", sorted(ANY_DEVICE | REAL_DEVICE))
def test_reference_on_cuda_equals_the_cpu(name):
    """The same call on CUDA tensors gives the CPU's result, on CUDA (fp32, matmul without TF32)."""
    call = (ANY_DEVICE | REAL_DEVICE)[name]
    on_cpu, on_cuda = call("cpu"), call("cuda")
    if isinstance(on_cpu, list) and on_cpu and isinstance(on_cpu[0], tuple):  # beam search
        assert [tokens for tokens, _ in on_cuda] == [tokens for tokens, _ in on_cpu]
        assert all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5)
                   for (_, a), (_, b) in zip(on_cuda, on_cpu))
        return
    for got, expected in zip(_tensors(on_cuda), _tensors(on_cpu), strict=True):
        assert got.device.type == "cuda", f"{name} returned a tensor on {got.device}"
        torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
