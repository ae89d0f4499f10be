"""BGMV (batched gather matrix-vector) shrink and expand for a multi-adapter LoRA layer, in Triton.

A multi-tenant server keeps one frozen base layer and many LoRA adapters, stacked and padded to
a common max_rank, and serves a batch where every row may use a different adapter (Punica,
S-LoRA). The LoRA path of row n with adapter a = slot_ids[n] is two skinny products:

    shrink:  h[n] = A[a] @ x[n]                      (max_rank,)   A (S, max_rank, in)
    expand:  y[n] += scaling[a] * (B[a] @ h[n])      (out,)        B (S, out, max_rank)

Each program gathers its row's adapter by slot id, so one launch serves any mix of adapters;
slot -1 means "base only": the row's h is 0 and its y is left untouched. A lower-rank adapter's
padded rows of A and columns of B should be zero; passing ``ranks`` makes the kernels ignore the
padding whatever it holds. These are matrix-vector products (one row, rank <= 64), so the
kernels reduce with elementwise products and sums instead of tensor-core tiles.

Legend: N rows (tokens), S adapter slots, R max_rank, in / out the base layer's features.

References: Chen et al., "Punica: Multi-Tenant LoRA Serving" (2023); Sheng et al., "S-LoRA:
Serving Thousands of Concurrent LoRA Adapters" (2023); vLLM ``lora/ops/triton_ops``.
"""

from __future__ import annotations

import torch

from reference.kernels._triton import next_pow2, require_device, tl, triton

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _bgmv_shrink(
    x_ptr, lora_a_ptr, slot_ids_ptr, ranks_ptr, h_ptr,
    in_features, max_rank,
    stride_xn, stride_xk,
    stride_as, stride_ar, stride_ak,
    stride_hn, stride_hr,
    BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr,
):
    row_id = tl.program_id(0)
    slot_id = tl.load(slot_ids_ptr + row_id)
    has_adapter = slot_id >= 0
    slot_id = tl.maximum(slot_id, 0)  # a valid address for masked-off loads
    # slot -1 reads as rank 0: every load below is masked off (a comparison, not `& has_adapter`,
    # because the interpreter mishandles bool block & bool scalar)
    rank = tl.where(has_adapter, tl.load(ranks_ptr + slot_id), 0)

    r_offs = tl.arange(0, BLOCK_R)
    r_in = r_offs < rank
    acc = tl.zeros([BLOCK_R], tl.float32)
    a_base = lora_a_ptr + slot_id.to(tl.int64) * stride_as
    for k_start in range(0, in_features, BLOCK_K):
        k_offs = k_start + tl.arange(0, BLOCK_K)
        k_in = k_offs < in_features
        x = tl.load(x_ptr + row_id * stride_xn + k_offs * stride_xk, mask=k_in, other=0.0).to(tl.float32)
        a = tl.load(a_base + r_offs[:, None] * stride_ar + k_offs[None, :] * stride_ak,
                    mask=r_in[:, None] & k_in[None, :], other=0.0).to(tl.float32)  # (BLOCK_R, BLOCK_K)
        acc += tl.sum(a * x[None, :], 1)
    # rows without an adapter, and rank padding, hold exact zeros
    tl.store(h_ptr + row_id * stride_hn + r_offs * stride_hr, acc, mask=r_offs < max_rank)


@triton.jit
def _bgmv_expand(
    h_ptr, lora_b_ptr, slot_ids_ptr, ranks_ptr, scaling_ptr, y_ptr,
    out_features,
    stride_hn, stride_hr,
    stride_bs, stride_bo, stride_br,
    stride_yn, stride_yo,
    BLOCK_R: tl.constexpr, BLOCK_O: tl.constexpr,
):
    row_id = tl.program_id(0)
    o_offs = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
    slot_id = tl.load(slot_ids_ptr + row_id)
    has_adapter = slot_id >= 0
    slot_id = tl.maximum(slot_id, 0)
    rank = tl.load(ranks_ptr + slot_id)
    scaling = tl.load(scaling_ptr + slot_id)

    r_offs = tl.arange(0, BLOCK_R)
    r_in = r_offs < rank
    # slot -1: no output column is read or written
    o_in = o_offs < tl.where(has_adapter, out_features, 0)
    h = tl.load(h_ptr + row_id * stride_hn + r_offs * stride_hr, mask=r_in, other=0.0).to(tl.float32)
    b = tl.load(lora_b_ptr + slot_id.to(tl.int64) * stride_bs + o_offs[:, None] * stride_bo + r_offs[None, :] * stride_br,
                mask=o_in[:, None] & r_in[None, :], other=0.0).to(tl.float32)  # (BLOCK_O, BLOCK_R)
    delta = tl.sum(b * h[None, :], 1) * scaling  # (BLOCK_O,)
    y_ptrs = y_ptr + row_id * stride_yn + o_offs * stride_yo
    y = tl.load(y_ptrs, mask=o_in, other=0.0).to(tl.float32)
    tl.store(y_ptrs, (y + delta).to(y_ptr.dtype.element_ty), mask=o_in)


def _slots_and_ranks(slot_ids, num_slots, max_rank, ranks, device):
    if slot_ids.dim() != 1 or slot_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"slot_ids must be (N,) int32/int64; got {tuple(slot_ids.shape)} {slot_ids.dtype}")
    if slot_ids.numel() and (int(slot_ids.min()) < -1 or int(slot_ids.max()) >= num_slots):
        raise ValueError(f"slot_ids must lie in [-1, {num_slots}); got min {int(slot_ids.min())}, "
                         f"max {int(slot_ids.max())}")
    if ranks is None:
        ranks = torch.full((num_slots,), max_rank, dtype=torch.int32, device=device)
    elif ranks.shape != (num_slots,):
        raise ValueError(f"ranks must be (S={num_slots},); got {tuple(ranks.shape)}")
    return slot_ids.to(device=device, dtype=torch.int32), ranks.to(device=device, dtype=torch.int32).contiguous()


def bgmv_shrink(
    x: torch.Tensor,
    lora_a: torch.Tensor,
    slot_ids: torch.Tensor,
    ranks: torch.Tensor | None = None,
) -> torch.Tensor:
    """h[n] = A[slot_ids[n]] @ x[n] for every row at once; rows with slot -1 give zeros.

    Args:
        x: (N, in) float16 / bfloat16 / float32.
        lora_a: (S, R, in), same dtype: every adapter's A, zero-padded to R = max_rank rows.
        slot_ids: (N,) int32/int64 adapter slot per row, -1 = no adapter.
        ranks: optional (S,) int true rank per slot; entries of A past it are ignored.

    Returns:
        h: (N, R) float32 (kept in float32 for the expand that follows).
    """
    if x.dim() != 2 or lora_a.dim() != 3 or lora_a.shape[2] != x.shape[1]:
        raise ValueError(f"x must be (N, in) and lora_a (S, R, in); got {tuple(x.shape)}, {tuple(lora_a.shape)}")
    if x.dtype not in SUPPORTED_DTYPES or lora_a.dtype != x.dtype:
        raise ValueError(f"x and lora_a must share one dtype among {SUPPORTED_DTYPES}; got {x.dtype}, {lora_a.dtype}")
    if slot_ids.shape != (x.shape[0],):
        raise ValueError(f"slot_ids must be (N={x.shape[0]},); got {tuple(slot_ids.shape)}")
    num_slots, max_rank, in_features = lora_a.shape
    slot_ids, ranks = _slots_and_ranks(slot_ids, num_slots, max_rank, ranks, x.device)
    require_device(x)
    h = torch.empty((x.shape[0], max_rank), dtype=torch.float32, device=x.device)
    if h.numel() == 0:
        return h
    _bgmv_shrink[(x.shape[0],)](
        x, lora_a, slot_ids, ranks, h,
        in_features, max_rank,
        *x.stride(), *lora_a.stride(), *h.stride(),
        BLOCK_R=next_pow2(max_rank), BLOCK_K=min(256 if x.is_cuda else 64, next_pow2(in_features)),
        num_warps=4 if x.is_cuda else 1,
    )
    return h


def bgmv_expand(
    h: torch.Tensor,
    lora_b: torch.Tensor,
    slot_ids: torch.Tensor,
    scaling: torch.Tensor,
    y: torch.Tensor,
    ranks: torch.Tensor | None = None,
) -> torch.Tensor:
    """y[n] += scaling[a] * (B[a] @ h[n]) with a = slot_ids[n], in place; rows with slot -1 untouched.

    Args:
        h: (N, R) float32 (from bgmv_shrink) or y's dtype.
        lora_b: (S, out, R) every adapter's B, zero-padded to R columns.
        slot_ids: (N,) adapter slot per row, -1 = no adapter.
        scaling: (S,) per-adapter scaling (alpha / r), any float dtype.
        y: (N, out) the base layer's output, updated in place (accumulated in float32).
        ranks: optional (S,) true rank per slot.

    Returns:
        y (the same tensor).
    """
    if h.dim() != 2 or lora_b.dim() != 3 or y.dim() != 2 or lora_b.shape[2] != h.shape[1]:
        raise ValueError(f"h must be (N, R), lora_b (S, out, R), y (N, out); got {tuple(h.shape)}, "
                         f"{tuple(lora_b.shape)}, {tuple(y.shape)}")
    if y.shape != (h.shape[0], lora_b.shape[1]):
        raise ValueError(f"y must be (N={h.shape[0]}, out={lora_b.shape[1]}); got {tuple(y.shape)}")
    num_slots, out_features, max_rank = lora_b.shape
    if scaling.shape != (num_slots,):
        raise ValueError(f"scaling must be (S={num_slots},); got {tuple(scaling.shape)}")
    if slot_ids.shape != (h.shape[0],):
        raise ValueError(f"slot_ids must be (N={h.shape[0]},); got {tuple(slot_ids.shape)}")
    slot_ids, ranks = _slots_and_ranks(slot_ids, num_slots, max_rank, ranks, y.device)
    require_device(y)
    if y.numel() == 0:
        return y
    scaling = scaling.to(device=y.device, dtype=torch.float32).contiguous()
    block_o = min(128 if y.is_cuda else 64, next_pow2(out_features))
    grid = (h.shape[0], triton.cdiv(out_features, block_o))
    _bgmv_expand[grid](
        h, lora_b, slot_ids, ranks, scaling, y,
        out_features,
        *h.stride(), *lora_b.stride(), *y.stride(),
        BLOCK_R=next_pow2(max_rank), BLOCK_O=block_o,
        num_warps=4 if y.is_cuda else 1,
    )
    return y


def multi_lora_delta(
    x: torch.Tensor,
    lora_a: torch.Tensor,
    lora_b: torch.Tensor,
    scaling: torch.Tensor,
    slot_ids: torch.Tensor,
    ranks: torch.Tensor | None = None,
) -> torch.Tensor:
    """The LoRA term of a multi-adapter layer: (N, out) = scaling[a] * B[a] @ A[a] @ x[n], 0 for slot -1.

    ``base(x) + multi_lora_delta(...)`` is MultiLoRALinear's forward for x (N, in); shapes as in
    bgmv_shrink / bgmv_expand. The result is float32.
    """
    h = bgmv_shrink(x, lora_a, slot_ids, ranks)
    y = torch.zeros((x.shape[0], lora_b.shape[1]), dtype=torch.float32, device=x.device)
    return bgmv_expand(h, lora_b, slot_ids, scaling, y, ranks)
