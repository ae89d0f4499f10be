"""The fixed workload of each kata for ``kata bench``."""

from __future__ import annotations

import math
import random
from types import ModuleType
from typing import Any, Callable

import torch

from grader.bench.timing import Case, _impl_cases, _kernel_case


def _randn(*shape: int, dtype: torch.dtype, device: str, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)


def _float_dtype(device: str) -> torch.dtype:
    return torch.float16 if device == "cuda" else torch.float32


# ----------------------------------------------------------------------------- mha


def _prefill_cases(impls, device: str, quick: bool) -> list[Case]:
    batch, heads, seq_len, head_dim = (1, 2, 32, 16) if quick else (4, 32, 2048, 128) if device == "cuda" \
        else (1, 8, 512, 64)
    dtype = _float_dtype(device)
    q, k, v = (_randn(batch, heads, seq_len, head_dim, dtype=dtype, device=device, seed=s) for s in range(3))
    workload = f"causal prefill B={batch} H={heads} T={seq_len} D={head_dim} {str(dtype)[6:]}"
    work = {"tflops": 4.0 * batch * heads * seq_len * seq_len * head_dim / 2}  # causal: half the scores
    cases = _impl_cases(workload, impls, lambda m: lambda: m.attention(q, k, v, is_causal=True), work)

    def kernel():
        from reference.kernels import flash_attention
        return lambda: flash_attention(q, k, v, causal=True)
    cases.append(_kernel_case(workload, device, kernel, work))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    cases.append(Case(workload, "torch builtin", lambda: sdpa(q, k, v, is_causal=True), work,
                      variant="scaled_dot_product_attention"))
    return cases


def _decode_cases(impls, device: str, quick: bool) -> list[Case]:
    """One new token per sequence over a cache of seq_len tokens: paged kernels vs contiguous attention."""
    batch, heads, kv_heads, head_dim, seq_len, block_size = (2, 2, 1, 16, 20, 4) if quick else \
        (16, 32, 8, 128, 4096, 16) if device == "cuda" else (4, 8, 2, 64, 512, 16)
    dtype = _float_dtype(device)
    groups = heads // kv_heads
    q = _randn(batch, heads, head_dim, dtype=dtype, device=device, seed=3)
    k = _randn(batch, kv_heads, seq_len, head_dim, dtype=dtype, device=device, seed=4)
    v = _randn(batch, kv_heads, seq_len, head_dim, dtype=dtype, device=device, seed=5)
    k_rep, v_rep = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)  # kata API: equal heads
    q4 = q[:, :, None, :]  # (B, H, 1, D)
    workload = f"decode B={batch} H={heads}/{kv_heads} T={seq_len} D={head_dim} {str(dtype)[6:]}"
    work = {"gbps": 2.0 * batch * kv_heads * seq_len * head_dim * k.element_size()}  # K and V read once
    cases = _impl_cases(workload, impls, lambda m: lambda: m.attention(q4, k_rep, v_rep), work)

    num_blocks_per_seq = math.ceil(seq_len / block_size)
    # the same K/V scattered into a shuffled pool of blocks: (NB, BS, H_kv, D)
    perm = torch.randperm(batch * num_blocks_per_seq, generator=torch.Generator().manual_seed(6))
    block_tables = perm.reshape(batch, num_blocks_per_seq).to(device=device, dtype=torch.int32)
    padded = num_blocks_per_seq * block_size

    def to_pool(x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.pad(x, (0, 0, 0, padded - seq_len))  # (B, H_kv, padded, D)
        blocks = x.reshape(batch, kv_heads, num_blocks_per_seq, block_size, head_dim).permute(0, 2, 3, 1, 4)
        pool = torch.empty(batch * num_blocks_per_seq, block_size, kv_heads, head_dim, dtype=dtype, device=device)
        pool[block_tables.reshape(-1).long()] = blocks.reshape(-1, block_size, kv_heads, head_dim)
        return pool
    k_cache, v_cache = to_pool(k), to_pool(v)
    seq_lens = torch.full((batch,), seq_len, dtype=torch.int32, device=device)

    def triton_kernel():
        from reference.kernels import paged_decode_attention
        return lambda: paged_decode_attention(q, k_cache, v_cache, block_tables, seq_lens)

    def cuda_kernel():
        from reference.kernels.cuda import paged_decode_attention_cuda
        return lambda: paged_decode_attention_cuda(q, k_cache, v_cache, block_tables, seq_lens)
    cases.append(_kernel_case(workload, device, triton_kernel, work))
    cases.append(_kernel_case(workload, device, cuda_kernel, work, variant="cuda c++"))
    cases.append(Case(workload, "torch builtin", _sdpa_gqa(q4, k, v, k_rep, v_rep), work,
                      variant="scaled_dot_product_attention (contiguous K/V)"))
    return cases


def _sdpa_gqa(q, k, v, k_rep, v_rep, is_causal: bool = False) -> Callable[[], Any]:
    sdpa = torch.nn.functional.scaled_dot_product_attention
    try:
        sdpa(q, k, v, is_causal=is_causal, enable_gqa=True)  # torch >= 2.5 reads the H_kv heads without copying
        return lambda: sdpa(q, k, v, is_causal=is_causal, enable_gqa=True)
    except (TypeError, RuntimeError):
        return lambda: sdpa(q, k_rep, v_rep, is_causal=is_causal)


# ----------------------------------------------------------------------------- rope, lora


def _rope_cases(impls, device: str, quick: bool) -> list[Case]:
    batch, heads, seq_len, head_dim = (1, 2, 8, 16) if quick else (4, 32, 2048, 128) if device == "cuda" \
        else (1, 8, 512, 64)
    dtype = _float_dtype(device)
    x = _randn(batch, heads, seq_len, head_dim, dtype=dtype, device=device)
    positions = torch.arange(seq_len, device=device)
    workload = f"apply_rope B={batch} H={heads} T={seq_len} D={head_dim} {str(dtype)[6:]}"
    work = {"gbps": 2.0 * x.numel() * x.element_size()}  # read x, write the result
    cases = _impl_cases(workload, impls, lambda m: lambda: m.apply_rope(x, positions), work)

    def kernel():
        from reference.kernels import rope
        return lambda: rope(x, positions)
    cases.append(_kernel_case(workload, device, kernel, work))
    return cases


def _lora_cases(impls, device: str, quick: bool) -> list[Case]:
    num_rows, in_features, out_features, max_rank = (8, 32, 32, 8) if quick else \
        (512, 4096, 4096, 16) if device == "cuda" else (256, 512, 512, 16)
    dtype = _float_dtype(device)
    ranks, alpha = [max_rank // 4 or 1, max_rank // 2 or 1, max_rank, max_rank], 16.0
    base_weight = _randn(out_features, in_features, dtype=dtype, device=device) / math.sqrt(in_features)
    adapters = [(_randn(r, in_features, dtype=dtype, device=device, seed=10 + i) / math.sqrt(in_features),
                 _randn(out_features, r, dtype=dtype, device=device, seed=20 + i)) for i, r in enumerate(ranks)]
    x = _randn(num_rows, in_features, dtype=dtype, device=device, seed=1)
    ids = torch.randint(-1, len(ranks), (num_rows,), generator=torch.Generator().manual_seed(2)).to(device)
    workload = f"MultiLoRALinear N={num_rows} {in_features}->{out_features} {len(ranks)} adapters r<={max_rank}"
    flops = 2.0 * num_rows * in_features * out_features + 4.0 * num_rows * max_rank * (in_features + out_features)
    work = {"tflops": flops}

    def make_layer(module):
        base = torch.nn.Linear(in_features, out_features, bias=False, device=device, dtype=dtype)
        with torch.no_grad():
            base.weight.copy_(base_weight)
        layer = module.MultiLoRALinear(base, max_rank)
        slots = [layer.add_adapter(f"tenant{i}", a, b, alpha) for i, (a, b) in enumerate(adapters)]
        slot_ids = torch.tensor([-1] + slots, device=device)[ids + 1]  # adapter index -> the slot it got
        return lambda: layer(x, slot_ids)
    cases = _impl_cases(workload, impls, make_layer, work)

    def kernel():
        from reference.kernels import multi_lora_delta
        lora_a = torch.zeros(len(ranks), max_rank, in_features, dtype=dtype, device=device)
        lora_b = torch.zeros(len(ranks), out_features, max_rank, dtype=dtype, device=device)
        for slot, (a, b) in enumerate(adapters):
            lora_a[slot, : a.shape[0]], lora_b[slot, :, : a.shape[0]] = a, b
        scaling = torch.tensor([alpha / r for r in ranks], device=device)
        return lambda: x @ base_weight.T + multi_lora_delta(x, lora_a, lora_b, scaling, ids).to(dtype)
    cases.append(_kernel_case(workload, device, kernel, work))
    return cases


# ----------------------------------------------------------------------------- quant


def _quant_cases(impls, device: str, quick: bool) -> list[Case]:
    """A decode-shaped INT8 linear (weights read once for a few tokens), INT4 quantization of a
    weight, and an FP8 GEMM; torch's own bf16 matmul and torch._scaled_mm (FP8 GPUs) beside them."""
    tokens, in_features, out_features = (4, 64, 32) if quick else (16, 4096, 4096) if device == "cuda" \
        else (8, 1024, 1024)
    dtype = torch.bfloat16
    w = _randn(out_features, in_features, dtype=dtype, device=device, seed=0) * 0.02
    x = _randn(tokens, in_features, dtype=dtype, device=device, seed=1)
    linear = f"int8_linear {tokens} tokens {in_features}->{out_features} bf16"

    def make_linear(module):
        q, scale = module.quantize_int8(w)
        return lambda: module.int8_linear(x, q, scale)
    cases = _impl_cases(linear, impls, make_linear, {"gbps": float(w.numel())})  # int8 weights read once
    cases.append(Case(linear, "torch builtin", lambda: x @ w.T, {"gbps": 2.0 * w.numel()}, variant="bf16 matmul"))

    group_size = min(128, in_features)
    group = f"quantize_int4 {out_features}x{in_features} group_size {group_size}"
    cases += _impl_cases(group, impls, lambda m: lambda: m.quantize_int4(w, group_size), {"gbps": 2.0 * w.numel()})

    a = (_randn(tokens, in_features, dtype=torch.float32, device=device, seed=2) * 100).to(torch.float8_e4m3fn)
    b = (_randn(in_features, out_features, dtype=torch.float32, device=device, seed=3) * 100).to(torch.float8_e4m3fn)
    a_scale, b_scale = torch.tensor(100.0, device=device), torch.tensor(100.0, device=device)
    gemm = f"fp8_matmul {tokens}x{in_features}x{out_features} -> bf16"
    gemm_work = {"tflops": 2.0 * tokens * in_features * out_features}
    cases += _impl_cases(gemm, impls, lambda m: lambda: m.fp8_matmul(a, a_scale, b, b_scale), gemm_work)
    if device == "cuda" and torch.cuda.get_device_capability() >= (8, 9):
        b_col = b.t().contiguous().t()  # cuBLASLt wants b column-major
        inv_a, inv_b = 1 / a_scale, 1 / b_scale
        cases.append(Case(gemm, "torch builtin", lambda: torch._scaled_mm(
            a, b_col, scale_a=inv_a, scale_b=inv_b, out_dtype=torch.bfloat16), gemm_work, variant="_scaled_mm"))
    return cases


# ----------------------------------------------------------------------------- tensor-lib


def _tensor_lib_cases(impls, device: str, quick: bool) -> list[Case]:
    """A pure-Python library: a small MLP-shaped forward and backward (matmul, broadcast add,
    exp, sum) and a chain of views read back with tolist; torch float64 on the CPU beside them
    (the device does not apply: the library has none)."""
    n = 8 if quick else 32
    rng = random.Random(0)
    x_data = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(n)]
    w_data = [[rng.uniform(-1, 1) / n for _ in range(n)] for _ in range(n)]
    b_data = [rng.uniform(-1, 1) for _ in range(n)]
    train = f"matmul + broadcast add + exp + sum, forward and backward, {n}x{n} float64"
    work = {"tflops": 2.0 * 3 * n * n * n}  # the forward matmul and its two gradients

    def make_train(module):
        def run():
            x = module.Tensor(x_data)
            w, b = module.Tensor(w_data, requires_grad=True), module.Tensor(b_data, requires_grad=True)
            x.matmul(w).add(b).exp().sum().backward()
            return w.grad
        return run
    cases = _impl_cases(train, impls, make_train, work)

    def torch_train():
        with torch.enable_grad():  # the bench times under no_grad
            x = torch.tensor(x_data, dtype=torch.float64)
            w = torch.tensor(w_data, dtype=torch.float64, requires_grad=True)
            b = torch.tensor(b_data, dtype=torch.float64, requires_grad=True)
            x.matmul(w).add(b).exp().sum().backward()
            return w.grad
    cases.append(Case(train, "torch builtin", torch_train, work, variant="torch float64, CPU"))

    views = f"transpose, slice, reshape (a copy), tolist of a {n}x{n} tensor"

    def make_views(module):
        t = module.Tensor(x_data)
        return lambda: t.transpose(0, 1)[1:, ::2].reshape(-1).tolist()
    cases += _impl_cases(views, impls, make_views, {"gbps": 8.0 * n * n})
    return cases


# ----------------------------------------------------------------------------- traces


def _paged_kv_trace(module: ModuleType, num_blocks: int, num_ops: int) -> int:
    """New requests, decode appends, forks and frees in a fixed random mix; returns the calls made."""
    allocator = module.PagedKVCacheAllocator(num_blocks, 16)
    rng = random.Random(0)
    live: list[str] = []
    calls = next_id = 0
    while calls < num_ops:
        roll = rng.random()
        if not live or roll < 0.15:
            request_id, next_id = f"r{next_id}", next_id + 1
            calls += 1
            if allocator.allocate(request_id, rng.randint(1, 512)):
                live.append(request_id)
            elif live:
                allocator.free(live.pop(0))  # out of blocks: the oldest request finishes
                calls += 1
        elif roll < 0.85:
            request_id = live[rng.randrange(len(live))]
            calls += 1
            if not allocator.allocate(request_id, 1):
                allocator.free(request_id)
                live.remove(request_id)
                calls += 1
        elif roll < 0.92:
            child_id, next_id = f"r{next_id}", next_id + 1
            allocator.fork(live[rng.randrange(len(live))], child_id)
            live.append(child_id)
            calls += 1
        else:
            allocator.free(live.pop(rng.randrange(len(live))))
            calls += 1
        if calls % 64 == 0:
            allocator.pop_copies()
    return calls


def _paged_kv_cases(impls, device: str, quick: bool) -> list[Case]:
    num_blocks, num_ops = (64, 300) if quick else (4096, 20000)
    workload = f"trace: {num_ops} allocate/append/fork/free calls, {num_blocks} blocks of 16"
    return _impl_cases(workload, impls, lambda m: lambda: _paged_kv_trace(m, num_blocks, num_ops),
                       {"ops_per_s": None})


def _scheduler_trace(module: ModuleType, num_requests: int, arrivals_per_step: int) -> int:
    """Requests arrive a few per step while the scheduler runs until all finish; returns steps."""
    rng = random.Random(0)
    requests = [module.Request(f"q{i}", prompt_len=rng.randint(1, 1024), max_new_tokens=rng.randint(1, 64),
                               priority=rng.randint(0, 2), arrival_time=float(i)) for i in range(num_requests)]
    scheduler = module.Scheduler(max_num_batched_tokens=512, max_num_seqs=64, num_blocks=2048, block_size=16)
    steps, pending = 0, list(reversed(requests))
    while pending or scheduler.has_unfinished():
        for _ in range(min(arrivals_per_step, len(pending))):
            scheduler.add_request(pending.pop())
        scheduler.step()
        steps += 1
        if steps > 100 * num_requests + 10_000:
            raise RuntimeError(f"requests still unfinished after {steps} steps")
    return steps


def _scheduler_cases(impls, device: str, quick: bool) -> list[Case]:
    num_requests = 20 if quick else 1000
    workload = f"trace: {num_requests} requests, 2 arrive per step, budget 512 tokens, 64 seqs, 2048 blocks"
    return _impl_cases(workload, impls, lambda m: lambda: _scheduler_trace(m, num_requests, 2),
                       {"steps_per_s": None})


# ----------------------------------------------------------------------------- sampling, ppo


def _sampling_cases(impls, device: str, quick: bool) -> list[Case]:
    batch, vocab = (4, 100) if quick else (64, 128_256) if device == "cuda" else (32, 32_000)
    logits = _randn(batch, vocab, dtype=torch.float32, device=device) * 3
    filter_workload = f"top_k_top_p_filter B={batch} V={vocab} k=50 p=0.9"
    cases = _impl_cases(filter_workload, impls, lambda m: lambda: m.top_k_top_p_filter(logits, 50, 0.9),
                        {"ops_per_s": float(batch)})

    def make_sample(module):
        gen = torch.Generator(device=device).manual_seed(0)
        return lambda: module.sample(logits, temperature=0.8, top_k=50, top_p=0.9, generator=gen)
    sample_workload = f"sample B={batch} V={vocab} T=0.8 k=50 p=0.9"
    return cases + _impl_cases(sample_workload, impls, make_sample, {"ops_per_s": float(batch)})


def _ppo_cases(impls, device: str, quick: bool) -> list[Case]:
    batch, seq_len = (2, 8) if quick else (32, 512)
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, seq_len + 1, (batch,), generator=gen)
    mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).to(device)  # right-padded
    logprobs, old_logprobs, values, old_values, rewards = (
        (torch.randn(batch, seq_len, generator=gen) * 0.1 - 1).to(device) for _ in range(5))
    workload = f"ppo_loss B={batch} T={seq_len} (GAE, whitening, both losses)"
    return _impl_cases(workload, impls, lambda m: lambda: m.ppo_loss(
        logprobs, old_logprobs, values, old_values, rewards, mask), {"ops_per_s": float(mask.sum())})


# ----------------------------------------------------------------------------- flash-attn


def _flash_prefill_cases(impls, device: str, quick: bool) -> list[Case]:
    """Causal prefill with GQA: your tiled flash_attention vs the reference's, SDPA, and the Triton
    FlashAttention kernel (the fast reference) on a GPU."""
    batch, heads, kv_heads, seq_len, head_dim = (1, 4, 2, 64, 16) if quick else \
        (2, 32, 8, 4096, 128) if device == "cuda" else (1, 8, 2, 1024, 64)
    block = 16 if quick else 128 if device == "cuda" else 64
    dtype = _float_dtype(device)
    q = _randn(batch, heads, seq_len, head_dim, dtype=dtype, device=device, seed=0)
    k, v = (_randn(batch, kv_heads, seq_len, head_dim, dtype=dtype, device=device, seed=s) for s in (1, 2))
    workload = (f"causal flash_attention B={batch} H={heads}/{kv_heads} T={seq_len} D={head_dim} "
                f"tiles {block}x{block} {str(dtype)[6:]}")
    work = {"tflops": 4.0 * batch * heads * seq_len * seq_len * head_dim / 2}  # causal: half the scores
    cases = _impl_cases(workload, impls, lambda m: lambda: m.flash_attention(
        q, k, v, causal=True, block_q=block, block_k=block), work)

    def kernel():
        from reference.kernels import flash_attention
        return lambda: flash_attention(q, k, v, causal=True)
    cases.append(_kernel_case(workload, device, kernel, work))
    k_rep, v_rep = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
    cases.append(Case(workload, "torch builtin", _sdpa_gqa(q, k, v, k_rep, v_rep, is_causal=True), work,
                      variant="scaled_dot_product_attention"))
    return cases


def _flash_decode_cases(impls, device: str, quick: bool) -> list[Case]:
    """Split-K decode over a paged cache: your flash_decode vs the reference's and the Triton paged
    decode kernel on a GPU."""
    batch, heads, kv_heads, head_dim, seq_len, block_size, splits = (2, 4, 2, 16, 40, 8, 2) if quick else \
        (16, 32, 8, 128, 8192, 16, 8) if device == "cuda" else (4, 8, 2, 64, 2048, 16, 4)
    dtype = _float_dtype(device)
    blocks_per_seq = math.ceil(seq_len / block_size)
    gen = torch.Generator().manual_seed(7)
    table = torch.randperm(batch * blocks_per_seq, generator=gen).reshape(batch, blocks_per_seq)
    table = table.to(device=device, dtype=torch.int32)
    k_cache, v_cache = (_randn(batch * blocks_per_seq, block_size, kv_heads, head_dim, dtype=dtype, device=device,
                               seed=s) for s in (8, 9))
    seq_lens = torch.full((batch,), seq_len, dtype=torch.int32, device=device)
    q = _randn(batch, heads, head_dim, dtype=dtype, device=device, seed=10)
    workload = (f"flash_decode B={batch} H={heads}/{kv_heads} T={seq_len} D={head_dim} BS={block_size} "
                f"splits={splits} {str(dtype)[6:]}")
    work = {"gbps": 2.0 * batch * kv_heads * seq_len * head_dim * k_cache.element_size()}  # K and V read once
    cases = _impl_cases(workload, impls, lambda m: lambda: m.flash_decode(
        q, k_cache, v_cache, table, seq_lens, num_splits=splits), work)

    def kernel():
        from reference.kernels import paged_decode_attention
        return lambda: paged_decode_attention(q, k_cache, v_cache, table, seq_lens)
    cases.append(_kernel_case(workload, device, kernel, work))
    return cases


# ----------------------------------------------------------------------------- train-memory


def _train_memory_cases(impls, device: str, quick: bool) -> list[Case]:
    """Two AdamW steps of a TinyLM with micro-batches and checkpointing, against finetune_leaky
    (the whole batch at once, no checkpointing). The solution imports the kata's support file,
    which importing the reference registers (grader.bench loads the solution first, so this
    module does it when it is imported)."""
    from train_memory_model import TinyLM, finetune_leaky

    d_model, layers, batch, seq_len = (16, 2, 4, 8) if quick else (128, 4, 16, 128)
    model = TinyLM(vocab_size=256, d_model=d_model, num_heads=4, num_layers=layers, max_seq_len=seq_len,
                   seed=0).to(device)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 256, (batch, seq_len), generator=gen)
    labels = torch.cat([ids[:, 1:], torch.full((batch, 1), -100)], dim=1)
    batches = [(ids.to(device), labels.to(device))]
    steps, micro = 2, max(batch // 4, 1)
    workload = f"finetune 2 steps, TinyLM C={d_model} L={layers}, B={batch} T={seq_len}, micro-batch {micro}, checkpoint"
    work = {"steps_per_s": float(steps)}
    def with_grad(fn: Callable[..., Any], **options: Any) -> Callable[[], Any]:
        def run() -> Any:
            with torch.enable_grad():  # the bench times under no_grad
                return fn(model, batches, lr=1e-3, steps=steps, **options)
        return run

    cases = _impl_cases(workload, impls, lambda m: with_grad(m.finetune, micro_batch_size=micro, checkpoint=True),
                        work)
    cases.append(Case(workload, "torch builtin", with_grad(finetune_leaky), work,
                      variant="finetune_leaky (whole batch, no checkpointing)"))
    return cases


try:  # registers train_memory_model, which a train-memory solution imports
    import reference.train_memory  # noqa: F401  (imported for its side effect)
except ImportError:  # a wheel without references: the bench says so for the reference row
    pass


# ----------------------------------------------------------------------------- entry point

_CASES: dict[str, list[Callable[..., list[Case]]]] = {
    "mha": [_prefill_cases, _decode_cases],
    "flash-attn": [_flash_prefill_cases, _flash_decode_cases],
    "rope": [_rope_cases],
    "quant": [_quant_cases],
    "lora": [_lora_cases],
    "paged-kv": [_paged_kv_cases],
    "scheduler": [_scheduler_cases],
    "sampling": [_sampling_cases],
    "ppo": [_ppo_cases],
    "train-memory": [_train_memory_cases],
    "tensor-lib": [_tensor_lib_cases],
}
