// Paged decode attention in CUDA C++: the algorithm of reference/kernels/paged_decode.py,
// written the way a hand-tuned serving kernel is (vLLM csrc/attention/attention_kernels.cu).
//
// Layout (same as the Triton kernel and the `paged-kv` kata):
//   q            (B, H, D)              one new query token per sequence
//   k/v_cache    (NB, BS, H_kv, D)      block id -> BS token slots -> KV heads -> features
//   block_tables (B, max_blocks) int32  token t of sequence b lives in block
//                                       block_tables[b, t / BS], slot t % BS
//   seq_lens     (B,) int32             tokens cached per sequence
//   out          (B, H, D)              dtype of q
//
// One thread block per (sequence, query head), kNumWarps warps. Warp w takes tokens
// w, w + kNumWarps, ... and keeps its own online softmax (running max m, denominator l,
// accumulator acc); lane i owns features i, i + 32, ... so every K/V row is read by one warp
// in coalesced 32-element chunks, and the q.k dot product is finished with warp shuffles.
// At the end the warps' partial results are rescaled to the common max and summed
// through shared memory. A sequence of length 0 outputs zeros.

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <cmath>

namespace {

constexpr int kWarpSize = 32;
constexpr int kNumWarps = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxPerLane = kMaxHeadDim / kWarpSize;

template <typename scalar_t>
__device__ __forceinline__ float to_float(scalar_t x) {
  return static_cast<float>(x);
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

template <typename scalar_t>
__global__ void paged_decode_kernel(
    const scalar_t* __restrict__ q, const scalar_t* __restrict__ k_cache,
    const scalar_t* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ seq_lens, scalar_t* __restrict__ out,
    int64_t q_stride_b, int64_t q_stride_h,
    int64_t kv_stride_block, int64_t kv_stride_slot, int64_t kv_stride_head,
    int64_t table_stride_b, int64_t out_stride_b, int64_t out_stride_h,
    int num_kv_groups, int block_size, int head_dim, float scale) {
  const int seq_id = blockIdx.x;
  const int head_id = blockIdx.y;
  const int kv_head_id = head_id / num_kv_groups;  // GQA: query head h reads KV head h / (H / H_kv)
  const int warp_id = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int seq_len = seq_lens[seq_id];

  // q (pre-scaled) and this warp's accumulator, feature d = lane + i * 32 in slot i
  float q_reg[kMaxPerLane];
  float acc[kMaxPerLane];
  const scalar_t* q_row = q + seq_id * q_stride_b + head_id * q_stride_h;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + i * kWarpSize;
    q_reg[i] = d < head_dim ? to_float(q_row[d]) * scale : 0.f;
    acc[i] = 0.f;
  }

  float m = -INFINITY;  // running max of this warp's logits
  float l = 0.f;        // running sum of exp(logit - m)
  const int* table = block_tables + seq_id * table_stride_b;
  for (int t = warp_id; t < seq_len; t += kNumWarps) {
    // logical token -> physical block and slot
    const int64_t block_id = table[t / block_size];
    const int64_t row = block_id * kv_stride_block + (t % block_size) * kv_stride_slot +
                        kv_head_id * kv_stride_head;
    const scalar_t* k_row = k_cache + row;
    const scalar_t* v_row = v_cache + row;

    float partial = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + i * kWarpSize;
      if (d < head_dim) partial += q_reg[i] * to_float(k_row[d]);
    }
    const float s = warp_sum(partial);  // every lane now holds the full logit
    const float m_new = fmaxf(m, s);
    const float alpha = expf(m - m_new);  // first token: exp(-inf) = 0
    const float p = expf(s - m_new);
    l = l * alpha + p;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + i * kWarpSize;
      if (d < head_dim) acc[i] = acc[i] * alpha + p * to_float(v_row[d]);
    }
    m = m_new;
  }

  // combine the warps: out = sum_w acc_w * exp(m_w - M) / sum_w l_w * exp(m_w - M)
  __shared__ float warp_m[kNumWarps];
  __shared__ float warp_l[kNumWarps];
  __shared__ float warp_acc[kNumWarps][kMaxHeadDim];
  if (lane == 0) {
    warp_m[warp_id] = m;
    warp_l[warp_id] = l;
  }
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + i * kWarpSize;
    if (d < head_dim) warp_acc[warp_id][d] = acc[i];
  }
  __syncthreads();

  float m_all = -INFINITY;
  for (int w = 0; w < kNumWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float l_all = 0.f;
  for (int w = 0; w < kNumWarps; ++w) {
    if (warp_l[w] > 0.f) l_all += warp_l[w] * expf(warp_m[w] - m_all);  // idle warps add nothing
  }
  scalar_t* out_row = out + seq_id * out_stride_b + head_id * out_stride_h;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.f;
    for (int w = 0; w < kNumWarps; ++w) {
      if (warp_l[w] > 0.f) o += warp_acc[w][d] * expf(warp_m[w] - m_all);
    }
    out_row[d] = static_cast<scalar_t>(l_all > 0.f ? o / l_all : 0.f);  // seq_len 0: zeros
  }
}

}  // namespace

torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor k_cache,
                                     torch::Tensor v_cache, torch::Tensor block_tables,
                                     torch::Tensor seq_lens, double scale) {
  TORCH_CHECK(q.is_cuda() && k_cache.is_cuda() && v_cache.is_cuda() && block_tables.is_cuda() &&
                  seq_lens.is_cuda(),
              "paged_decode_attention: every tensor must be on the GPU");
  TORCH_CHECK(q.dim() == 3, "q must be (B, H, D), got ", q.sizes());
  TORCH_CHECK(k_cache.dim() == 4 && k_cache.sizes() == v_cache.sizes() &&
                  k_cache.strides() == v_cache.strides(),
              "k_cache and v_cache must be (NB, BS, H_kv, D) with equal strides, got ",
              k_cache.sizes(), " and ", v_cache.sizes());
  const auto dtype = q.scalar_type();
  TORCH_CHECK(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat,
              "q must be float16, bfloat16 or float32, got ", dtype);
  TORCH_CHECK(k_cache.scalar_type() == dtype && v_cache.scalar_type() == dtype,
              "q, k_cache and v_cache must share one dtype");
  const int64_t batch = q.size(0), num_heads = q.size(1), head_dim = q.size(2);
  const int64_t block_size = k_cache.size(1), num_kv_heads = k_cache.size(2);
  TORCH_CHECK(k_cache.size(3) == head_dim && num_heads % num_kv_heads == 0,
              "k_cache must be (NB, BS, H_kv, D) with D = ", head_dim, " and H_kv dividing ",
              num_heads, ", got ", k_cache.sizes());
  TORCH_CHECK(head_dim <= kMaxHeadDim, "head_dim must be <= ", kMaxHeadDim, ", got ", head_dim);
  TORCH_CHECK(q.stride(2) == 1 && k_cache.stride(3) == 1, "the feature dimension must be contiguous");
  TORCH_CHECK(block_tables.dim() == 2 && block_tables.size(0) == batch &&
                  block_tables.scalar_type() == at::kInt && block_tables.stride(1) == 1,
              "block_tables must be (B, max_blocks) int32 with contiguous rows");
  TORCH_CHECK(seq_lens.dim() == 1 && seq_lens.size(0) == batch &&
                  seq_lens.scalar_type() == at::kInt && seq_lens.is_contiguous(),
              "seq_lens must be (B,) int32 contiguous");

  const c10::cuda::OptionalCUDAGuard device_guard(q.device());
  auto out = torch::empty({batch, num_heads, head_dim}, q.options());
  if (out.numel() == 0) return out;

  const dim3 grid(static_cast<unsigned>(batch), static_cast<unsigned>(num_heads));
  const dim3 block(kNumWarps * kWarpSize);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "paged_decode_attention", [&] {
    paged_decode_kernel<scalar_t><<<grid, block, 0, stream>>>(
        q.data_ptr<scalar_t>(), k_cache.data_ptr<scalar_t>(), v_cache.data_ptr<scalar_t>(),
        block_tables.data_ptr<int>(), seq_lens.data_ptr<int>(), out.data_ptr<scalar_t>(),
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0), out.stride(0), out.stride(1),
        static_cast<int>(num_heads / num_kv_heads), static_cast<int>(block_size),
        static_cast<int>(head_dim), static_cast<float>(scale));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("paged_decode_attention", &paged_decode_attention,
        "Paged decode attention: q (B,H,D), k/v_cache (NB,BS,H_kv,D), block_tables (B,max_blocks) "
        "int32, seq_lens (B,) int32, scale -> (B,H,D)");
}
