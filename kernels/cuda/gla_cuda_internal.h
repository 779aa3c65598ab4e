// Launchers of the CUDA GLA kernels (one .cu file per stage family), called by the GlaKernels implementation in
// gla_cuda.cu. Internal to kernels/cuda. Every launcher enqueues on `stream` and checks the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace spb {
namespace gla_cuda {

struct Dims {
  int B, T, H, dk, dv, NT;
  float scale;  // dk^-1/2
};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// A boundary state folded into a consumer's state tiles as they are staged (chunk_output_with_initial,
// chunk_grads_with_boundary): the tile of chunk n becomes local + diag(e[bh][n][:]) x[bh]; nothing is written back.
// x == nullptr: no fold, the plain stage's code path.
struct StateFold {
  const float* x = nullptr;  // [B*H, dk, dv] fp32 (S_in or dS_out)
  const float* e = nullptr;  // [B*H, nstride, dk] fp32 decay factors exp(P_n) or exp(Q_n) (boundary_decay_kernel)
  int nstride = 0;           // NT + 1 for exp(P), NT for exp(Q)
};

// gla_cuda.cu: features per thread of the cumsum kernel (2: default; 4: v2's, for the benchmark's comparison).
void set_cumsum_vec(int v);

// gla_states.cu: the sequential chunk recurrence.
//   forward  (reverse == false): x = k, y = v, hs[n] = state at the start of chunk n, fin = ht, init = h0.
//   backward (reverse == true):  x = q, y = do, hs[n] = dhs[n] (gradient at the end of chunk n), fin = dh0,
//                                init = dht.
// Rows of the state per block: 16 or 32 (0: 16 where that grid fits one wave of two blocks per SM). For tests and
// the benchmark.
void set_states_bk(int bk);
void launch_states(const Dims& d, bool reverse, const __nv_bfloat16* x, const __nv_bfloat16* y, const float* gc,
                   const float* init, float* hs, float* fin, cudaStream_t stream);

// gla_boundary.cu: the boundary state alone, without the chunk states: a reduction over spans of chunks.
//   forward  (reverse == false): fin = the ht that launch_states(d, false, x = k, y = v, gc, init = nullptr, ...) gives
//   backward (reverse == true):  fin = the dh0 of launch_states(d, true, x = q, y = do, gc, init = nullptr, ...)
// scratch: boundary_scratch_elems(d) floats of device memory, owned by the caller (per-span partial states, decays);
// 0 where one span covers the sequence (scratch may then be nullptr). The plan depends on d and on the current
// device's SM count only, so the size stays valid for every launch with the same d on that device.
// set_boundary_span: chunks per span (0: chosen by grid size); for tests and the benchmark; the scratch size follows.
size_t boundary_scratch_elems(const Dims& d);
void launch_boundary(const Dims& d, bool reverse, const __nv_bfloat16* x, const __nv_bfloat16* y, const float* gc,
                     float* fin, float* scratch, cudaStream_t stream);
void set_boundary_span(int chunks);

// gla_intra.cu: per (chunk, dv tile) blocks that build the in-chunk score matrix A and add an inter-chunk product.
//   o  = s (Q*exp b) hs[n] + tril(A) V                      (chunk_output)
//   dv = (K*exp(B-b)) dhs[n] + tril(A)^T dO                  (the dv part of chunk_grads)
// bv: columns per block, 64 or 128; 0 picks (128 where dv > 64). The benchmark tries both.
// set_intra_variant: tuning override of the feature slice and occupancy (0: default; 1: 32-feature slices, 2 blocks
// per SM; 2: 16-feature slices, 3 blocks per SM; 3: as 2 with one barrier per slice). For tests and the benchmark.
void set_intra_variant(int v);
void launch_output(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                   const float* gc, const float* hs, __nv_bfloat16* o, cudaStream_t stream, int bv = 0,
                   const StateFold& fold = {});
void launch_dv(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* d_o,
               const float* gc, const float* dhs, __nv_bfloat16* dv, cudaStream_t stream, int bv = 0,
               const StateFold& fold = {});

// gla_dqk.cu: per (chunk, dk tile) blocks: dq, dk and dg. fold_h / fold_dh: the boundary states folded into the H0
// and dH tiles (rowsum(dH * H1) is rebuilt from the folded H0, so ht is never needed).
// set_dqk_variant: tuning override (0: default; 1: 32-column dv slices, 2 blocks per SM; 2: 16-column slices,
// 3 blocks per SM). For tests and the benchmark.
void set_dqk_variant(int v);
void launch_dqk(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                const __nv_bfloat16* d_o, const float* gc, const float* hs, const float* dhs, __nv_bfloat16* dq,
                __nv_bfloat16* dk, __nv_bfloat16* dg, cudaStream_t stream, const StateFold& fold_h = {},
                const StateFold& fold_dh = {});

}  // namespace gla_cuda
}  // namespace spb
