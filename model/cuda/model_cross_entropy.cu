// The cross-entropy of the LM head's logits: one block per row; the row in registers (read once, dlogits written
// from them) for V % 4 == 0 up to 32768, else an online log-sum-exp and a second pass over the row.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "model/cuda/model_cuda_common.cuh"

namespace spb {
namespace model_cuda {
namespace {

// ---- cross-entropy --------------------------------------------------------------------------------------------------
// A running (max m, sum s of exp(x - m)) pair; two pairs merge by rescaling to the larger max. Both empty (m = -inf):
// nothing to merge, and no exp(-inf - -inf) = NaN.
__device__ __forceinline__ void lse_merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;
  s = s * expf(m - mn) + s2 * expf(m2 - mn);
  m = mn;
}

constexpr int kCeThreads = 512;

// A block-wide reduction of one float per thread (op: fmaxf or +), the result in every thread.
template <class Op>
__device__ float block_reduce(float x, Op op, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int o = 16; o > 0; o >>= 1) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < warps; ++w) x = op(x, scratch[w]);
  return x;
}

// A target outside [0, V) has no logit to read: its loss is NaN, so that it shows, and dlogits is the softmax.
__device__ __forceinline__ float ce_loss(float m, float s, const float* x, int t, int V) {
  return t >= 0 && t < V ? m + logf(s) - x[t] : NAN;
}

// The row in registers (kVec float4 per thread, V % 4 == 0, V <= 4 kVec blockDim.x): it is read once, its max and
// its sum of exponentials are two block reductions, and dlogits is written from the registers, 4 bf16 a store.
template <int kVec>
__global__ void __launch_bounds__(kCeThreads) cross_entropy_rows_kernel(int V, const float* logits,
                                                                        const int32_t* targets, float grad_scale,
                                                                        float* loss, bf16* dlogits) {
  __shared__ float scratch[kCeThreads / 32];
  const int row = blockIdx.x, n4 = V / 4;
  const float* x = logits + size_t(row) * V;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4 r[kVec];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int j = threadIdx.x + i * kCeThreads;
    r[i] = j < n4 ? __ldcs(x4 + j) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    m = fmaxf(m, fmaxf(fmaxf(r[i].x, r[i].y), fmaxf(r[i].z, r[i].w)));
  }
  m = block_reduce(m, [](float a, float b) { return fmaxf(a, b); }, scratch);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    r[i] = make_float4(__expf(r[i].x - m), __expf(r[i].y - m), __expf(r[i].z - m), __expf(r[i].w - m));
    s += (r[i].x + r[i].y) + (r[i].z + r[i].w);
  }
  s = block_reduce(s, [](float a, float b) { return a + b; }, scratch);
  const int t = targets[row];
  if (threadIdx.x == 0) loss[row] = ce_loss(m, s, x, t, V);
  const float scale = grad_scale / s;
  uint2* d = reinterpret_cast<uint2*>(dlogits + size_t(row) * V);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int j = threadIdx.x + i * kCeThreads;
    if (j >= n4) break;
    const int c = 4 * j;
    const auto pack = [&](float a, float b, int ca, int cb) {
      const __nv_bfloat162 h = __floats2bfloat162_rn((a * scale) - (ca == t ? grad_scale : 0.f),
                                                     (b * scale) - (cb == t ? grad_scale : 0.f));
      return *reinterpret_cast<const unsigned*>(&h);
    };
    d[j] = make_uint2(pack(r[i].x, r[i].y, c, c + 1), pack(r[i].z, r[i].w, c + 2, c + 3));
  }
}

// Any V: an online log-sum-exp over the row, then dlogits in a second pass over it.
__global__ void cross_entropy_kernel(int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                                     bf16* dlogits) {
  __shared__ float warp_m[32], warp_s[32];
  __shared__ float row_m, row_s;
  const int row = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* x = logits + size_t(row) * V;

  float m = -INFINITY, s = 0.f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) lse_merge(m, s, x[j], 1.f);
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    lse_merge(m, s, m2, s2);
  }
  if (lane == 0) warp_m[warp] = m, warp_s[warp] = s;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    m = lane < warps ? warp_m[lane] : -INFINITY;
    s = lane < warps ? warp_s[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      lse_merge(m, s, m2, s2);
    }
    if (lane == 0) row_m = m, row_s = s;
  }
  __syncthreads();
  m = row_m, s = row_s;

  const int t = targets[row];
  if (threadIdx.x == 0) loss[row] = ce_loss(m, s, x, t, V);
  const float inv_s = 1.f / s;
  bf16* d = dlogits + size_t(row) * V;
  for (int j = threadIdx.x; j < V; j += blockDim.x)
    d[j] = to_bf((expf(x[j] - m) * inv_s - (j == t ? 1.f : 0.f)) * grad_scale);
}

}  // namespace

void launch_cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                          void* dlogits, cudaStream_t s) {
  if (n <= 0 || V <= 0) return;
  bf16* d = as_bf16(dlogits);
  const int vec = (V / 4 + kCeThreads - 1) / kCeThreads;  // float4 per thread for the row in registers
  if (V % 4 != 0 || !aligned(logits, 16) || !aligned(dlogits, 8) || vec > 16)
    cross_entropy_kernel<<<n, kCeThreads, 0, s>>>(V, logits, targets, grad_scale, loss, d);
  else if (vec <= 4)
    cross_entropy_rows_kernel<4><<<n, kCeThreads, 0, s>>>(V, logits, targets, grad_scale, loss, d);
  else if (vec <= 8)
    cross_entropy_rows_kernel<8><<<n, kCeThreads, 0, s>>>(V, logits, targets, grad_scale, loss, d);
  else
    cross_entropy_rows_kernel<16><<<n, kCeThreads, 0, s>>>(V, logits, targets, grad_scale, loss, d);
  SPB_CUDA_LAUNCH();
}

}  // namespace model_cuda
}  // namespace spb
