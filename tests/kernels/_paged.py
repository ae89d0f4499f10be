"""The paged-cache oracle and input builders shared by the Triton and CUDA C++ decode tests."""

from __future__ import annotations

import torch

from tests.kernels._support import randn, seeded


def paged_oracle(q, k_cache, v_cache, block_tables, seq_lens, scale=None) -> torch.Tensor:
    """Gather each sequence's K/V through its table into contiguous rows, then plain attention (float64)."""
    batch, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    scale = head_dim**-0.5 if scale is None else scale
    out = torch.zeros(batch, num_heads, head_dim, dtype=torch.float64, device=q.device)
    for seq_id in range(batch):
        seq_len = int(seq_lens[seq_id])
        if seq_len == 0:
            continue
        token_ids = torch.arange(seq_len, device=q.device)
        block_ids = block_tables[seq_id, token_ids // block_size].long()
        keys = k_cache[block_ids, token_ids % block_size].double()  # (T, H_kv, D)
        values = v_cache[block_ids, token_ids % block_size].double()
        keys = keys.repeat_interleave(num_heads // num_kv_heads, dim=1).transpose(0, 1)  # (H, T, D)
        values = values.repeat_interleave(num_heads // num_kv_heads, dim=1).transpose(0, 1)
        scores = (keys @ q[seq_id].double()[:, :, None])[..., 0] * scale  # (H, T)
        out[seq_id] = (torch.softmax(scores, dim=-1)[:, None, :] @ values)[:, 0]
    return out


def make_paged_inputs(case: dict, dtype: torch.dtype, device: str):
    """A pool of blocks handed out in a shuffled order, so logical and physical order differ."""
    gen = seeded(case["seed"])
    batch, max_blocks = case["batch"], case["max_blocks"]
    num_blocks = batch * max_blocks + case["num_spare_blocks"]
    shape = (num_blocks, case["block_size"], case["num_kv_heads"], case["head_dim"])
    k_cache = randn(gen, *shape, dtype=dtype, device=device)
    v_cache = randn(gen, *shape, dtype=dtype, device=device)
    physical = torch.randperm(num_blocks, generator=gen)[: batch * max_blocks]
    block_tables = physical.reshape(batch, max_blocks).to(device=device, dtype=torch.int32)
    seq_lens = torch.tensor(case["seq_lens"], dtype=torch.int32, device=device)
    q = randn(gen, batch, case["num_kv_heads"] * case["groups"], case["head_dim"], dtype=dtype, device=device)
    return q, k_cache, v_cache, block_tables, seq_lens


def gpu_case(dtype: torch.dtype):
    """Llama-like decode on the GPU: 32 query heads on 8 KV heads, D=128, block 16, <= 2048 tokens."""
    gen = seeded(7)
    batch, num_heads, num_kv_heads, head_dim, block_size, max_blocks = 8, 32, 8, 128, 16, 128
    num_blocks = batch * max_blocks
    k_cache = randn(gen, num_blocks, block_size, num_kv_heads, head_dim, dtype=dtype, device="cuda")
    v_cache = randn(gen, num_blocks, block_size, num_kv_heads, head_dim, dtype=dtype, device="cuda")
    block_tables = torch.randperm(num_blocks, generator=gen).reshape(batch, max_blocks).int().cuda()
    seq_lens = torch.randint(0, max_blocks * block_size + 1, (batch,), generator=gen).int().cuda()
    q = randn(gen, batch, num_heads, head_dim, dtype=dtype, device="cuda")
    return q, k_cache, v_cache, block_tables, seq_lens
