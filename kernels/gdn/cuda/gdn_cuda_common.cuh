// What the CUDA Gated DeltaNet kernels share: the problem's sizes and scratch pointers, a plain fp32 SIMT block
// product (block_gemm) that every kernel builds its chunk products from, and the bf16 loads. Correct first and
// emulator-friendly (tools/emu/cuda_emu.h: plain CUDA, dynamic shared memory only, no atomics): every product is an
// fp32 FMA loop over shared-memory tiles, operands read through accessors (lambdas) that fold in the gates, the
// betas and the masks of the chunk, so no kernel materialises a scaled copy of q, k, v or do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

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

// Shared-memory floats block_gemm<RM, RN> needs for its two tiles.
constexpr int gemm_smem_floats(int RM, int RN) { return 16 * (16 * RM + 4) + 16 * (16 * RN + 4); }
constexpr int kGemmSmem = gemm_smem_floats(8, 4);  // enough for every instantiation the kernels use

// C = A B for an M x N result over a depth of Kd, all kThreads threads of the block together: A's element (m, k) is
// a(m, k), B's b(k, n), and epi(m, n, c) receives each result once (a thread of its own). Tiles of 16 RM x 16 RN in
// shared memory (sm: gemm_smem_floats(RM, RN)), 16 deep; each thread holds RM x RN accumulators at rows ty + 16 i and
// columns tx + 16 j (16 x 16 threads), fp32 FMA. Out-of-range elements are never asked of a and b. Begins and ends
// with a barrier, so the accessors may read what the block wrote before the call and the caller may read what epi
// wrote after it; epi must not write what a or b read.
template <int RM, int RN, class FA, class FB, class FE>
__device__ inline void block_gemm(int M, int N, int Kd, FA a, FB b, FE epi, float* sm) {
  constexpr int TM = 16 * RM, TN = 16 * RN, PA = TM + 4, PB = TN + 4;
  float* As = sm;
  float* Bs = sm + 16 * PA;
  const int tid = int(threadIdx.x), tx = tid % 16, ty = tid / 16;
  for (int m0 = 0; m0 < M; m0 += TM)
    for (int n0 = 0; n0 < N; n0 += TN) {
      float acc[RM][RN];
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;
      for (int k0 = 0; k0 < Kd; k0 += 16) {
        __syncthreads();
        for (int e = tid; e < 16 * TM; e += kThreads) {
          const int m = e / 16, kk = e % 16;
          As[kk * PA + m] = (m0 + m < M && k0 + kk < Kd) ? a(m0 + m, k0 + kk) : 0.0f;
        }
        for (int e = tid; e < 16 * TN; e += kThreads) {
          const int kk = e / TN, n = e % TN;
          Bs[kk * PB + n] = (k0 + kk < Kd && n0 + n < N) ? b(k0 + kk, n0 + n) : 0.0f;
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < 16; ++kk) {
          float av[RM], bv[RN];
          for (int i = 0; i < RM; ++i) av[i] = As[kk * PA + ty + 16 * i];
          for (int j = 0; j < RN; ++j) bv[j] = Bs[kk * PB + tx + 16 * j];
          for (int i = 0; i < RM; ++i)
            for (int j = 0; j < RN; ++j) acc[i][j] += av[i] * bv[j];
        }
      }
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RN; ++j) {
          const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
          if (m < M && n < N) epi(m, n, acc[i][j]);
        }
    }
  __syncthreads();
}

}  // namespace gdn_cuda
}  // namespace spb
