// The GPU kernels of the GLA language model (model/model_kernels.h): bf16 activations, fp32 math inside every kernel.
//   gemm                     cublasGemmEx, bf16 A and B, bf16 or fp32 C, fp32 compute; row-major mapped onto cuBLAS
//   convert                  fp32 <-> bf16, 4 elements a thread where the pointers allow it
//   embedding_fwd/bwd        gather rows; scatter-add with fp32 atomics
//   rmsnorm_(add_)fwd/bwd    one kernel each, the row read once (in registers) by 16..256 threads; dw summed per
//                            block; the residual add in the forward's read
//   forget_gate_fwd/bwd      logsigmoid / normaliser, 4 elements a thread; the backward writes dpre and sums dbias
//                            in one pass
//   gated_rmsnorm_fwd/bwd    per-head RMSNorm times swish(z): the same kernels (two rows per warp at dv = 64)
//   swiglu_fwd/bwd           elementwise over [rows, F] from (a | b) rows, 8 (or 4) elements a thread
//   copy_columns             a strided copy, 16 bytes a thread where columns and pointers allow it
//   cross_entropy            one block per row; the row in registers (read once, dlogits written from them) for
//                            V % 4 == 0 up to 32768, else an online log-sum-exp and a second pass over the row
//   adamw                    elementwise fp32, 4 elements a thread, the bf16 copy of p in the same pass; bias
//                            corrections from the host in double
// Built into spb_model_cuda (model/cuda/CMakeLists.txt); tested against the CPU kernels by
// tests/model/test_model_kernels_gpu.cpp (ctest -R model.kernels_gpu).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "runtime/cuda_check.h"
#include "runtime/error.h"
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

// W bf16 as one access (W = 4: 8 bytes; W = 8: 16 bytes).
template <int W>
struct alignas(2 * W) Bf16Vec {
  __nv_bfloat162 h[W / 2];
};
template <int W>
__device__ __forceinline__ void loadw(const bf16* p, float (&v)[W]) {
  const Bf16Vec<W> t = *reinterpret_cast<const Bf16Vec<W>*>(p);
#pragma unroll
  for (int k = 0; k < W / 2; ++k) {
    const float2 f = __bfloat1622float2(t.h[k]);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}
template <int W>
__device__ __forceinline__ void storew(bf16* p, const float (&v)[W]) {
  Bf16Vec<W> t;
#pragma unroll
  for (int k = 0; k < W / 2; ++k) t.h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<Bf16Vec<W>*>(p) = t;
}

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

// ---- RMSNorms: one kernel per op, each input read once ----------------------------------------------------------
// A row belongs to a group of G threads (8, 16 or 32: within a warp; 128 or 256: across warps, the row's sum of
// squares or dot meeting in shared memory), a block of kThreads holding kThreads / G rows at a time. A thread takes VW
// consecutive elements at a time: 4 (16-byte fp32 / 8-byte bf16 accesses), 8 where the rows are bf16 (the output
// gate's norm: 16-byte accesses, so that a thread has as many bytes in flight as with fp32 rows), 1 where D or a
// pointer does not allow more; NCH such chunks of a row, columns g VW + c G VW: the row stays in registers between
// its sum and its outputs
// (NCH > 0, D <= NCH G VW), so every input is read from memory once. NCH = 0 (D beyond what the registers hold:
// more than 4096 columns, or 1024 with VW = 1): a whole block per row, two passes over it (the second mostly from
// L1/L2). The backward keeps each thread's columns' share of dw in registers across all its rows and adds it to dw
// once per block at the end (straight into dw where the block holds one row at a time: a column then has one owner;
// through a shared-memory copy of dw otherwise); the grid has at most 4 blocks per SM, so there are few atomics.
//
// Measured on one H200 (4.8 TB/s peak; a device copy reaches ~4.2), 16384 tokens, 20 blocks, when bf16 rows moved 8
// bytes an access and the backward read dx after the row's sum (results/logs/nvidia-h200_model_profile.log):
//   rmsnorm_add_fwd   x, delta f32 read, x_out f32 and y bf16 written = 448 MB: 0.121 ms a call (3.7 TB/s)
//   rmsnorm_bwd       x, dy, dx f32 read, dx f32 and its bf16 copy written = 576 MB: 0.187 ms (3.1 TB/s)
//   gated_rmsnorm_fwd [65536, 512] bf16: o, z read, y written = 192 MB: 0.089 ms (2.2 TB/s)
//   gated_rmsnorm_bwd o, z, dy read, d_o, dz written = 320 MB: 0.169 ms (1.9 TB/s)
// Every kernel streams its inputs once and writes its outputs once; the math (a sigmoid per element) is far below
// the memory time. What a warp has in flight is the loads it issues before the row's sum waits on them, and the
// backward's read of dx after the sum was a second wait a row. Hence 16-byte bf16 accesses and dx read with the row.
// Measured on one H100 against the 8-byte version (results/logs/dev/model_norms_profile_ab_nvidia-h100-x1.log): the
// gated norm 4.49 -> 4.12 ms a step at dv 64, 5.42 -> 4.92 at dv 512; the residual backward 9.41 -> 8.82 (predicted:
// -3.3 ms in all). At dv 512 the 8-byte kernel already issued four loads a thread before the sum, the same 96 bytes
// as two 16-byte ones; both hold 104 registers (two blocks an SM), and the row's fp32 copy in them is what limits the
// gated kernels (2.0-2.3 TB/s of the H100's 3.35).
template <int VW, class T>
__device__ __forceinline__ void loadv(const T* p, float (&v)[VW]) {
  if constexpr (VW == 8 && std::is_same_v<T, bf16>) {
    loadw<8>(p, v);
  } else if constexpr (VW == 8) {
    load4(p, reinterpret_cast<float(&)[4]>(v[0]));
    load4(p + 4, reinterpret_cast<float(&)[4]>(v[4]));
  } else if constexpr (VW == 4) {
    load4(p, v);
  } else {
    v[0] = to_f(*p);
  }
}
template <int VW, class T>
__device__ __forceinline__ void storev(T* p, const float (&v)[VW]) {
  if constexpr (VW == 8 && std::is_same_v<T, bf16>) {
    storew<8>(p, v);
  } else if constexpr (VW == 8) {
    store4(p, reinterpret_cast<const float(&)[4]>(v[0]));
    store4(p + 4, reinterpret_cast<const float(&)[4]>(v[4]));
  } else if constexpr (VW == 4) {
    store4(p, v);
  } else {
    store1(p, v[0]);
  }
}

// The sum of x over the G threads of a row group, the same in all of them. Every thread of the block calls it (the
// row loops are block-uniform). G <= 32: butterfly shuffles inside the warp. G > 32 (a multiple of 32): the warps'
// sums through red[parity]; parity flips every call, so one barrier a call suffices (a warp that writes the other
// buffer next cannot pass the next barrier before every warp has read this one).
template <int G>
__device__ __forceinline__ float row_sum(float x, float (*red)[kThreads / 32], int parity) {
  for (int o = (G < 32 ? G : 32) / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  if constexpr (G > 32) {
    const int warp = int(threadIdx.x / 32), first = warp / (G / 32) * (G / 32);
    if (threadIdx.x % 32 == 0) red[parity][warp] = x;
    __syncthreads();
    x = 0.f;
    for (int k = 0; k < G / 32; ++k) x += red[parity][first + k];
  }
  return x;
}

// The block's rows: `base` is block-uniform; a thread's row is base + its group, and a thread whose row is past the
// end takes part in the sums with zeros and stores nothing.
#define SPB_FOR_EACH_ROW_OF_BLOCK(n, G, row, live, parity)                                                        \
  for (int base_ = int(blockIdx.x) * (kThreads / G), parity = 0; base_ < (n);                                    \
       base_ += int(gridDim.x) * (kThreads / G), parity ^= 1)                                                    \
    if (const int row = base_ + int(threadIdx.x) / G; true)                                                       \
      if (const bool live = row < (n); true)

// What the forward normalises: x; o times swish(z) (GLA's output gate, z beside o); x + z (a residual add: the sum,
// fp32, is also written to x_out, the residual stream's next value).
enum NormFwd { kNormPlain, kNormGated, kNormAdd };

template <int G, int VW, int NCH, int MODE, class T, class Z>
__global__ void __launch_bounds__(kThreads) rmsnorm_fwd_kernel(int n, int D, const T* x, const float* w, const Z* z,
                                                               float eps, bf16* y, float* rstd, float* x_out) {
  static_assert(kThreads % G == 0 && (G <= 32 || G % 32 == 0) && (NCH > 0 || G == kThreads), "norm shape");
  constexpr bool GATED = MODE == kNormGated, ADD = MODE == kNormAdd;
  __shared__ float red[2][kThreads / 32];
  const int g = int(threadIdx.x) % G;
  SPB_FOR_EACH_ROW_OF_BLOCK(n, G, row, live, parity) {
    const size_t off = size_t(live ? row : 0) * D;
    float ss = 0.f;
    if constexpr (NCH > 0) {
      float v[NCH][VW], zv[GATED ? NCH : 1][VW];
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (live && j < D) {
          loadv<VW>(x + off + j, v[c]);
          if constexpr (GATED) loadv<VW>(z + off + j, zv[c]);
          if constexpr (ADD) {
            float d[VW];
            loadv<VW>(z + off + j, d);
#pragma unroll
            for (int k = 0; k < VW; ++k) v[c][k] += d[k];
            storev<VW>(x_out + off + j, v[c]);
          }
        } else {
#pragma unroll
          for (int k = 0; k < VW; ++k) v[c][k] = 0.f;
        }
#pragma unroll
        for (int k = 0; k < VW; ++k) ss += v[c][k] * v[c][k];
      }
      const float r = 1.f / sqrtf(row_sum<G>(ss, red, parity) / D + eps);
      if (!live) continue;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (j >= D) continue;
        float wv[VW];
        loadv<VW>(w + j, wv);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          if constexpr (GATED) v[c][k] *= zv[c][k] * sigmoid(zv[c][k]);  // GLA's output gate: times swish(z)
          v[c][k] *= r * wv[k];
        }
        storev<VW>(y + off + j, v[c]);
      }
      if (g == 0) rstd[row] = r;
    } else {
      // Two passes; with ADD the second reads back the sums this thread wrote in the first.
      if (live)
        for (int j = g * VW; j < D; j += G * VW) {
          float v[VW];
          loadv<VW>(x + off + j, v);
          if constexpr (ADD) {
            float d[VW];
            loadv<VW>(z + off + j, d);
            for (int k = 0; k < VW; ++k) v[k] += d[k];
            storev<VW>(x_out + off + j, v);
          }
          for (int k = 0; k < VW; ++k) ss += v[k] * v[k];
        }
      const float r = 1.f / sqrtf(row_sum<G>(ss, red, parity) / D + eps);
      if (!live) continue;
      for (int j = g * VW; j < D; j += G * VW) {
        float v[VW], wv[VW];
        if constexpr (ADD) loadv<VW>(x_out + off + j, v);
        else loadv<VW>(x + off + j, v);
        loadv<VW>(w + j, wv);
        if constexpr (GATED) {
          float zv[VW];
          loadv<VW>(z + off + j, zv);
          for (int k = 0; k < VW; ++k) v[k] *= zv[k] * sigmoid(zv[k]);
        }
        for (int k = 0; k < VW; ++k) v[k] *= r * wv[k];
        storev<VW>(y + off + j, v);
      }
      if (g == 0) rstd[row] = r;
    }
  }
}

// With u = x r (the normalised row), s = swish(z) (1 where not GATED), a = dy s w: dx = r (a - u mean(a u)) (+= where
// ACCUMULATE: the residual stream's gradient; dx_act, where given, receives its bf16 copy for the next products),
// dw += dy s u, dz = dy u w swish'(z), swish'(z) = sigmoid(z) (1 + z (1 - sigmoid(z))); dz's row r at
// (r / heads) dz_ld + (r % heads) D where dz_ld is set (ModelKernels::gated_rmsnorm_bwd), else at r D.
template <int G, int VW, int NCH, bool GATED, bool ACCUMULATE, class T, class DT>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_bwd_kernel(int n, int D, const T* x, const float* w, const T* z, const float* rstd, const DT* dy, T* dx,
                       T* dz, float* dw, bf16* dx_act, int heads, size_t dz_ld) {
  static_assert(kThreads % G == 0 && (G <= 32 || G % 32 == 0) && (NCH > 0 || G == kThreads), "norm shape");
  constexpr bool kSharedDw = kThreads / G > 1 || NCH == 0;  // else each column has one owner in the block
  extern __shared__ float dw_part[];                        // D floats where kSharedDw
  __shared__ float red[2][kThreads / 32];
  if constexpr (kSharedDw) {
    for (int j = threadIdx.x; j < D; j += blockDim.x) dw_part[j] = 0.f;
    __syncthreads();
  }
  const int g = int(threadIdx.x) % G;
  float acc[NCH > 0 ? NCH : 1][VW] = {};
  SPB_FOR_EACH_ROW_OF_BLOCK(n, G, row, live, parity) {
    const size_t off = size_t(live ? row : 0) * D;
    const size_t zoff = GATED && dz_ld ? size_t(live ? row / heads : 0) * dz_ld + size_t(row % heads) * D : off;
    const float r = live ? rstd[row] : 0.f;
    float dot = 0.f;  // sum of a u
    if constexpr (NCH > 0) {
      // Every load of the row first, so that all of them are in flight before the row's dot waits on them: x, dy,
      // z (GATED) and the dx that the result adds to (ACCUMULATE). Then xv = x, dv = dy s, gz = dy swish'(z) (in zv's
      // registers): all that the outputs need.
      float xv[NCH][VW], dv[NCH][VW], zv[GATED ? NCH : 1][VW], ov[ACCUMULATE ? NCH : 1][VW];
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (live && j < D) {
          loadv<VW>(x + off + j, xv[c]);
          loadv<VW>(dy + off + j, dv[c]);
          if constexpr (GATED) loadv<VW>(z + off + j, zv[c]);
          if constexpr (ACCUMULATE) loadv<VW>(dx + off + j, ov[c]);
        } else {
#pragma unroll
          for (int k = 0; k < VW; ++k) xv[c][k] = dv[c][k] = 0.f;
        }
      }
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (!live || j >= D) continue;
        float wv[VW];
        loadv<VW>(w + j, wv);
        if constexpr (GATED) {
#pragma unroll
          for (int k = 0; k < VW; ++k) {
            const float sg = sigmoid(zv[c][k]);
            const float gz = dv[c][k] * sg * (1.f + zv[c][k] * (1.f - sg));
            dv[c][k] *= zv[c][k] * sg;
            zv[c][k] = gz;
          }
        }
#pragma unroll
        for (int k = 0; k < VW; ++k) dot += dv[c][k] * wv[k] * xv[c][k] * r;
      }
      const float mean = row_sum<G>(dot, red, parity) / D;
      if (!live) continue;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (j >= D) continue;
        float wv[VW], out[VW];
        loadv<VW>(w + j, wv);
        if constexpr (GATED) {
          float dzv[VW];
#pragma unroll
          for (int k = 0; k < VW; ++k) dzv[k] = zv[c][k] * xv[c][k] * r * wv[k];
          storev<VW>(dz + zoff + j, dzv);
        }
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          const float u = xv[c][k] * r;
          const float v = r * (dv[c][k] * wv[k] - u * mean);
          out[k] = ACCUMULATE ? ov[c][k] + v : v;
          acc[c][k] += dv[c][k] * u;
        }
        storev<VW>(dx + off + j, out);
        if (dx_act) storev<VW>(dx_act + off + j, out);
      }
    } else {  // one row per block (G = kThreads): column j belongs to one thread, so dw_part needs no atomics
      if (live)
        for (int j = g * VW; j < D; j += G * VW) {
          float xv[VW], dv[VW], wv[VW];
          loadv<VW>(x + off + j, xv);
          loadv<VW>(dy + off + j, dv);
          loadv<VW>(w + j, wv);
          if constexpr (GATED) {
            float zv[VW];
            loadv<VW>(z + off + j, zv);
            for (int k = 0; k < VW; ++k) dv[k] *= zv[k] * sigmoid(zv[k]);
          }
          for (int k = 0; k < VW; ++k) dot += dv[k] * wv[k] * xv[k] * r;
        }
      const float mean = row_sum<G>(dot, red, parity) / D;
      if (!live) continue;
      for (int j = g * VW; j < D; j += G * VW) {
        float xv[VW], dv[VW], wv[VW], out[VW];
        loadv<VW>(x + off + j, xv);
        loadv<VW>(dy + off + j, dv);
        loadv<VW>(w + j, wv);
        if constexpr (GATED) {
          float zv[VW], dzv[VW];
          loadv<VW>(z + off + j, zv);
          for (int k = 0; k < VW; ++k) {
            const float sg = sigmoid(zv[k]);
            dzv[k] = dv[k] * sg * (1.f + zv[k] * (1.f - sg)) * xv[k] * r * wv[k];
            dv[k] *= zv[k] * sg;
          }
          storev<VW>(dz + zoff + j, dzv);
        }
        if constexpr (ACCUMULATE) loadv<VW>(dx + off + j, out);
        for (int k = 0; k < VW; ++k) {
          const float u = xv[k] * r;
          const float v = r * (dv[k] * wv[k] - u * mean);
          out[k] = ACCUMULATE ? out[k] + v : v;
          dw_part[j + k] += dv[k] * u;
        }
        storev<VW>(dx + off + j, out);
        if (dx_act) storev<VW>(dx_act + off + j, out);
      }
    }
  }
  if constexpr (!kSharedDw) {
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      const int j = g * VW + c * G * VW;
      if (j < D)
#pragma unroll
        for (int k = 0; k < VW; ++k) atomicAdd(dw + j + k, acc[c][k]);
    }
  } else {
    if constexpr (NCH > 0)
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (j < D)
#pragma unroll
          for (int k = 0; k < VW; ++k) atomicAdd(&dw_part[j + k], acc[c][k]);
      }
    __syncthreads();
    for (int j = threadIdx.x; j < D; j += blockDim.x) atomicAdd(dw + j, dw_part[j]);
  }
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
__device__ __forceinline__ float logsigmoid(float x) { return fminf(x, 0.f) - log1pf(expf(-fabsf(x))); }
// Groups of 4 elements; `vec` (C % 4 == 0 and aligned pointers) keeps a group inside one row and moves it at once.
__global__ void forget_gate_fwd_kernel(int n, int C, bool vec, const bf16* pre, const float* bias, float normaliser,
                                       bf16* g) {
  const size_t total = size_t(n) * C;
  const float inv = 1.f / normaliser;
  SPB_FOR_EACH_GROUP_OF_4(total, grp) {
    const size_t i = grp * 4;
    if (vec) {
      const int c = int(i % unsigned(C));
      float x[4];
      load4(pre + i, x);
      const float4 b = *reinterpret_cast<const float4*>(bias + c);
      x[0] = logsigmoid(x[0] + b.x) * inv, x[1] = logsigmoid(x[1] + b.y) * inv;
      x[2] = logsigmoid(x[2] + b.z) * inv, x[3] = logsigmoid(x[3] + b.w) * inv;
      store4(g + i, x);
    } else {
      for (size_t k = i; k < total && k < i + 4; ++k) g[k] = to_bf(logsigmoid(to_f(pre[k]) + bias[k % C]) * inv);
    }
  }
}

// The backward with 4 columns a thread (C % 4 == 0, aligned pointers): a warp reads 128 columns of a row with 8-byte
// accesses, the block's 8 warps and the grid's y dimension stride over rows, and dbias is summed in registers, then
// over the block's warps, then by one atomic per column and block.
__global__ void forget_gate_bwd_vec_kernel(int n, int C, const bf16* pre, const bf16* dg, const float* bias,
                                           float normaliser, bf16* dpre, float* dbias) {
  __shared__ float part[kColRows][32 * 4 + 1];
  const int c = (blockIdx.x * 32 + threadIdx.x) * 4;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (c < C) {
    const float4 b = *reinterpret_cast<const float4*>(bias + c);
    const float inv = 1.f / normaliser;
#pragma unroll 4
    for (int r = blockIdx.y * kColRows + threadIdx.y; r < n; r += gridDim.y * kColRows) {
      const size_t i = size_t(r) * C + c;
      float x[4], d[4];
      load4(pre + i, x);
      load4(dg + i, d);
      d[0] = d[0] * inv / (1.f + expf(x[0] + b.x)), d[1] = d[1] * inv / (1.f + expf(x[1] + b.y));
      d[2] = d[2] * inv / (1.f + expf(x[2] + b.z)), d[3] = d[3] * inv / (1.f + expf(x[3] + b.w));
      store4(dpre + i, d);
      for (int k = 0; k < 4; ++k) acc[k] += d[k];
    }
  }
  for (int k = 0; k < 4; ++k) part[threadIdx.y][threadIdx.x * 4 + k] = acc[k];
  __syncthreads();
  const int j = threadIdx.y * 32 + threadIdx.x;  // one of the block's 128 columns
  if (j < 128 && blockIdx.x * 128 + j < C) {
    float s = 0.f;
    for (int k = 0; k < kColRows; ++k) s += part[k][j];
    atomicAdd(dbias + blockIdx.x * 128 + j, s);
  }
}

// dst[:, col : col + cols] = src, in units of U (a uint4 of 8 bf16 where columns and pointers allow it, else one bf16).
template <class U>
__global__ void copy_columns_kernel(int rows, int units, const U* src, size_t dst_units, U* dst) {
  const size_t total = size_t(rows) * units;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / unsigned(units);
    dst[r * dst_units + (i - r * units)] = src[i];
  }
}

__device__ __forceinline__ float swiglu(float a, float b) { return a * sigmoid(a) * b; }
__device__ __forceinline__ void swiglu_grad(float a, float b, float dy, float& da, float& db) {
  const float sg = sigmoid(a);
  da = dy * b * sg * (1.f + a * (1.f - sg));
  db = dy * a * sg;
}

// ab [rows, 2F] holds a row's a then its b; y, dy [rows, F]. A thread takes groups of W outputs; with `vec`
// (F % W == 0, pointers aligned to W bf16) a group lies in one row and each operand moves as one access.
template <int W>
__global__ void swiglu_fwd_kernel(int F, size_t n, bool vec, const bf16* ab, bf16* y) {
  for (size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x, groups = (n + W - 1) / W; g < groups;
       g += size_t(gridDim.x) * blockDim.x) {
    const size_t e = g * W;
    if (vec) {
      const bf16* a = ab + e + (e / F) * F;  // row r starts at 2F r: e + F r
      float av[W], bv[W];
      loadw<W>(a, av);
      loadw<W>(a + F, bv);
#pragma unroll
      for (int k = 0; k < W; ++k) av[k] = swiglu(av[k], bv[k]);
      storew<W>(y + e, av);
    } else {
      for (size_t k = e; k < n && k < e + W; ++k) {
        const bf16* a = ab + k + (k / F) * F;
        y[k] = to_bf(swiglu(to_f(a[0]), to_f(a[F])));
      }
    }
  }
}

template <int W>
__global__ void swiglu_bwd_kernel(int F, size_t n, bool vec, const bf16* ab, const bf16* dy, bf16* dab) {
  for (size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x, groups = (n + W - 1) / W; g < groups;
       g += size_t(gridDim.x) * blockDim.x) {
    const size_t e = g * W;
    if (vec) {
      const size_t ia = e + (e / F) * F;
      float av[W], bv[W], dyv[W], dav[W], dbv[W];
      loadw<W>(ab + ia, av);
      loadw<W>(ab + ia + F, bv);
      loadw<W>(dy + e, dyv);
#pragma unroll
      for (int k = 0; k < W; ++k) swiglu_grad(av[k], bv[k], dyv[k], dav[k], dbv[k]);
      storew<W>(dab + ia, dav);
      storew<W>(dab + ia + F, dbv);
    } else {
      for (size_t k = e; k < n && k < e + W; ++k) {
        const size_t ia = k + (k / F) * F;
        float dak, dbk;
        swiglu_grad(to_f(ab[ia]), to_f(ab[ia + F]), to_f(dy[k]), dak, dbk);
        dab[ia] = to_bf(dak);
        dab[ia + F] = to_bf(dbk);
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
// p_act (nullable): the bf16 copy of the new p, stored in the same pass.
__global__ void adamw_kernel(size_t n, bool vec, AdamParams a, float* p, const float* grad, float* m, float* v,
                             bf16* p_act) {
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
      if (p_act) store4(p_act + i, pv);
    } else {
      for (size_t k = i; k < n && k < i + 4; ++k) {
        adamw_one(a, p[k], grad[k], m[k], v[k]);
        if (p_act) p_act[k] = to_bf(p[k]);
      }
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
    norm_fwd<kNormPlain, float, bf16>(n, D, x, w, nullptr, eps, as_bf16(y), rstd, nullptr, st);
  }
  void rmsnorm_add_fwd(int n, int D, const float* x, const float* delta, const float* w, float eps, float* x_out,
                       void* y, float* rstd, Stream st) override {
    norm_fwd<kNormAdd, float, float>(n, D, x, w, delta, eps, as_bf16(y), rstd, x_out, st);
  }
  void rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                   float* dw, void* dx_act, Stream st) override {
    norm_bwd<false, true, float, float>(n, D, x, w, nullptr, rstd, dy, dx, nullptr, dw, as_bf16(dx_act), st);
  }

  void forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser, void* g,
                       Stream st) override {
    if (n <= 0 || C <= 0) return;
    const bool vec = C % 4 == 0 && aligned(pre, 8) && aligned(bias, 16) && aligned(g, 8);
    forget_gate_fwd_kernel<<<grid((size_t(n) * C + 3) / 4), kThreads, 0, stream(st)>>>(n, C, vec, as_bf16(pre), bias,
                                                                                      normaliser, as_bf16(g));
    SPB_CUDA_LAUNCH();
  }
  void forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser, const void* dg, void* dpre,
                       float* dbias, Stream st) override {
    if (n <= 0 || C <= 0) return;
    if (C % 4 == 0 && aligned(pre, 8) && aligned(dg, 8) && aligned(bias, 16) && aligned(dpre, 8)) {
      // enough blocks to keep ~8 row loads of every warp in flight on every SM
      const int gx = (C + 127) / 128, gy = std::max(1, std::min((n + kColRows - 1) / kColRows, sms_ * 8 / gx));
      forget_gate_bwd_vec_kernel<<<dim3(unsigned(gx), unsigned(gy)), dim3(32, kColRows), 0, stream(st)>>>(
          n, C, as_bf16(pre), as_bf16(dg), bias, normaliser, as_bf16(dpre), dbias);
    } else {
      const ForgetGateBwd op{C, as_bf16(pre), as_bf16(dg), bias, normaliser, as_bf16(dpre)};
      column_sum_kernel<<<column_grid(n, C), dim3(32, kColRows), 0, stream(st)>>>(n, C, op, dbias);
    }
    SPB_CUDA_LAUNCH();
  }

  void gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w, float eps, void* y, float* rstd,
                         Stream st) override {
    norm_fwd<kNormGated, bf16, bf16>(rows, D, as_bf16(o), w, as_bf16(z), eps, as_bf16(y), rstd, nullptr, st);
  }
  void gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w, const float* rstd,
                         const void* dy, void* d_o, void* dz, float* dw, int heads, size_t dz_ld, Stream st) override {
    check_dz_rows(rows, D, heads, dz_ld);
    norm_bwd<true, false, bf16, bf16>(rows, D, as_bf16(o), w, as_bf16(z), rstd, as_bf16(dy), as_bf16(d_o),
                                      as_bf16(dz), dw, nullptr, st, heads, dz_ld);
  }

  void swiglu_fwd(int rows, int F, const void* ab, void* y, Stream st) override {
    const size_t n = size_t(rows) * F;
    if (n == 0) return;
    if (F % 8 == 0 && aligned(ab, 16) && aligned(y, 16)) {
      swiglu_fwd_kernel<8><<<grid((n + 7) / 8), kThreads, 0, stream(st)>>>(F, n, true, as_bf16(ab), as_bf16(y));
    } else {
      const bool vec = F % 4 == 0 && aligned(ab, 8) && aligned(y, 8);
      swiglu_fwd_kernel<4><<<grid((n + 3) / 4), kThreads, 0, stream(st)>>>(F, n, vec, as_bf16(ab), as_bf16(y));
    }
    SPB_CUDA_LAUNCH();
  }
  void swiglu_bwd(int rows, int F, const void* ab, const void* dy, void* dab, Stream st) override {
    const size_t n = size_t(rows) * F;
    if (n == 0) return;
    if (F % 8 == 0 && aligned(ab, 16) && aligned(dy, 16) && aligned(dab, 16)) {
      swiglu_bwd_kernel<8><<<grid((n + 7) / 8), kThreads, 0, stream(st)>>>(F, n, true, as_bf16(ab), as_bf16(dy),
                                                                          as_bf16(dab));
    } else {
      const bool vec = F % 4 == 0 && aligned(ab, 8) && aligned(dy, 8) && aligned(dab, 8);
      swiglu_bwd_kernel<4><<<grid((n + 3) / 4), kThreads, 0, stream(st)>>>(F, n, vec, as_bf16(ab), as_bf16(dy),
                                                                          as_bf16(dab));
    }
    SPB_CUDA_LAUNCH();
  }
  void copy_columns(int rows, int cols, const void* src, int dst_cols, int col, void* dst, Stream st) override {
    if (rows <= 0 || cols <= 0) return;
    bf16* d = as_bf16(dst) + col;
    const size_t total = size_t(rows) * cols;
    if (cols % 8 == 0 && dst_cols % 8 == 0 && aligned(src, 16) && aligned(d, 16))
      copy_columns_kernel<<<grid(total / 8), kThreads, 0, stream(st)>>>(
          rows, cols / 8, static_cast<const uint4*>(src), size_t(dst_cols) / 8, reinterpret_cast<uint4*>(d));
    else
      copy_columns_kernel<<<grid(total), kThreads, 0, stream(st)>>>(rows, cols, as_bf16(src), size_t(dst_cols), d);
    SPB_CUDA_LAUNCH();
  }

  void cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                     void* dlogits, Stream st) override {
    if (n <= 0 || V <= 0) return;
    const cudaStream_t s = stream(st);
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

  void adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1, float beta2, float eps,
             float weight_decay, int step, void* p_act, Stream st) override {
    SPB_CHECK(step >= 1, "adamw: the step counts from 1");
    if (n == 0) return;
    const AdamParams a{lr,
                       beta1,
                       beta2,
                       eps,
                       weight_decay,
                       float(1.0 - std::pow(double(beta1), step)),
                       float(1.0 - std::pow(double(beta2), step))};
    const bool vec = aligned(p, 16) && aligned(grad, 16) && aligned(m, 16) && aligned(v, 16) && aligned(p_act, 8);
    adamw_kernel<<<grid((n + 3) / 4), kThreads, 0, stream(st)>>>(n, vec, a, p, grad, m, v, as_bf16(p_act));
    SPB_CUDA_LAUNCH();
  }

 private:
  static cudaStream_t stream(Stream st) { return static_cast<cudaStream_t>(st.handle); }  // nullptr: the default stream

  // The norm kernels at (G threads per row, VW elements per access, NCH chunks a thread) for this D and these
  // pointers: the smallest group whose registers hold the row with VW = 4 chunks at most 4 per thread, so that
  // even D = 64 keeps all 32 lanes of a warp busy (two rows each) and D = 2048 spreads a row over 4 warps. `wide`
  // (bf16 rows, D % 8 == 0, 16-byte aligned): VW = 8, a 16-byte access each, up to D = 1024.
  template <class T, class Launch>
  static void norm_dispatch(int D, bool vec, bool wide, Launch&& launch) {
    using std::integral_constant;
    using I = int;
    auto shape = [&](auto G, auto VW, auto NCH) { launch(G, VW, NCH); };
    if constexpr (std::is_same_v<T, bf16>) {
      if (wide && D <= 1024) {
        if (D <= 64) shape(integral_constant<I, 8>{}, integral_constant<I, 8>{}, integral_constant<I, 1>{});
        else if (D <= 128) shape(integral_constant<I, 16>{}, integral_constant<I, 8>{}, integral_constant<I, 1>{});
        else if (D <= 512) shape(integral_constant<I, 32>{}, integral_constant<I, 8>{}, integral_constant<I, 2>{});
        else shape(integral_constant<I, 32>{}, integral_constant<I, 8>{}, integral_constant<I, 4>{});
        return;
      }
    }
    if (vec) {
      if (D <= 64) shape(integral_constant<I, 16>{}, integral_constant<I, 4>{}, integral_constant<I, 1>{});
      else if (D <= 128) shape(integral_constant<I, 32>{}, integral_constant<I, 4>{}, integral_constant<I, 1>{});
      else if (D <= 512) shape(integral_constant<I, 32>{}, integral_constant<I, 4>{}, integral_constant<I, 4>{});
      else if (D <= 2048) shape(integral_constant<I, 128>{}, integral_constant<I, 4>{}, integral_constant<I, 4>{});
      else if (D <= 4096) shape(integral_constant<I, 256>{}, integral_constant<I, 4>{}, integral_constant<I, 4>{});
      else shape(integral_constant<I, 256>{}, integral_constant<I, 4>{}, integral_constant<I, 0>{});
    } else {
      if (D <= 128) shape(integral_constant<I, 32>{}, integral_constant<I, 1>{}, integral_constant<I, 4>{});
      else if (D <= 1024) shape(integral_constant<I, 256>{}, integral_constant<I, 1>{}, integral_constant<I, 4>{});
      else shape(integral_constant<I, 256>{}, integral_constant<I, 1>{}, integral_constant<I, 0>{});
    }
  }
  template <int MODE, class T, class Z>
  void norm_fwd(int n, int D, const T* x, const float* w, const Z* z, float eps, bf16* y, float* rstd, float* x_out,
                Stream st) {
    if (n <= 0 || D <= 0) return;
    const bool vec = D % 4 == 0 && aligned(x, 16) && aligned(w, 16) && (!z || aligned(z, 16)) && aligned(y, 8) &&
                     (!x_out || aligned(x_out, 16));
    const bool wide = vec && D % 8 == 0 && aligned(y, 16);
    norm_dispatch<T>(D, vec, wide, [&](auto G, auto VW, auto NCH) {
      auto kernel = rmsnorm_fwd_kernel<decltype(G)::value, decltype(VW)::value, decltype(NCH)::value, MODE, T, Z>;
      kernel<<<norm_blocks(n, kThreads / decltype(G)::value, resident(kernel, 0, 8)), kThreads, 0, stream(st)>>>(
          n, D, x, w, z, eps, y, rstd, x_out);
      SPB_CUDA_LAUNCH();
    });
  }
  template <bool GATED, bool ACCUMULATE, class T, class DT>
  void norm_bwd(int n, int D, const T* x, const float* w, const T* z, const float* rstd, const DT* dy, T* dx, T* dz,
                float* dw, bf16* dx_act, Stream st, int heads = 1, size_t dz_ld = 0) {
    if (n <= 0 || D <= 0) return;
    const bool vec = D % 4 == 0 && aligned(x, 16) && aligned(w, 16) && (!z || aligned(z, 16)) && aligned(dy, 16) &&
                     aligned(dx, 16) && (!dz || aligned(dz, 16)) && (!dx_act || aligned(dx_act, 8)) &&
                     dz_ld % 8 == 0;
    const bool wide = vec && D % 8 == 0 && (!dx_act || aligned(dx_act, 16));
    norm_dispatch<T>(D, vec, wide, [&](auto G, auto VW, auto NCH) {
      const int rows_per_block = kThreads / decltype(G)::value;
      const bool shared_dw = rows_per_block > 1 || decltype(NCH)::value == 0;
      SPB_CHECK(!shared_dw || size_t(D) * 4 <= 48 * 1024,
                "RMSNorm backward: D = " + std::to_string(D) +
                    " exceeds the 12288 columns whose weight gradient a block sums in shared memory");
      // At most 4 blocks per SM (one atomicAdd of dw per column and block), and no more than fit at once.
      auto kernel =
          rmsnorm_bwd_kernel<decltype(G)::value, decltype(VW)::value, decltype(NCH)::value, GATED, ACCUMULATE, T, DT>;
      const size_t smem = shared_dw ? size_t(D) * 4 : 0;
      kernel<<<norm_blocks(n, rows_per_block, resident(kernel, smem, 4)), kThreads, smem, stream(st)>>>(
          n, D, x, w, z, rstd, dy, dx, dz, dw, dx_act, heads, dz_ld);
      SPB_CUDA_LAUNCH();
    });
  }
  // How many blocks of `kernel` (kThreads each, smem bytes of dynamic shared memory) an SM holds at once, at most cap
  // (asked of the runtime once per kernel and size).
  template <class Kernel>
  int resident(Kernel* kernel, size_t smem, int cap) {
    int& b = resident_[{reinterpret_cast<const void*>(kernel), smem}];
    if (b == 0) {
      SPB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kThreads, smem));
      b = std::max(1, b);
    }
    return std::min(b, cap);
  }
  // Blocks for n rows, rows_per_block at a time, at most per_sm per SM; as many as make every block loop the same
  // number of times (no block with one row group more than the others at the end).
  unsigned norm_blocks(int n, int rows_per_block, int per_sm) const {
    const size_t units = (size_t(n) + rows_per_block - 1) / rows_per_block;
    const size_t max_blocks = std::max<size_t>(1, size_t(sms_) * per_sm);
    const size_t iters = (units + max_blocks - 1) / max_blocks;
    return unsigned(std::max<size_t>(1, (units + iters - 1) / iters));
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
  std::map<std::pair<const void*, size_t>, int> resident_;  // resident(): blocks per SM by (kernel, shared memory)
  cublasHandle_t cublas_ = nullptr;
  std::unordered_map<cudaStream_t, void*> workspaces_;
};

}  // namespace

std::unique_ptr<ModelKernels> make_cuda_model_kernels() { return std::make_unique<CudaModelKernels>(); }

}  // namespace spb
