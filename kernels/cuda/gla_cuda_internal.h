// Launchers of the CUDA GLA kernels (one .cu file per stage family), called by the GlaKernels implementation in
// gla_cuda.cu. Internal to kernels/cuda. Every launcher enqueues on `stream` and checks the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spb {
namespace gla_cuda {

struct Dims {
  int B, T, H, dk, dv, NT;
  float scale;  // dk^-1/2
};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// gla_states.cu: the sequential chunk recurrence.
//   forward  (reverse == false): x = k, y = v, hs[n] = state at the start of chunk n, fin = ht, init = h0.
//   backward (reverse == true):  x = q, y = do, hs[n] = dhs[n] (gradient at the end of chunk n), fin = dh0,
//                                init = dht.
// Rows of the state per block: 16 or 32 (0: 16 where that grid fits one wave of two blocks per SM). For tests and
// the benchmark.
void set_states_bk(int bk);
void launch_states(const Dims& d, bool reverse, const __nv_bfloat16* x, const __nv_bfloat16* y, const float* gc,
                   const float* init, float* hs, float* fin, cudaStream_t stream);

// gla_intra.cu: per (chunk, dv tile) blocks that build the in-chunk score matrix A and add an inter-chunk product.
//   o  = s (Q*exp b) hs[n] + tril(A) V                      (chunk_output)
//   dv = (K*exp(B-b)) dhs[n] + tril(A)^T dO                  (the dv part of chunk_grads)
// bv: columns per block, 64 or 128; 0 picks (128 where dv > 64). The benchmark tries both.
void launch_output(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                   const float* gc, const float* hs, __nv_bfloat16* o, cudaStream_t stream, int bv = 0);
void launch_dv(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* d_o,
               const float* gc, const float* dhs, __nv_bfloat16* dv, cudaStream_t stream, int bv = 0);

// gla_dqk.cu: per (chunk, dk tile) blocks: dq, dk and dg.
void launch_dqk(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                const __nv_bfloat16* d_o, const float* gc, const float* hs, const float* dhs, __nv_bfloat16* dq,
                __nv_bfloat16* dk, __nv_bfloat16* dg, cudaStream_t stream);

}  // namespace gla_cuda
}  // namespace spb
