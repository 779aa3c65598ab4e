// What the CUDA Gated DeltaNet kernels share: the problem's sizes and scratch pointers, the block product (block_gemm)
// that every kernel builds its chunk products from, and the bf16 loads. Correct first and emulator-friendly
// (tools/emu/cuda_emu.h: plain CUDA, mma.sync, dynamic shared memory only, no atomics): every product stages
// shared-memory tiles through accessors (lambdas) that fold in the gates, the betas and the masks of the chunk, so no
// kernel materialises a scaled copy of q, k, v or do, and multiplies them on tensor cores in 3xTF32 (about fp32's
// accuracy) or, built with SPB_GDN_SIMT=1, in fp32 FMAs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace spb {
namespace gdn_cuda {

constexpr int kChunk = 64;     // tokens per chunk (kGdnChunk of the CPU stages)
constexpr int kThreads = 256;  // every kernel runs blocks of 256 threads (block_gemm's 16 x 16 thread grid)
constexpr int kStateCols = 16; // the columns of a state one recurrence block owns (columns are independent)
constexpr int kMaxDim = 128;   // dk and dv: multiples of 16 up to this (the gradient kernel's shared-memory plan)

// The sizes every kernel gets: tokens T, heads H, dk = K, dv = V, chunks NC.
struct Dims {
  int B, T, H, K, V, NC;
};

// The scratch a pass uses, fp32, chunk-major per (b, h): bhc = (b * H + h) * NC + c.
//   gam [bhc][64]        in-chunk cumsum of g (rows past the chunk's end repeat its last value)
//   Tm  [bhc][64][64]    (I + L)^-1, lower triangular, unit diagonal
//   W   [bhc][64][K]     T (beta e^gamma K);      U0 [bhc][64][V]  T (beta V)
//   Hs  [bh][NC+1][K][V] the state entering each chunk, and after the last (= ht)
//   U   [bhc][64][V]     the written values U0 - W h[n] (v_new)
//   dUo [bhc][64][V]     s P^T dO, the output's share of dU (P the decayed, causal q k^T)
//   dHs [bhc][K][V]      the gradient of the state leaving chunk c
//   dU  [bhc][64][V]     the full gradient of U
struct Scratch {
  float *gam = nullptr, *Tm = nullptr, *W = nullptr, *U0 = nullptr, *Hs = nullptr, *U = nullptr;
  float *dUo = nullptr, *dHs = nullptr, *dU = nullptr;
};

__host__ __device__ inline size_t bhc_of(const Dims& d, int b, int h, int c) {
  return (size_t(b) * d.H + h) * d.NC + c;
}
// Element (t, i) of a [B, T, H, width] activation for (b, h).
__host__ __device__ inline size_t act_at(const Dims& d, int b, int h, int t, int width) {
  return ((size_t(b) * d.T + t) * d.H + h) * size_t(width);
}
__host__ __device__ inline size_t gate_at(const Dims& d, int b, int h, int t) {
  return (size_t(b) * d.T + t) * d.H + h;
}

__device__ inline float bf(const __nv_bfloat16& x) { return __bfloat162float(x); }

// The products run on tensor cores (mma.sync m16n8k8 tf32) as three tf32 products of a hi / lo split of each operand
// (x = hi + lo, hi = tf32(x), lo = tf32(x - hi): a_hi b_hi + a_hi b_lo + a_lo b_hi, about fp32's accuracy), unless
// built with SPB_GDN_SIMT=1: then as plain fp32 FMAs. SPB_GDN_TF32_PASSES=1 keeps the hi product alone (tf32's 10-bit
// mantissa; faster, not the default: the state recurrence compounds it over every chunk).
#ifndef SPB_GDN_TF32_PASSES
#define SPB_GDN_TF32_PASSES 3
#endif
// The passes of the per-chunk kernels whose errors do not compound over chunks (output, dUo, chunk_grads): the same
// unless built with SPB_GDN_CHUNK_TF32_PASSES=1 (an option to measure on a GPU; the recurrences and chunk_prep, whose
// W and U0 feed them, keep SPB_GDN_TF32_PASSES).
#ifndef SPB_GDN_CHUNK_TF32_PASSES
#define SPB_GDN_CHUNK_TF32_PASSES SPB_GDN_TF32_PASSES
#endif
constexpr int kChunkPasses = SPB_GDN_CHUNK_TF32_PASSES;
#if !defined(SPB_GDN_SIMT) || !SPB_GDN_SIMT
#ifndef SPB_GLA_EMU  // tools/emu/cuda_emu.h emulates these two (in spb::gla_cuda) on the CPU
// fp32 -> tf32 bits, rounded to nearest: ties to even on sm_90 (cvt.rn), away from zero before it (cvt.rna, the only
// rounding sm_80 has); either keeps x - hi exact for the lo part.
__device__ __forceinline__ uint32_t tf32_of(float x) {
  uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#endif
  return r;
}
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                 uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#else
inline uint32_t tf32_of(float x) { return ::spb::gla_cuda::tf32_bits(x); }
inline void mma_m16n8k8_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                             uint32_t b1) {
  ::spb::gla_cuda::mma_tf32(c, a0, a1, a2, a3, b0, b1);
}
#endif
// x as tf32 hi and lo parts.
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = tf32_of(x);
  lo = tf32_of(x - __uint_as_float(hi));
}
#endif

// One warp's m16n8 piece of a product, for the recurrences that read their operands straight from shared memory:
// acc += sum over k in [k0, k0 + 8) of a(m, k) b(k, n) for rows m0 + [0, 16) and columns n0 + [0, 8), the lane (g, t)
// holding rows g, g + 8 and columns 2t, 2t + 1 (mma.sync's accumulator layout; piece_epi hands them out).
template <class FA, class FB>
__device__ __forceinline__ void piece_k8(float (&acc)[4], int m0, int n0, int k0, FA a, FB b) {
  const int lane = int(threadIdx.x) % 32, gq = lane / 4, tq = lane % 4;
#if !defined(SPB_GDN_SIMT) || !SPB_GDN_SIMT
  uint32_t ah[4], al[4], bh[2], bl[2];
  split_tf32(a(m0 + gq, k0 + tq), ah[0], al[0]);
  split_tf32(a(m0 + gq + 8, k0 + tq), ah[1], al[1]);
  split_tf32(a(m0 + gq, k0 + tq + 4), ah[2], al[2]);
  split_tf32(a(m0 + gq + 8, k0 + tq + 4), ah[3], al[3]);
  split_tf32(b(k0 + tq, n0 + gq), bh[0], bl[0]);
  split_tf32(b(k0 + tq + 4, n0 + gq), bh[1], bl[1]);
#if SPB_GDN_TF32_PASSES == 3
  mma_m16n8k8_tf32(acc, al[0], al[1], al[2], al[3], bh[0], bh[1]);
  mma_m16n8k8_tf32(acc, ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
#endif
  mma_m16n8k8_tf32(acc, ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
#else
  for (int e = 0; e < 4; ++e) {
    const int m = m0 + gq + 8 * (e >> 1), n = n0 + 2 * tq + (e & 1);
    for (int k = k0; k < k0 + 8; ++k) acc[e] += a(m, k) * b(k, n);
  }
#endif
}
// acc += the product over k in [k_begin, k_end) (a multiple of 16 long), as two interleaved chains of k8 steps (half
// the latency of one chain of dependent mma).
template <class FA, class FB>
__device__ __forceinline__ void piece_product(float (&acc)[4], int m0, int n0, int k_begin, int k_end, FA a, FB b) {
  float acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = k_begin; k0 < k_end; k0 += 16) {
    piece_k8(acc, m0, n0, k0, a, b);
    piece_k8(acc2, m0, n0, k0 + 8, a, b);
  }
  for (int e = 0; e < 4; ++e) acc[e] += acc2[e];
}
template <class FE>
__device__ __forceinline__ void piece_epi(const float (&acc)[4], int m0, int n0, FE epi) {
  const int lane = int(threadIdx.x) % 32, gq = lane / 4, tq = lane % 4;
  for (int e = 0; e < 4; ++e) epi(m0 + gq + 8 * (e >> 1), n0 + 2 * tq + (e & 1), acc[e]);
}

// 16-byte copies into shared memory that land later (cp.async; emulated in tools/emu), their commit, and the wait for
// all of a thread's copies. Sources and destinations 16-byte aligned (gdn_cuda.cu checks the activations).
#ifndef SPB_GLA_EMU
__device__ __forceinline__ void copy16(void* smem, const void* gmem) {
  const uint32_t at = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(at), "l"(gmem) : "memory");
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void copy_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
#else
inline void copy16(void* smem, const void* gmem) { ::spb::gla_cuda::cp_async16(smem, gmem); }
inline void copy_commit() { ::spb::gla_cuda::cp_async_commit(); }
inline void copy_wait_all() { ::spb::gla_cuda::cp_async_wait<0>(); }
#endif

// Rows [0, kChunk) of two bf16 activations of `width` columns (a multiple of 8) from token t0 of (b, h) into shared
// tiles of row pitch `pitch` (elements), 16 bytes a copy, all the block's threads; the caller commits and waits. Rows
// from n on are zeroed, so a product over the whole chunk reads zeros there.
__device__ inline void stage_chunk_rows(const Dims& d, int b, int h, int t0, int n, int width, int pitch,
                                        __nv_bfloat16* xs, const __nv_bfloat16* x, __nv_bfloat16* ys,
                                        const __nv_bfloat16* y) {
  const int per_row = width / 8;
  for (int e = int(threadIdx.x); e < kChunk * per_row; e += kThreads) {
    const int i = e / per_row, p = 8 * (e % per_row);
    if (i < n) {
      copy16(xs + i * pitch + p, x + act_at(d, b, h, t0 + i, width) + p);
      copy16(ys + i * pitch + p, y + act_at(d, b, h, t0 + i, width) + p);
    } else {
      *reinterpret_cast<uint4*>(xs + i * pitch + p) = make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(ys + i * pitch + p) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// Shared-memory floats block_gemm<RM, RN> needs for its two tiles (rows padded by 8: conflict-free fragment loads).
constexpr int gemm_smem_floats(int RM, int RN) { return 16 * (16 * RM + 8) + 16 * (16 * RN + 8); }
constexpr int kGemmSmem = gemm_smem_floats(8, 4);  // enough for every instantiation the kernels use

// C = A B for an M x N result over a depth of Kd, all kThreads threads of the block together: A's element (m, k) is
// a(m, k), B's b(k, n), and epi(m, n, c) receives each result once (a thread of its own). Tiles of 16 RM x 16 RN in
// shared memory (sm: gemm_smem_floats(RM, RN)), 16 deep, staged through the accessors; out-of-range elements are never
// asked of a and b. Tensor cores: each of the 8 warps owns RM RN / 4 of the tile's m16n8 pieces (RM RN a multiple of
// 4); SIMT: each thread RM x RN results at rows ty + 16 i, columns tx + 16 j. Begins and ends with a barrier, so the
// accessors may read what the block wrote before the call and the caller may read what epi wrote after it; epi must
// not write what a or b read. PREFETCH: each thread reads its RM + RN elements of step k0 + 16 into registers before
// step k0's products, so that the accessors' global-memory latency overlaps the tensor work instead of stalling the
// block between its barriers (the same values and sums; ~40 more registers, so only for a kernel alone on its SM).
// BT (with PREFETCH): b reads a row-major N x Kd matrix (B transposed); its tile is read with k fastest, so that a
// warp's loads cover two 64-byte row pieces, not 32 rows (32 L1 wavefronts a load); the same tile either way.
template <int RM, int RN, int PASSES = SPB_GDN_TF32_PASSES, bool PREFETCH = false, bool BT = false, class FA,
          class FB, class FE>
__device__ inline void block_gemm(int M, int N, int Kd, FA a, FB b, FE epi, float* sm) {
  constexpr int TM = 16 * RM, TN = 16 * RN, PA = TM + 8, PB = TN + 8;
  float* As = sm;  // As[k][m]
  float* Bs = sm + 16 * PA;  // Bs[k][n]
  const int tid = int(threadIdx.x);
  static_assert(kThreads == 256, "a 16-deep tile of 16 RM rows is RM elements a thread");
  static_assert(PREFETCH || !BT, "BT orders the prefetch");
#if !defined(SPB_GDN_SIMT) || !SPB_GDN_SIMT
  static_assert((RM * RN) % 4 == 0, "8 warps share the tile's 2 RM RN m16n8 pieces");
  constexpr int kPer = RM * RN / 4;  // pieces per warp
  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
#else
  const int tx = tid % 16, ty = tid / 16;
#endif
  for (int m0 = 0; m0 < M; m0 += TM)
    for (int n0 = 0; n0 < N; n0 += TN) {
#if !defined(SPB_GDN_SIMT) || !SPB_GDN_SIMT
      float acc[kPer][4];
      for (int p = 0; p < kPer; ++p)
        for (int e = 0; e < 4; ++e) acc[p][e] = 0.0f;
#else
      float acc[RM][RN];
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;
#endif
      float ra[RM], rb[RN];  // PREFETCH: this thread's elements (e = tid + 256 u) of the next step's tiles
      auto fetch = [&](int k0) {
#pragma unroll
        for (int u = 0; u < RM; ++u) {
          const int e = tid + u * kThreads, m = e / 16, kk = e % 16;
          ra[u] = (m0 + m < M && k0 + kk < Kd) ? a(m0 + m, k0 + kk) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < RN; ++u) {
          const int e = tid + u * kThreads, kk = BT ? e % 16 : e / TN, n = BT ? e / 16 : e % TN;
          rb[u] = (k0 + kk < Kd && n0 + n < N) ? b(k0 + kk, n0 + n) : 0.0f;
        }
      };
      if constexpr (PREFETCH) {
        __syncthreads();  // the accessors may read what the block wrote before the call
        fetch(0);
      }
      for (int k0 = 0; k0 < Kd; k0 += 16) {
        __syncthreads();
        if constexpr (PREFETCH) {
#pragma unroll
          for (int u = 0; u < RM; ++u) As[((tid + u * kThreads) % 16) * PA + (tid + u * kThreads) / 16] = ra[u];
#pragma unroll
          for (int u = 0; u < RN; ++u) {
            const int e = tid + u * kThreads;
            Bs[(BT ? e % 16 : e / TN) * PB + (BT ? e / 16 : e % TN)] = rb[u];
          }
        } else {
          for (int e = tid; e < 16 * TM; e += kThreads) {
            const int m = e / 16, kk = e % 16;
            As[kk * PA + m] = (m0 + m < M && k0 + kk < Kd) ? a(m0 + m, k0 + kk) : 0.0f;
          }
          for (int e = tid; e < 16 * TN; e += kThreads) {
            const int kk = e / TN, n = e % TN;
            Bs[kk * PB + n] = (k0 + kk < Kd && n0 + n < N) ? b(k0 + kk, n0 + n) : 0.0f;
          }
        }
        __syncthreads();
        if constexpr (PREFETCH)
          if (k0 + 16 < Kd) fetch(k0 + 16);
#if !defined(SPB_GDN_SIMT) || !SPB_GDN_SIMT
        for (int k8 = 0; k8 < 16; k8 += 8)
          for (int p = 0; p < kPer; ++p) {
            const int piece = warp * kPer + p, mi = piece / (2 * RN), ni = piece % (2 * RN);
            const float* Ap = As + (k8 + tq) * PA + mi * 16 + gq;
            const float* Bp = Bs + (k8 + tq) * PB + ni * 8 + gq;
            uint32_t ah[4], al[4], bh[2], bl[2];
            split_tf32(Ap[0], ah[0], al[0]);           // A[g][t]
            split_tf32(Ap[8], ah[1], al[1]);           // A[g + 8][t]
            split_tf32(Ap[4 * PA], ah[2], al[2]);      // A[g][t + 4]
            split_tf32(Ap[4 * PA + 8], ah[3], al[3]);  // A[g + 8][t + 4]
            split_tf32(Bp[0], bh[0], bl[0]);           // B[t][g]
            split_tf32(Bp[4 * PB], bh[1], bl[1]);      // B[t + 4][g]
            if constexpr (PASSES == 3) {
              mma_m16n8k8_tf32(acc[p], al[0], al[1], al[2], al[3], bh[0], bh[1]);
              mma_m16n8k8_tf32(acc[p], ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
            }
            mma_m16n8k8_tf32(acc[p], ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
          }
#else
#pragma unroll 4
        for (int kk = 0; kk < 16; ++kk) {
          float av[RM], bv[RN];
          for (int i = 0; i < RM; ++i) av[i] = As[kk * PA + ty + 16 * i];
          for (int j = 0; j < RN; ++j) bv[j] = Bs[kk * PB + tx + 16 * j];
          for (int i = 0; i < RM; ++i)
            for (int j = 0; j < RN; ++j) acc[i][j] += av[i] * bv[j];
        }
#endif
      }
#if !defined(SPB_GDN_SIMT) || !SPB_GDN_SIMT
      for (int p = 0; p < kPer; ++p) {  // c0, c1: row g, columns 2t, 2t + 1; c2, c3: row g + 8
        const int piece = warp * kPer + p, mi = piece / (2 * RN), ni = piece % (2 * RN);
        for (int e = 0; e < 4; ++e) {
          const int m = m0 + mi * 16 + gq + 8 * (e >> 1), n = n0 + ni * 8 + 2 * tq + (e & 1);
          if (m < M && n < N) epi(m, n, acc[p][e]);
        }
      }
#else
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RN; ++j) {
          const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
          if (m < M && n < N) epi(m, n, acc[i][j]);
        }
#endif
    }
  __syncthreads();
}

}  // namespace gdn_cuda
}  // namespace spb
