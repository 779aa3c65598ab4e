// The launchers of the CUDA Gated DeltaNet kernels (gdn_forward.cu, gdn_backward.cu, gdn_dense.cu), which gdn_cuda.cu's
// GdnKernels calls in order on one stream. Pointers are device memory; the layouts are gdn_cuda_common.cuh's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/gdn/cuda/gdn_cuda_common.cuh"

namespace spb {
namespace gdn_cuda {

using bf16 = __nv_bfloat16;

// Per chunk, parallel over (chunk, head, batch): gam, Tm, W and (v non-null) U0.
void launch_chunk_prep(const Dims& d, const bf16* k, const bf16* v, const float* g, const float* beta,
                       const Scratch& s, cudaStream_t st);
// The chunk-state recurrence h[n+1] = e^{gamma_C} h[n] + K~^T (U0 - W h[n]) over a state of `cols` columns (dv, or dk
// for the rank's transition), sequential over chunks, parallel over (16-column block, head, batch). h0: the initial
// state ([B, H, K, cols]; nullptr: zero, or the identity where `identity`); U0 nullptr: zero. Stores (each nullable)
// Hs (NC + 1 states), U (v_new) and the final state.
void launch_states_fwd(const Dims& d, int cols, const bf16* k, const float* gam, const float* W, const float* U0,
                       const float* h0, bool identity, float* Hs, float* U, float* final_state, cudaStream_t st);
// Per chunk: o = s (diag(e^gamma) Q h[n] + P U), P the causal decayed q k^T.
void launch_output(const Dims& d, const bf16* q, const bf16* k, const Scratch& s, bf16* o, cudaStream_t st);

// Per chunk: dUo = s P^T dO.
void launch_dUo(const Dims& d, const bf16* q, const bf16* k, const bf16* d_o, const Scratch& s, cudaStream_t st);
// The state-gradient recurrence in reverse: dU = dUo + K~ dh, dh <- e^{gamma_C} dh + s Q~^T dO - W^T dU, from dht
// (nullptr: zero); stores (each nullable) dHs, dU and the final dh (dh0).
void launch_states_bwd(const Dims& d, const bf16* q, const bf16* k, const bf16* d_o, const Scratch& s,
                       const float* dht, float* dHs, float* dU, float* dh0, cudaStream_t st);
// Per chunk: dq, dk, dv, dg, dbeta from the states, state gradients and the chunk's factors.
void launch_chunk_grads(const Dims& d, const bf16* q, const bf16* k, const bf16* v, const float* beta, const bf16* d_o,
                        const Scratch& s, bf16* dq, bf16* dk, bf16* dv, float* dg, float* dbeta, cudaStream_t st);

// The dense map's arithmetic, per head: out = A x + b, out = A2 A1, out = A^T into tmp (no aliasing there), the copy
// back, and the identity.
void launch_dense_apply(size_t heads, size_t n, size_t cols, const float* A, const float* x, const float* b,
                        float* tmp, cudaStream_t st);
void launch_dense_product(size_t heads, size_t n, const float* A2, const float* A1, float* tmp, cudaStream_t st);
void launch_dense_transpose(size_t heads, size_t n, const float* A, float* tmp, cudaStream_t st);
void launch_copy(size_t elems, const float* src, float* dst, cudaStream_t st);
void launch_dense_identity(size_t heads, size_t n, float* out, cudaStream_t st);

}  // namespace gdn_cuda
}  // namespace spb
