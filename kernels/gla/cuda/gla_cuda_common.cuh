// Device building blocks shared by the CUDA GLA stages: tensor-core fragments (mma.sync), asynchronous tile copies
// and small conversions. Internal to kernels/gla/cuda.
//
// Why mma.sync m16n8k8 tf32 for most products: every product of the GLA stages has at least one operand that is not
// exactly a bf16 number (q*exp(b), k*exp(B-b), the fp32 states, the fp32 score matrices). Rounding such an operand to
// bf16 costs ~1.7e-3 relative error per product, and the outputs are themselves rounded to bf16 (another ~1.7e-3), so
// chaining two or three bf16-rounded products leaves little of the 4e-3 / 5e-3 budget of DESIGN §7. tf32 (10-bit
// mantissa, rounded to nearest: tf32_bits) costs ~2e-4 per operand. Where the other operand IS exact bf16 (v, do)
// and the fp32 one is a score matrix, we use bf16 m16n8k16 on a hi/lo split of the fp32 operand instead (two bf16
// mmas = 16 mantissa bits, same cost as one tf32 k16 step, and the bf16 operand can come from ldmatrix).
//
// The k-permutation trick: for an m16n8k8 tf32 mma, thread (g = lane/4, t = lane%4) supplies A[g][t], A[g+8][t],
// A[g][t+4], A[g+8][t+4] and B[t][g], B[t+4][g]. The sum over k does not care about the order of k, so we map "slot t"
// to k = 2t and "slot t+4" to k = 2t+1 in BOTH operands. Then a thread's A values are pairs of adjacent k (one 32-bit
// load of two bf16, or one float2), B values from a [n][k] buffer are adjacent too, and an fp32 accumulator fragment
// (which holds columns 2t, 2t+1) is directly an A fragment of the next product. Every fragment helper below uses it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#ifndef SPB_GLA_EMU
#include "kernels/cuda/ptx.cuh"
#endif

namespace spb {
namespace gla_cuda {

using bf16 = __nv_bfloat16;
constexpr int kC = 64;  // chunk length (== spb::kChunk)

// Above this in-sub-chunk decay (sum of -g over <= 15 tokens, per feature) the factorised form of the diagonal
// 16x16 blocks, q*exp(b - b_ref) times k*exp(b_ref - b) with one operand >= 1, is no longer used: the kernels compute
// those blocks exactly, element by element (exp(40) ~ 2e17 keeps every factor a normal fp32/tf32 number with room).
constexpr float kMaxSubchunkDecay = 40.f;

#ifndef SPB_GLA_EMU  // tools/emu: a CPU emulation of these instructions, for desk checks without a GPU
// fp32 -> tf32 (the low 13 bits zero), rounded to nearest. sm_90 converts in one instruction (cvt.rn, ties to even:
// F2FP.TF32); sm_80 has only cvt.rna (ties away from zero), which ptxas builds from three (a NaN / Inf test, an add
// and a mask). Both keep NaN and Inf. The choice matters: the kernels convert every state element they multiply.
__device__ __forceinline__ uint32_t tf32_bits(float x) {
  uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#endif
  return r;
}
#endif
__device__ __forceinline__ float tf32_round(float x) { return __uint_as_float(tf32_bits(x)); }

// A word another stream's kernel sets once what it guards is written (GlaKernels::signal_ready): read with acquire
// semantics at GPU scope, so that loads after it see that data; `seen` compares epochs modulo 2^32.
#ifndef SPB_GLA_EMU
using ptx::ld_acquire_gpu;  // kernels/cuda/ptx.cuh
using ptx::st_release_gpu;
// A load that bypasses L1 (which is not coherent with other SMs' writes): data published by another kernel.
__device__ __forceinline__ float ld_cg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ float4 ld_cg(const float4* p) { return __ldcg(p); }
#else
inline uint32_t ld_acquire_gpu(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void st_release_gpu(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline float ld_cg(const float* p) { return *static_cast<const volatile float*>(p); }
inline float4 ld_cg(const float4* p) {
  const volatile float* f = reinterpret_cast<const volatile float*>(p);
  return make_float4(f[0], f[1], f[2], f[3]);
}
#endif
__device__ __forceinline__ bool epoch_seen(uint32_t word, uint32_t epoch) { return int32_t(word - epoch) >= 0; }
// p, hidden from the optimiser: addresses formed from it in a rarely taken branch of a loop are then not hoisted out of
// the loop and kept in registers for its whole length.
#ifndef SPB_GLA_EMU
template <class T>
__device__ __forceinline__ T* opaque(T* p) {
  asm volatile("" : "+l"(p));
  return p;
}
#else
template <class T>
inline T* opaque(T* p) {
  asm volatile("" : "+r"(p));
  return p;
}
#endif

// exp on the SFU without the subnormal fix-up of __expf (ex2.approx.ftz: 2 instructions instead of 5; results agree
// with __expf except where __expf would return a subnormal, < 1.2e-38, which becomes 0).
#ifndef SPB_GLA_EMU
__device__ __forceinline__ float exp_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
  return y;
}
#else
inline float exp_ftz(float x) { return std::exp(x); }
#endif

// A 32-bit word holding two bf16 (element 0 in the low half): each as fp32 (exact; also exact tf32 bits).
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ uint32_t bits_lo(uint32_t w) { return w << 16; }
__device__ __forceinline__ uint32_t bits_hi(uint32_t w) { return w & 0xffff0000u; }
__device__ __forceinline__ float bf_at(const bf16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ uint32_t bf_bits_at(const bf16* p) {
  return uint32_t(*reinterpret_cast<const unsigned short*>(p)) << 16;
}
__device__ __forceinline__ uint32_t ld32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ float2 ldf2(const float* p) { return *reinterpret_cast<const float2*>(p); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// One, two or four consecutive elements of a state as fp32, from and to fp32 or bf16 memory (the chunk states hs /
// dhs are bf16: widened exactly on the load, rounded to nearest even on the store). Two and four: one access of their
// size (8 or 16 bytes fp32, 4 or 8 bytes bf16), so the address must be aligned to it.
__device__ __forceinline__ float ld_f1(const float* p) { return *p; }
__device__ __forceinline__ float ld_f1(const bf16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st_f1(float* p, float v) { *p = v; }
__device__ __forceinline__ void st_f1(bf16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ float4 ld_f4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 ld_f4(const bf16* p) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  return make_float4(bf_lo(w.x), bf_hi(w.x), bf_lo(w.y), bf_hi(w.y));
}
__device__ __forceinline__ void st_f2(float* p, float v0, float v1) {
  *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
}
__device__ __forceinline__ void st_f2(bf16* p, float v0, float v1) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
}
__device__ __forceinline__ void st_f4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void st_f4(bf16* p, float4 v) {
  *reinterpret_cast<uint2*>(p) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
}
// x = hi + lo with hi, lo bf16 pairs: |x - hi - lo| <= 2^-16 |x|.
__device__ __forceinline__ void split_bf16(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  const float2 hf = __bfloat1622float2(h);
  hi = *reinterpret_cast<uint32_t*>(&h);
  lo = pack_bf16(x0 - hf.x, x1 - hf.y);
}

#ifndef SPB_GLA_EMU
__device__ __forceinline__ void mma_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Four transposed 8x8 bf16 matrices: lane L gives the address of row L%8 of matrix L/8.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#endif  // SPB_GLA_EMU

template <typename T>
__device__ __forceinline__ T zero_of();
template <>
__device__ __forceinline__ float zero_of<float>() {
  return 0.f;
}
template <>
__device__ __forceinline__ bf16 zero_of<bf16>() {
  return __float2bfloat16(0.f);
}

// Copies a tile of R rows x CC columns from global memory (element (r, c) at g[r * gstride + c]) to shared memory
// (s[r * sstride + c]); rows >= rmax and columns >= cmax become zeros, so partial chunks and sizes that are not
// multiples of the tile need no other masking of the loads. 16-byte cp.async where `vec` (the tensor's pointer and
// row stride are 16-byte aligned) and the 16 bytes are all in range; element copies otherwise (odd sizes).
template <typename T, int R, int CC, int NTH>
__device__ __noinline__ void load_tile_edge(T* s, int sstride, const T* g, long gstride, int rmax, int cmax,
                                            bool vec) {
  constexpr int E = 16 / int(sizeof(T));
  constexpr int CV = CC / E;
  for (int idx = threadIdx.x; idx < R * CV; idx += NTH) {
    const int r = idx / CV, c = (idx - r * CV) * E;
    T* d = s + r * sstride + c;
    if (r < rmax && c < cmax) {
      const T* src = g + r * gstride + c;
      if (vec && c + E <= cmax) {
        cp_async16(d, src);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) d[e] = (c + e < cmax) ? src[e] : zero_of<T>();
      }
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}
// The common case inline and straight-line (whole tile in range, 16-byte aligned); edges out of line.
template <typename T, int R, int CC, int NTH>
__device__ __forceinline__ void load_tile(T* s, int sstride, const T* g, long gstride, int rmax, int cmax, bool vec) {
  constexpr int E = 16 / int(sizeof(T));
  static_assert(CC % E == 0, "tile width must be a multiple of 16 bytes");
  constexpr int CV = CC / E;
  if (vec && rmax >= R && cmax >= CC) {
#pragma unroll
    for (int i = 0; i < (R * CV + NTH - 1) / NTH; ++i) {
      const int idx = threadIdx.x + i * NTH;
      if ((R * CV) % NTH == 0 || idx < R * CV) {
        const int r = idx / CV, c = (idx % CV) * E;
        cp_async16(s + r * sstride + c, g + r * gstride + c);
      }
    }
  } else {
    load_tile_edge<T, R, CC, NTH>(s, sstride, g, gstride, rmax, cmax, vec);
  }
}

// The reverse of load_tile: rows < rmax, columns < cmax of a shared-memory tile to global memory, 16 bytes at a time
// where `vec` (pointer and row stride 16-byte aligned) and the tile is whole; element stores otherwise (out of line).
template <typename T, int R, int CC, int NTH>
__device__ __noinline__ void store_tile_edge(T* g, long gstride, const T* s, int sstride, int rmax, int cmax,
                                             bool vec) {
  constexpr int E = 16 / int(sizeof(T));
  constexpr int CV = CC / E;
  for (int idx = threadIdx.x; idx < R * CV; idx += NTH) {
    const int r = idx / CV, c = (idx - r * CV) * E;
    if (r >= rmax || c >= cmax) continue;
    if (vec && c + E <= cmax) {
      *reinterpret_cast<uint4*>(g + r * gstride + c) = *reinterpret_cast<const uint4*>(s + r * sstride + c);
    } else {
      for (int e = 0; e < E && c + e < cmax; ++e) g[r * gstride + c + e] = s[r * sstride + c + e];
    }
  }
}
template <typename T, int R, int CC, int NTH>
__device__ __forceinline__ void store_tile(T* g, long gstride, const T* s, int sstride, int rmax, int cmax, bool vec) {
  constexpr int E = 16 / int(sizeof(T));
  static_assert(CC % E == 0 && (R * (CC / E)) % NTH == 0, "whole 16-byte pieces, the same count per thread");
  constexpr int CV = CC / E;
  if (vec && rmax >= R && cmax >= CC) {
#pragma unroll
    for (int i = 0; i < R * CV / NTH; ++i) {
      const int idx = threadIdx.x + i * NTH;
      const int r = idx / CV, c = (idx % CV) * E;
      *reinterpret_cast<uint4*>(g + r * gstride + c) = *reinterpret_cast<const uint4*>(s + r * sstride + c);
    }
  } else {
    store_tile_edge<T, R, CC, NTH>(g, gstride, s, sstride, rmax, cmax, vec);
  }
}

// Stores two adjacent fp32 / bf16 values of row `row` at columns col, col+1 (each only if < ncols); one wide store
// where the address allows it.
__device__ __forceinline__ void store2(float* p, int col, int ncols, float v0, float v1) {
  if (col + 1 < ncols && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
  } else {
    if (col < ncols) p[0] = v0;
    if (col + 1 < ncols) p[1] = v1;
  }
}
__device__ __forceinline__ void store2(bf16* p, int col, int ncols, float v0, float v1) {
  if (col + 1 < ncols && (reinterpret_cast<uintptr_t>(p) & 3) == 0) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
  } else {
    if (col < ncols) p[0] = __float2bfloat16(v0);
    if (col + 1 < ncols) p[1] = __float2bfloat16(v1);
  }
}

// SMs of the current device (132 if it cannot be asked), looked up once: the launch plans size grids in waves.
inline int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) !=
                                                  cudaSuccess)
      v = 132;
    return v > 0 ? v : 132;
  }();
  return n;
}

}  // namespace gla_cuda
}  // namespace spb
