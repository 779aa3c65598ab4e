// The GPU kernels of the GLA language model (model/model_kernels.h): bf16 activations, fp32 math inside every kernel.
//   gemm                     cublasGemmEx, bf16 A and B, bf16 or fp32 C, fp32 compute; row-major mapped onto cuBLAS
//   convert                  fp32 <-> bf16, 4 elements a thread where the pointers allow it
//   embedding_fwd/bwd        gather rows; scatter-add with fp32 atomics
//   rmsnorm_fwd/bwd          one warp per row; dw by the column-sum kernel
//   forget_gate_fwd/bwd      logsigmoid / normaliser; the backward writes dpre and sums dbias in one pass
//   gated_rmsnorm_fwd/bwd    per-head RMSNorm times swish(z), one warp per row; dw by the column-sum kernel
//   swiglu_fwd/bwd           elementwise, 4 elements a thread
//   cross_entropy            one block per row, online log-sum-exp, then dlogits in a second pass over the row
//   adamw                    elementwise fp32, 4 elements a thread; bias corrections from the host in double
// Built into spb_model_cuda (model/cuda/CMakeLists.txt); tested against the CPU kernels by
// tests/model/test_model_kernels_gpu.cpp (ctest -R model.kernels_gpu).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "harness/cuda_check.h"
#include "harness/error.h"
#include "model/model_kernels.h"

#define SPB_CUBLAS(call)                                                                      \
  do {                                                                                        \
    cublasStatus_t s_ = (call);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::spb::fail(__FILE__, __LINE__, std::string(#call) + ": " + cublasGetStatusString(s_)); \
  } while (0)

namespace spb {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
// 32 MiB: what cuBLAS recommends on Hopper, so that its best kernels (split-K among them) are all available.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ bf16 to_bf(float x) { return __float2bfloat16(x); }

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// ---- 4 elements at a time -------------------------------------------------------------------------------------------
// An elementwise kernel walks groups of 4 elements; a group that is whole and whose pointers are aligned (`vec`,
// checked on the host) moves as one 16-byte (fp32) or 8-byte (bf16) access, the last partial group element by element.
struct alignas(8) Bf16x4 {
  __nv_bfloat162 lo, hi;
};
__device__ __forceinline__ void load4(const float* p, float (&v)[4]) {
  const float4 t = *reinterpret_cast<const float4*>(p);
  v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}
__device__ __forceinline__ void load4(const bf16* p, float (&v)[4]) {
  const Bf16x4 t = *reinterpret_cast<const Bf16x4*>(p);
  const float2 a = __bfloat1622float2(t.lo), b = __bfloat1622float2(t.hi);
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(bf16* p, const float (&v)[4]) {
  Bf16x4 t;
  t.lo = __floats2bfloat162_rn(v[0], v[1]);
  t.hi = __floats2bfloat162_rn(v[2], v[3]);
  *reinterpret_cast<Bf16x4*>(p) = t;
}
__device__ __forceinline__ void store1(float* p, float v) { *p = v; }
__device__ __forceinline__ void store1(bf16* p, float v) { *p = to_bf(v); }

#define SPB_FOR_EACH_GROUP_OF_4(n, g)                                                                  \
  for (size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x, groups_ = ((n) + 3) / 4; g < groups_; \
       g += size_t(gridDim.x) * blockDim.x)

// ---- convert --------------------------------------------------------------------------------------------------------
template <class Src, class Dst>
__global__ void convert_kernel(size_t n, bool vec, const Src* src, Dst* dst) {
  SPB_FOR_EACH_GROUP_OF_4(n, g) {
    const size_t i = g * 4;
    if (vec && i + 4 <= n) {
      float v[4];
      load4(src + i, v);
      store4(dst + i, v);
    } else {
      for (size_t k = i; k < n && k < i + 4; ++k) store1(dst + k, to_f(src[k]));
    }
  }
}

// ---- embedding ------------------------------------------------------------------------------------------------------
__global__ void embedding_fwd_kernel(int n, int D, const int32_t* tokens, const float* table, float* x) {
  const size_t total = size_t(n) * D;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / D, col = i % D;
    x[i] = table[size_t(tokens[row]) * D + col];
  }
}
__global__ void embedding_bwd_kernel(int n, int D, const int32_t* tokens, const float* dx, float* dtable) {
  const size_t total = size_t(n) * D;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / D, col = i % D;
    atomicAdd(dtable + size_t(tokens[row]) * D + col, dx[i]);  // a token may occur in many rows
  }
}

// ---- RMSNorms: one pass per row, the weight gradient summed in shared memory ---------------------------------------
// A row belongs to a group of G lanes (G = 32, or 16 where D <= 64 so that a warp holds two rows and no lane idles),
// each lane taking VW = 4 consecutive elements at a time (16-byte fp32 / 8-byte bf16 accesses; VW = 1 where D or a
// pointer does not allow it). The backward adds each row's share of dw into a shared-memory copy of dw (D floats) and
// adds that to dw once per block, so the inputs are read once instead of once for dx and once more for dw.
// At [16384, 2048] fp32 the residual norm's backward moves 512 MB (x, dy, dx read, dx written): 0.17 ms at 3 TB/s;
// the gated norm's over [16384 x 32, 64] bf16 moves 320 MB: 0.11 ms. Their forwards: 192 MB each, 0.065 ms.
template <int G>
__device__ __forceinline__ float group_sum(float x) {
  for (int o = G / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
template <int VW, class T>
__device__ __forceinline__ void loadv(const T* p, float (&v)[VW]) {
  if constexpr (VW == 4) load4(p, v);
  else v[0] = to_f(*p);
}
template <int VW, class T>
__device__ __forceinline__ void storev(T* p, const float (&v)[VW]) {
  if constexpr (VW == 4) store4(p, v);
  else store1(p, v[0]);
}

// The rows of a warp: `base` is warp-uniform (the loop and the shuffles see every lane), a lane's row is base + its
// group, and a lane whose row is past the end computes on nothing and stores nothing.
#define SPB_FOR_EACH_ROW_OF_GROUP(rows, G, row, live)                                                     \
  for (int base_ = (int(blockIdx.x) * int(blockDim.x / 32) + int(threadIdx.x / 32)) * (32 / G),           \
           row = base_ + int(threadIdx.x % 32) / G;                                                       \
       base_ < (rows); base_ += int(gridDim.x * (blockDim.x / 32)) * (32 / G), row = base_ + int(threadIdx.x % 32) / G) \
    if (const bool live = row < (rows); true)

template <int G, int VW, class T>
__global__ void rmsnorm_fwd_kernel(int n, int D, const T* x, const float* w, const T* z, float eps, bf16* y,
                                   float* rstd) {
  const int g = threadIdx.x % G;
  SPB_FOR_EACH_ROW_OF_GROUP(n, G, row, live) {
    const size_t base = size_t(live ? row : 0) * D;
    float ss = 0.f;
    if (live)
      for (int j = g * VW; j < D; j += G * VW) {
        float v[VW];
        loadv<VW>(x + base + j, v);
        for (int k = 0; k < VW; ++k) ss += v[k] * v[k];
      }
    const float r = 1.f / sqrtf(group_sum<G>(ss) / D + eps);
    if (!live) continue;
    for (int j = g * VW; j < D; j += G * VW) {
      float v[VW], wv[VW];
      loadv<VW>(x + base + j, v);
      loadv<VW>(w + j, wv);
      if (z) {  // GLA's output gate: times swish(z)
        float zv[VW];
        loadv<VW>(z + base + j, zv);
        for (int k = 0; k < VW; ++k) v[k] *= zv[k] * sigmoid(zv[k]);
      }
      for (int k = 0; k < VW; ++k) v[k] *= r * wv[k];
      storev<VW>(y + base + j, v);
    }
    if (g == 0) rstd[row] = r;
  }
}

// With u = x r (the normalised row) and a = dy w (* swish(z) where gated): dx = r (a - u mean(a u)) (+= where
// ACCUMULATE: the residual stream's gradient; dx_act, where given, receives its bf16 copy for the next products),
// dw += dy u (* swish(z)), dz = dy u w swish'(z). ITERS > 0: D = ITERS x G x VW exactly, and each lane keeps its
// columns' share of dw in registers across its rows (one shared-memory atomic per column and warp instead of one per
// element); ITERS = 0: any D, each element's share added to shared memory at once.
template <int G, int VW, int ITERS, bool ACCUMULATE, class T, class DT>
__global__ void rmsnorm_bwd_kernel(int n, int D, const T* x, const float* w, const T* z, const float* rstd, const DT* dy,
                                   T* dx, T* dz, float* dw, bf16* dx_act) {
  extern __shared__ float dw_part[];
  for (int j = threadIdx.x; j < D; j += blockDim.x) dw_part[j] = 0.f;
  __syncthreads();
  const int g = threadIdx.x % G;
  constexpr int kRegs = ITERS > 0 ? ITERS : 1;
  float acc[kRegs][VW] = {};
  const int iters = ITERS > 0 ? ITERS : (D - g * VW + G * VW - 1) / (G * VW);
  SPB_FOR_EACH_ROW_OF_GROUP(n, G, row, live) {
    const size_t base = size_t(live ? row : 0) * D;
    const float r = live ? rstd[row] : 0.f;
    float dot = 0.f;  // sum of a u
    if (live)
#pragma unroll
      for (int i = 0; i < (ITERS > 0 ? ITERS : iters); ++i) {
        const int j = g * VW + i * G * VW;
        float xv[VW], dv[VW], wv[VW];
        loadv<VW>(x + base + j, xv);
        loadv<VW>(dy + base + j, dv);
        loadv<VW>(w + j, wv);
        if (z) {
          float zv[VW];
          loadv<VW>(z + base + j, zv);
          for (int k = 0; k < VW; ++k) dv[k] *= zv[k] * sigmoid(zv[k]);
        }
        for (int k = 0; k < VW; ++k) dot += dv[k] * wv[k] * xv[k] * r;
      }
    const float mean = group_sum<G>(dot) / D;
    if (!live) continue;
#pragma unroll
    for (int i = 0; i < (ITERS > 0 ? ITERS : iters); ++i) {
      const int j = g * VW + i * G * VW;
      float xv[VW], dv[VW], wv[VW], out[VW], dzv[VW];
      loadv<VW>(x + base + j, xv);
      loadv<VW>(dy + base + j, dv);
      loadv<VW>(w + j, wv);
      if (z) {
        float zv[VW];
        loadv<VW>(z + base + j, zv);
        for (int k = 0; k < VW; ++k) {
          const float sg = sigmoid(zv[k]);
          dzv[k] = dv[k] * xv[k] * r * wv[k] * sg * (1.f + zv[k] * (1.f - sg));
          dv[k] *= zv[k] * sg;
        }
        storev<VW>(dz + base + j, dzv);
      }
      if (ACCUMULATE) loadv<VW>(dx + base + j, out);
      for (int k = 0; k < VW; ++k) {
        const float u = xv[k] * r;
        const float v = r * (dv[k] * wv[k] - u * mean);
        out[k] = ACCUMULATE ? out[k] + v : v;
        if (ITERS > 0) acc[ITERS > 0 ? i : 0][k] += dv[k] * u;
        else atomicAdd(&dw_part[j + k], dv[k] * u);
      }
      storev<VW>(dx + base + j, out);
      if (dx_act) storev<VW>(dx_act + base + j, out);
    }
  }
  if (ITERS > 0)
#pragma unroll
    for (int i = 0; i < kRegs; ++i)
      for (int k = 0; k < VW; ++k) atomicAdd(&dw_part[g * VW + i * G * VW + k], acc[i][k]);
  __syncthreads();
  for (int j = threadIdx.x; j < D; j += blockDim.x) atomicAdd(dw + j, dw_part[j]);
}

// ---- column sums over rows ------------------------------------------------------------------------------------------
// out[c] += sum_r op(r, c) for c < D. A block covers 32 columns (threadIdx.x, so a warp reads 32 consecutive elements
// of one row) and strides over rows with its 8 warps; the grid's y dimension splits the rows further. op(r, c) is
// called exactly once for every (r, c), so it may also write element (r, c) of an output (forget_gate_bwd does).
constexpr int kColRows = 8;
template <class Op>
__global__ void column_sum_kernel(int n, int D, Op op, float* out) {
  __shared__ float part[kColRows][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (c < D)
    for (int r = blockIdx.y * kColRows + threadIdx.y; r < n; r += gridDim.y * kColRows) acc += op(r, c);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < D) {
    float s = 0.f;
    for (int k = 0; k < kColRows; ++k) s += part[k][threadIdx.x];
    atomicAdd(out + c, s);
  }
}

// dpre = dg sigmoid(-(pre + bias)) / normaliser, written as bf16; dbias sums the fp32 values (before rounding).
struct ForgetGateBwd {
  int C;
  const bf16 *pre, *dg;
  const float* bias;
  float normaliser;
  bf16* dpre;
  __device__ float operator()(int r, int c) const {
    const size_t i = size_t(r) * C + c;
    const float x = to_f(pre[i]) + bias[c];
    const float d = to_f(dg[i]) / (1.f + expf(x)) / normaliser;
    dpre[i] = to_bf(d);
    return d;
  }
};

// ---- forget gate, SwiGLU --------------------------------------------------------------------------------------------
// logsigmoid(x) = min(x, 0) - log1p(exp(-|x|)): exp never overflows, and log1p keeps the small values of large x.
__global__ void forget_gate_fwd_kernel(int n, int C, const bf16* pre, const float* bias, float normaliser, bf16* g) {
  const size_t total = size_t(n) * C;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const float x = to_f(pre[i]) + bias[i % C];
    g[i] = to_bf((fminf(x, 0.f) - log1pf(expf(-fabsf(x)))) / normaliser);
  }
}

__device__ __forceinline__ float swiglu(float a, float b) { return a * sigmoid(a) * b; }
__device__ __forceinline__ void swiglu_grad(float a, float b, float dy, float& da, float& db) {
  const float sg = sigmoid(a);
  da = dy * b * sg * (1.f + a * (1.f - sg));
  db = dy * a * sg;
}

__global__ void swiglu_fwd_kernel(size_t n, bool vec, const bf16* a, const bf16* b, bf16* y) {
  SPB_FOR_EACH_GROUP_OF_4(n, g) {
    const size_t i = g * 4;
    if (vec && i + 4 <= n) {
      float av[4], bv[4], yv[4];
      load4(a + i, av);
      load4(b + i, bv);
      for (int k = 0; k < 4; ++k) yv[k] = swiglu(av[k], bv[k]);
      store4(y + i, yv);
    } else {
      for (size_t k = i; k < n && k < i + 4; ++k) y[k] = to_bf(swiglu(to_f(a[k]), to_f(b[k])));
    }
  }
}

__global__ void swiglu_bwd_kernel(size_t n, bool vec, const bf16* a, const bf16* b, const bf16* dy, bf16* da,
                                  bf16* db) {
  SPB_FOR_EACH_GROUP_OF_4(n, g) {
    const size_t i = g * 4;
    if (vec && i + 4 <= n) {
      float av[4], bv[4], dyv[4], dav[4], dbv[4];
      load4(a + i, av);
      load4(b + i, bv);
      load4(dy + i, dyv);
      for (int k = 0; k < 4; ++k) swiglu_grad(av[k], bv[k], dyv[k], dav[k], dbv[k]);
      store4(da + i, dav);
      store4(db + i, dbv);
    } else {
      for (size_t k = i; k < n && k < i + 4; ++k) {
        float dak, dbk;
        swiglu_grad(to_f(a[k]), to_f(b[k]), to_f(dy[k]), dak, dbk);
        da[k] = to_bf(dak);
        db[k] = to_bf(dbk);
      }
    }
  }
}

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

  // A target outside [0, V) has no logit to read: its loss is NaN, so that it shows, and dlogits is the softmax.
  const int t = targets[row];
  const bool valid = t >= 0 && t < V;
  if (threadIdx.x == 0) loss[row] = valid ? m + logf(s) - x[t] : NAN;
  const float inv_s = 1.f / s;
  bf16* d = dlogits + size_t(row) * V;
  for (int j = threadIdx.x; j < V; j += blockDim.x)
    d[j] = to_bf((expf(x[j] - m) * inv_s - (j == t ? 1.f : 0.f)) * grad_scale);
}

// ---- AdamW ----------------------------------------------------------------------------------------------------------
struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay, bias_corr1, bias_corr2;  // bias_corr = 1 - beta^step
};
__device__ __forceinline__ void adamw_one(const AdamParams& a, float& p, float g, float& m, float& v) {
  m = a.beta1 * m + (1.f - a.beta1) * g;
  v = a.beta2 * v + (1.f - a.beta2) * g * g;
  const float m_hat = m / a.bias_corr1, v_hat = v / a.bias_corr2;
  p -= a.lr * m_hat / (sqrtf(v_hat) + a.eps) + a.lr * a.weight_decay * p;  // the decay reads p before the step
}
__global__ void adamw_kernel(size_t n, bool vec, AdamParams a, float* p, const float* grad, float* m, float* v) {
  SPB_FOR_EACH_GROUP_OF_4(n, g) {
    const size_t i = g * 4;
    if (vec && i + 4 <= n) {
      float pv[4], gv[4], mv[4], vv[4];
      load4(p + i, pv);
      load4(grad + i, gv);
      load4(m + i, mv);
      load4(v + i, vv);
      for (int k = 0; k < 4; ++k) adamw_one(a, pv[k], gv[k], mv[k], vv[k]);
      store4(p + i, pv);
      store4(m + i, mv);
      store4(v + i, vv);
    } else {
      for (size_t k = i; k < n && k < i + 4; ++k) adamw_one(a, p[k], grad[k], m[k], v[k]);
    }
  }
}

// ---- the interface --------------------------------------------------------------------------------------------------
bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
const bf16* as_bf16(const void* p) { return static_cast<const bf16*>(p); }
bf16* as_bf16(void* p) { return static_cast<bf16*>(p); }

class CudaModelKernels final : public ModelKernels {
 public:
  CudaModelKernels() {
    int dev = 0;
    SPB_CUDA(cudaGetDevice(&dev));
    SPB_CUDA(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
    SPB_CUBLAS(cublasCreate(&cublas_));
  }
  ~CudaModelKernels() override {
    cublasDestroy(cublas_);
    for (auto& sw : workspaces_) cudaFree(sw.second);
  }
  DType act_dtype() const override { return DType::bf16; }

  // Row-major C [M, N] is column-major C^T [N, M] (ld N), and C^T = op(B)^T op(A)^T: cuBLAS multiplies B first. B
  // stored row-major [K, N] (trans_b false) is column-major [N, K] = op(B)^T itself (OP_N, ld N); stored [N, K] it is
  // column-major [K, N] = op(B), transposed by cuBLAS (OP_T, ld K). Likewise A: [M, K] is op(A)^T (OP_N, ld K), [K, M]
  // is op(A) (OP_T, ld M).
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B, float beta,
            void* C, DType c_type, Stream st) override {
    SPB_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size");
    if (M == 0 || N == 0) return;
    const cudaStream_t s = stream(st);
    // cublasSetStream drops a user workspace, so the stream's own workspace is set again on every call.
    SPB_CUBLAS(cublasSetStream(cublas_, s));
    SPB_CUBLAS(cublasSetWorkspace(cublas_, workspace(s), kCublasWorkspaceBytes));
    const int ldb = std::max(1, trans_b ? K : N);
    const int lda = std::max(1, trans_a ? M : K);
    const cudaDataType_t ct = c_type == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
    SPB_CUBLAS(cublasGemmEx(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                            &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C, ct, N, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
  }

  void convert(size_t n, const void* src, DType src_type, void* dst, DType dst_type, Stream st) override {
    if (n == 0) return;
    const cudaStream_t s = stream(st);
    if (src_type == dst_type) {
      if (dst != src) SPB_CUDA(cudaMemcpyAsync(dst, src, n * dtype_size(src_type), cudaMemcpyDeviceToDevice, s));
    } else if (src_type == DType::f32) {
      const bool vec = aligned(src, 16) && aligned(dst, 8);
      convert_kernel<<<grid((n + 3) / 4), kThreads, 0, s>>>(n, vec, static_cast<const float*>(src), as_bf16(dst));
      SPB_CUDA_LAUNCH();
    } else {
      const bool vec = aligned(src, 8) && aligned(dst, 16);
      convert_kernel<<<grid((n + 3) / 4), kThreads, 0, s>>>(n, vec, as_bf16(src), static_cast<float*>(dst));
      SPB_CUDA_LAUNCH();
    }
  }

  void embedding_fwd(int n, int D, const int32_t* tokens, const float* table, float* x, Stream st) override {
    if (n <= 0 || D <= 0) return;
    embedding_fwd_kernel<<<grid(size_t(n) * D), kThreads, 0, stream(st)>>>(n, D, tokens, table, x);
    SPB_CUDA_LAUNCH();
  }
  void embedding_bwd(int n, int D, const int32_t* tokens, const float* dx, float* dtable, Stream st) override {
    if (n <= 0 || D <= 0) return;
    embedding_bwd_kernel<<<grid(size_t(n) * D), kThreads, 0, stream(st)>>>(n, D, tokens, dx, dtable);
    SPB_CUDA_LAUNCH();
  }

  void rmsnorm_fwd(int n, int D, const float* x, const float* w, float eps, void* y, float* rstd, Stream st) override {
    norm_fwd<float>(n, D, x, w, nullptr, eps, as_bf16(y), rstd, st);
  }
  void rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                   float* dw, void* dx_act, Stream st) override {
    norm_bwd<true, float, float>(n, D, x, w, nullptr, rstd, dy, dx, nullptr, dw, as_bf16(dx_act), st);
  }

  void forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser, void* g,
                       Stream st) override {
    if (n <= 0 || C <= 0) return;
    forget_gate_fwd_kernel<<<grid(size_t(n) * C), kThreads, 0, stream(st)>>>(n, C, as_bf16(pre), bias, normaliser,
                                                                             as_bf16(g));
    SPB_CUDA_LAUNCH();
  }
  void forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser, const void* dg, void* dpre,
                       float* dbias, Stream st) override {
    if (n <= 0 || C <= 0) return;
    const ForgetGateBwd op{C, as_bf16(pre), as_bf16(dg), bias, normaliser, as_bf16(dpre)};
    column_sum_kernel<<<column_grid(n, C), dim3(32, kColRows), 0, stream(st)>>>(n, C, op, dbias);
    SPB_CUDA_LAUNCH();
  }

  void gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w, float eps, void* y, float* rstd,
                         Stream st) override {
    norm_fwd<bf16>(rows, D, as_bf16(o), w, as_bf16(z), eps, as_bf16(y), rstd, st);
  }
  void gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w, const float* rstd,
                         const void* dy, void* d_o, void* dz, float* dw, Stream st) override {
    norm_bwd<false, bf16, bf16>(rows, D, as_bf16(o), w, as_bf16(z), rstd, as_bf16(dy), as_bf16(d_o), as_bf16(dz), dw,
                                nullptr, st);
  }

  void swiglu_fwd(size_t n, const void* a, const void* b, void* y, Stream st) override {
    if (n == 0) return;
    const bool vec = aligned(a, 8) && aligned(b, 8) && aligned(y, 8);
    swiglu_fwd_kernel<<<grid((n + 3) / 4), kThreads, 0, stream(st)>>>(n, vec, as_bf16(a), as_bf16(b), as_bf16(y));
    SPB_CUDA_LAUNCH();
  }
  void swiglu_bwd(size_t n, const void* a, const void* b, const void* dy, void* da, void* db, Stream st) override {
    if (n == 0) return;
    const bool vec = aligned(a, 8) && aligned(b, 8) && aligned(dy, 8) && aligned(da, 8) && aligned(db, 8);
    swiglu_bwd_kernel<<<grid((n + 3) / 4), kThreads, 0, stream(st)>>>(n, vec, as_bf16(a), as_bf16(b), as_bf16(dy),
                                                                      as_bf16(da), as_bf16(db));
    SPB_CUDA_LAUNCH();
  }

  void cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                     void* dlogits, Stream st) override {
    if (n <= 0 || V <= 0) return;
    cross_entropy_kernel<<<n, kCeThreads, 0, stream(st)>>>(V, logits, targets, grad_scale, loss, as_bf16(dlogits));
    SPB_CUDA_LAUNCH();
  }

  void adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1, float beta2, float eps,
             float weight_decay, int step, Stream st) override {
    SPB_CHECK(step >= 1, "adamw: the step counts from 1");
    if (n == 0) return;
    const AdamParams a{lr,
                       beta1,
                       beta2,
                       eps,
                       weight_decay,
                       float(1.0 - std::pow(double(beta1), step)),
                       float(1.0 - std::pow(double(beta2), step))};
    const bool vec = aligned(p, 16) && aligned(grad, 16) && aligned(m, 16) && aligned(v, 16);
    adamw_kernel<<<grid((n + 3) / 4), kThreads, 0, stream(st)>>>(n, vec, a, p, grad, m, v);
    SPB_CUDA_LAUNCH();
  }

 private:
  static cudaStream_t stream(Stream st) { return static_cast<cudaStream_t>(st.handle); }  // nullptr: the default stream

  // The norm kernels at (G lanes per row, VW elements per access) for this D and these pointers.
  template <class T>
  void norm_fwd(int n, int D, const T* x, const float* w, const T* z, float eps, bf16* y, float* rstd, Stream st) {
    if (n <= 0 || D <= 0) return;
    const bool vec = D % 4 == 0 && aligned(x, 16) && aligned(w, 16) && (!z || aligned(z, 16)) && aligned(y, 8);
    const bool half = D <= 64;
    const unsigned blocks = norm_blocks(n, half, 16);
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kThreads, 0, stream(st)>>>(n, D, x, w, z, eps, y, rstd);
      SPB_CUDA_LAUNCH();
    };
    if (vec) half ? launch(rmsnorm_fwd_kernel<16, 4, T>) : launch(rmsnorm_fwd_kernel<32, 4, T>);
    else half ? launch(rmsnorm_fwd_kernel<16, 1, T>) : launch(rmsnorm_fwd_kernel<32, 1, T>);
  }
  template <bool ACCUMULATE, class T, class DT>
  void norm_bwd(int n, int D, const T* x, const float* w, const T* z, const float* rstd, const DT* dy, T* dx, T* dz,
                float* dw, bf16* dx_act, Stream st) {
    if (n <= 0 || D <= 0) return;
    SPB_CHECK(size_t(D) * 4 <= 48 * 1024, "RMSNorm backward: D = " + std::to_string(D) + " exceeds the 12288 columns "
                                          "whose weight gradient a block sums in shared memory");
    const bool vec = D % 4 == 0 && aligned(x, 16) && aligned(w, 16) && (!z || aligned(z, 16)) && aligned(dy, 16) &&
                     aligned(dx, 16) && (!dz || aligned(dz, 16)) && (!dx_act || aligned(dx_act, 8));
    const bool half = D <= 64;
    const unsigned blocks = norm_blocks(n, half, 4);  // few blocks: one atomicAdd of dw per column and block
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kThreads, size_t(D) * 4, stream(st)>>>(n, D, x, w, z, rstd, dy, dx, dz, dw, dx_act);
      SPB_CUDA_LAUNCH();
    };
    // The model's hidden size (2048) with dw in registers; every other D through shared memory.
    if (vec && D == 2048) launch(rmsnorm_bwd_kernel<32, 4, 16, ACCUMULATE, T, DT>);
    else if (vec) half ? launch(rmsnorm_bwd_kernel<16, 4, 0, ACCUMULATE, T, DT>) : launch(rmsnorm_bwd_kernel<32, 4, 0, ACCUMULATE, T, DT>);
    else half ? launch(rmsnorm_bwd_kernel<16, 1, 0, ACCUMULATE, T, DT>) : launch(rmsnorm_bwd_kernel<32, 1, 0, ACCUMULATE, T, DT>);
  }
  // Blocks of kThreads for n rows (two per warp where `half`), at most per_sm per SM.
  unsigned norm_blocks(int n, bool half, int per_sm) const {
    const size_t rows_per_block = kThreads / 32 * (half ? 2 : 1);
    return unsigned(std::max<size_t>(1, std::min<size_t>((size_t(n) + rows_per_block - 1) / rows_per_block,
                                                         size_t(sms_) * per_sm)));
  }

  // Blocks for a grid-stride loop over `work` items: enough to fill every SM several times over, no more.
  unsigned grid(size_t work) const {
    const size_t blocks = (work + kThreads - 1) / kThreads;
    return unsigned(std::max<size_t>(1, std::min<size_t>(blocks, size_t(sms_) * 16)));
  }
  // 32-column tiles across x; the rows split over y until the grid has about 4 blocks per SM.
  dim3 column_grid(int n, int D) const {
    const int gx = (D + 31) / 32;
    const int row_groups = (n + kColRows - 1) / kColRows;
    const int gy = std::max(1, std::min(row_groups, sms_ * 4 / gx));
    return dim3(unsigned(gx), unsigned(gy));
  }

  // One workspace per stream: two streams' products may run at the same time.
  void* workspace(cudaStream_t s) {
    void*& w = workspaces_[s];
    if (!w) SPB_CUDA(cudaMalloc(&w, kCublasWorkspaceBytes));
    return w;
  }

  int sms_ = 1;
  cublasHandle_t cublas_ = nullptr;
  std::unordered_map<cudaStream_t, void*> workspaces_;
};

}  // namespace

std::unique_ptr<ModelKernels> make_cuda_model_kernels() { return std::make_unique<CudaModelKernels>(); }

}  // namespace spb
