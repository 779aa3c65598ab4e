// The model's RMSNorms, bf16 activations and fp32 math inside every kernel:
//   rmsnorm_(add_)fwd/bwd    one kernel each, the row read once (in registers) by 16..256 threads; dw summed per
//                            block; the residual add in the forward's read
//   gated_rmsnorm_fwd/bwd    per-head RMSNorm times swish(z): the same kernels (two rows per warp at dv = 64)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "model/cuda/model_cuda_common.cuh"
#include "runtime/error.h"

namespace spb {
namespace model_cuda {
namespace {

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
// Every kernel streams its inputs once and writes its outputs once. What a warp has in flight is the loads it issues
// before the row's sum waits on them, and the backward's read of dx after the sum was a second wait a row. Hence
// 16-byte bf16 accesses and dx read with the row.
// Measured on one H100 against the 8-byte version (results/logs/dev/model_norms_profile_ab_nvidia-h100-x1.log): the
// gated norm 4.49 -> 4.12 ms a step at dv 64, 5.42 -> 4.92 at dv 512; the residual backward 9.41 -> 8.82 (predicted:
// -3.3 ms in all). At dv 512 the 8-byte kernel already issued four loads a thread before the sum, the same 96 bytes
// as two 16-byte ones; both hold 104 registers (two blocks an SM), and the row's fp32 copy in them is what limits the
// gated kernels (2.0-2.3 TB/s of the H100's 3.35). Hence the rows kept as loaded (Raw, bf16 pairs), the backward at
// three blocks an SM and the sigmoid's fast form (fast_sigmoid): at dv 512 on one H200, 16384 tokens, 6898ea2 against
// 9fd089f on one machine, one binary after the other (results/logs/dev/model_bf16_delta_nvidia-h200.log;
// model/NOTES.md, "Decisions"), the forward 0.078 -> 0.057 ms a call (2.6 -> 3.5 TB/s), the backward 0.164 -> 0.125
// (2.0 -> 2.7 TB/s); at dv 64 the forward 1.56 -> 1.17 ms a step, the backward level.
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

// The gated norm's swish: __expf and __fdividef (a few ulp; exp(-x) = inf for x < -88 gives 0), far below the bf16
// rounding of the outputs, and about a quarter of the instructions of expf and an IEEE division. Measured on one H200
// with the Raw rows below (6898ea2 against 9fd089f on one machine): the gated norm 1.55 + 3.28 -> 1.14 + 2.50 ms a
// step at dv 512. SwiGLU keeps model_cuda_common.cuh's sigmoid: with this one its backward took 5.63 -> 6.51 ms.
__device__ __forceinline__ float fast_sigmoid(float x) { return __fdividef(1.f, 1.f + __expf(-x)); }

// A thread's VW elements of a row as loaded, one access: bf16 rows stay bf16 in registers (half the registers of
// their fp32 values) and are unpacked at each use. The gated norm's backward holds three rows' chunks at dv = 512;
// unpacked, they took 112 registers, two blocks an SM.
template <int VW, class T>
struct alignas(sizeof(T) * VW) Raw {  // fp32
  T v[VW];
};
template <int VW>
struct alignas(2 * VW) Raw<VW, bf16> {  // bf16 pairs, each one 32-bit register (a lone bf16 where VW = 1)
  std::conditional_t<VW == 1, bf16, __nv_bfloat162> h[VW == 1 ? 1 : VW / 2];
};
template <int VW, class T>
__device__ __forceinline__ void load_raw(const T* p, Raw<VW, T>& r) {
  r = *reinterpret_cast<const Raw<VW, T>*>(p);
}
template <int VW, class T>
__device__ __forceinline__ void unpack(const Raw<VW, T>& r, float (&v)[VW]) {
  if constexpr (!std::is_same_v<T, bf16>) {
#pragma unroll
    for (int k = 0; k < VW; ++k) v[k] = r.v[k];
  } else if constexpr (VW == 1) {
    v[0] = to_f(r.h[0]);
  } else {
#pragma unroll
    for (int k = 0; k < VW / 2; ++k) {
      const float2 f = __bfloat1622float2(r.h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
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
      static_assert(!ADD || std::is_same_v<T, float>, "the residual add keeps its fp32 sum as the row");
      Raw<VW, T> xr[NCH];
      Raw<VW, Z> zr[GATED ? NCH : 1];
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        xr[c] = {};
        if (live && j < D) {
          load_raw(x + off + j, xr[c]);
          if constexpr (GATED) load_raw(z + off + j, zr[c]);
          if constexpr (ADD) {
            float d[VW];
            loadv<VW>(z + off + j, d);
#pragma unroll
            for (int k = 0; k < VW; ++k) xr[c].v[k] += d[k];
            storev<VW>(x_out + off + j, xr[c].v);
          }
        }
        float v[VW];
        unpack(xr[c], v);
#pragma unroll
        for (int k = 0; k < VW; ++k) ss += v[k] * v[k];
      }
      const float r = 1.f / sqrtf(row_sum<G>(ss, red, parity) / D + eps);
      if (!live) continue;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (j >= D) continue;
        float v[VW], wv[VW];
        unpack(xr[c], v);
        loadv<VW>(w + j, wv);
        if constexpr (GATED) {  // GLA's output gate: times swish(z)
          float zv[VW];
          unpack(zr[c], zv);
#pragma unroll
          for (int k = 0; k < VW; ++k) v[k] *= zv[k] * fast_sigmoid(zv[k]);
        }
#pragma unroll
        for (int k = 0; k < VW; ++k) v[k] *= r * wv[k];
        storev<VW>(y + off + j, v);
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
          for (int k = 0; k < VW; ++k) v[k] *= zv[k] * fast_sigmoid(zv[k]);
        }
        for (int k = 0; k < VW; ++k) v[k] *= r * wv[k];
        storev<VW>(y + off + j, v);
      }
      if (g == 0) rstd[row] = r;
    }
  }
}

// dv = dy s, s = swish(z) (1 where not GATED), and where GATED gz = dy swish'(z), swish'(z) = sigmoid(z) (1 + z (1 -
// sigmoid(z))), from one chunk's loaded dy and z.
template <bool GATED, int VW, class DT, class T>
__device__ __forceinline__ void gated_grad(const Raw<VW, DT>& dr, const Raw<VW, T>& zr, float (&dv)[VW],
                                           float (&gz)[VW]) {
  unpack(dr, dv);
  if constexpr (GATED) {
    float zv[VW];
    unpack(zr, zv);
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      const float sg = fast_sigmoid(zv[k]);
      gz[k] = dv[k] * sg * (1.f + zv[k] * (1.f - sg));
      dv[k] *= zv[k] * sg;
    }
  }
}

// With u = x r (the normalised row), s = swish(z) (1 where not GATED), a = dy s w: dx = r (a - u mean(a u)) (+= where
// ACCUMULATE: the residual stream's gradient; dx_act, where given, receives its bf16 copy for the next products),
// dw += dy s u, dz = dy u w swish'(z), swish'(z) = sigmoid(z) (1 + z (1 - sigmoid(z))); dz's row r at
// (r / heads) dz_ld + (r % heads) D where dz_ld is set (ModelKernels::gated_rmsnorm_bwd), else at r D.
// The gated norm's backward at dv = 512 (three bf16 rows' chunks of 2 x 8 a thread and dw's 16 sums) is held to 80
// registers, three blocks an SM (100 unbounded: two), with no spills.
template <int G, int VW, int NCH, bool GATED, bool ACCUMULATE, class T, class DT>
__global__ void __launch_bounds__(kThreads, GATED && VW == 8 && NCH == 2 ? 3 : 1)
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
      // z (GATED) and the dx that the result adds to (ACCUMULATE), kept as loaded (Raw). Each pass over the chunks
      // then makes xv = x, dv = dy s and gz = dy swish'(z) from them (gated_grad): the sigmoids twice a row, cheaper
      // than the registers that would keep them.
      Raw<VW, T> xr[NCH], zr[GATED ? NCH : 1], orow[ACCUMULATE ? NCH : 1];
      Raw<VW, DT> dr[NCH];
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (live && j < D) {
          load_raw(x + off + j, xr[c]);
          load_raw(dy + off + j, dr[c]);
          if constexpr (GATED) load_raw(z + off + j, zr[c]);
          if constexpr (ACCUMULATE) load_raw(dx + off + j, orow[c]);
        }
      }
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (!live || j >= D) continue;
        float xv[VW], dv[VW], gz[VW], wv[VW];
        unpack(xr[c], xv);
        gated_grad<GATED>(dr[c], zr[GATED ? c : 0], dv, gz);
        loadv<VW>(w + j, wv);
#pragma unroll
        for (int k = 0; k < VW; ++k) dot += dv[k] * wv[k] * xv[k] * r;
      }
      const float mean = row_sum<G>(dot, red, parity) / D;
      if (!live) continue;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int j = g * VW + c * G * VW;
        if (j >= D) continue;
        float xv[VW], dv[VW], gz[VW], wv[VW], out[VW];
        unpack(xr[c], xv);
        gated_grad<GATED>(dr[c], zr[GATED ? c : 0], dv, gz);
        loadv<VW>(w + j, wv);
        if constexpr (GATED) {
          float dzv[VW];
#pragma unroll
          for (int k = 0; k < VW; ++k) dzv[k] = gz[k] * xv[k] * r * wv[k];
          storev<VW>(dz + zoff + j, dzv);
        }
        float ov[VW] = {};
        if constexpr (ACCUMULATE) unpack(orow[c], ov);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          const float u = xv[k] * r;
          const float v = r * (dv[k] * wv[k] - u * mean);
          out[k] = ov[k] + v;
          acc[c][k] += dv[k] * u;
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
            for (int k = 0; k < VW; ++k) dv[k] *= zv[k] * fast_sigmoid(zv[k]);
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
            const float sg = fast_sigmoid(zv[k]);
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

// The norm kernels at (G threads per row, VW elements per access, NCH chunks a thread) for this D and these
// pointers: the smallest group whose registers hold the row with VW = 4 chunks at most 4 per thread, so that
// even D = 64 keeps all 32 lanes of a warp busy (two rows each) and D = 2048 spreads a row over 4 warps. `wide`
// (bf16 rows, D % 8 == 0, 16-byte aligned): VW = 8, a 16-byte access each, up to D = 1024.
template <class T, class Launch>
void norm_dispatch(int D, bool vec, bool wide, Launch&& launch) {
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
void norm_fwd(LaunchGrid& l, int n, int D, const T* x, const float* w, const Z* z, float eps, bf16* y, float* rstd,
              float* x_out, cudaStream_t s) {
  if (n <= 0 || D <= 0) return;
  const bool vec = D % 4 == 0 && aligned(x, 16) && aligned(w, 16) && (!z || aligned(z, 16)) && aligned(y, 8) &&
                   (!x_out || aligned(x_out, 16));
  const bool wide = vec && D % 8 == 0 && aligned(y, 16);
  norm_dispatch<T>(D, vec, wide, [&](auto G, auto VW, auto NCH) {
    auto kernel = rmsnorm_fwd_kernel<decltype(G)::value, decltype(VW)::value, decltype(NCH)::value, MODE, T, Z>;
    kernel<<<l.norm_blocks(n, kThreads / decltype(G)::value, l.resident(kernel, 0, 8)), kThreads, 0, s>>>(
        n, D, x, w, z, eps, y, rstd, x_out);
    SPB_CUDA_LAUNCH();
  });
}
template <bool GATED, bool ACCUMULATE, class T, class DT>
void norm_bwd(LaunchGrid& l, int n, int D, const T* x, const float* w, const T* z, const float* rstd, const DT* dy,
              T* dx, T* dz, float* dw, bf16* dx_act, cudaStream_t s, int heads = 1, size_t dz_ld = 0) {
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
    kernel<<<l.norm_blocks(n, rows_per_block, l.resident(kernel, smem, 4)), kThreads, smem, s>>>(
        n, D, x, w, z, rstd, dy, dx, dz, dw, dx_act, heads, dz_ld);
    SPB_CUDA_LAUNCH();
  });
}

}  // namespace

void launch_rmsnorm_fwd(LaunchGrid& l, int n, int D, const float* x, const float* w, float eps, void* y, float* rstd,
                        cudaStream_t s) {
  norm_fwd<kNormPlain, float, bf16>(l, n, D, x, w, nullptr, eps, as_bf16(y), rstd, nullptr, s);
}
void launch_rmsnorm_add_fwd(LaunchGrid& l, int n, int D, const float* x, const float* delta, const float* w, float eps,
                            float* x_out, void* y, float* rstd, cudaStream_t s) {
  norm_fwd<kNormAdd, float, float>(l, n, D, x, w, delta, eps, as_bf16(y), rstd, x_out, s);
}
void launch_rmsnorm_bwd(LaunchGrid& l, int n, int D, const float* x, const float* w, const float* rstd, const float* dy,
                        float* dx, float* dw, void* dx_act, cudaStream_t s) {
  norm_bwd<false, true, float, float>(l, n, D, x, w, nullptr, rstd, dy, dx, nullptr, dw, as_bf16(dx_act), s);
}

void launch_gated_rmsnorm_fwd(LaunchGrid& l, int rows, int D, const void* o, const void* z, const float* w, float eps,
                              void* y, float* rstd, cudaStream_t s) {
  norm_fwd<kNormGated, bf16, bf16>(l, rows, D, as_bf16(o), w, as_bf16(z), eps, as_bf16(y), rstd, nullptr, s);
}
void launch_gated_rmsnorm_bwd(LaunchGrid& l, int rows, int D, const void* o, const void* z, const float* w,
                              const float* rstd, const void* dy, void* d_o, void* dz, float* dw, int heads,
                              size_t dz_ld, cudaStream_t s) {
  norm_bwd<true, false, bf16, bf16>(l, rows, D, as_bf16(o), w, as_bf16(z), rstd, as_bf16(dy), as_bf16(d_o),
                                    as_bf16(dz), dw, nullptr, s, heads, dz_ld);
}

}  // namespace model_cuda
}  // namespace spb
