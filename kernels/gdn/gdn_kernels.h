// The Gated DeltaNet stages (DESIGN §12), one interface for the CPU and the GPU: what GDN's SP methods call.
//
// Tensors, per rank, all row-major (the layout of kernels/gdn/cpu/gdn_reference.h):
//   q, k      [B, T, H, dk]  act_dtype() (fp32 on the CPU, bf16 on the GPU); k L2-normalised per token and head
//   v, o      [B, T, H, dv]  act_dtype(); dq, dk, dv and do have the shape and type of their tensor
//   g, beta   [B, T, H]      fp32 on every backend: one log gate (<= 0) and one beta in (0, 1) per token and head;
//                            dg and dbeta likewise
//   h0, ht, dht, dh0, M, D   [B, H, dk, dv] fp32 states
//   A         [B, H, dk, dk] fp32: the rank's transition, one dense matrix per head
// A rank's tokens act on the state entering it as S_out = A S_in + M (the rank map, sp/rank_map.h); the backward
// hands dS_in = A^T dS_out + D on, D the initial-state gradient from a zero final gradient. A mixes a head's state
// rows but never its columns.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/gdn/cpu/gdn_reference.h"
#include "runtime/device.h"

namespace spb {

class GdnKernels {
 public:
  virtual ~GdnKernels() = default;
  virtual DType act_dtype() const = 0;

  // --- the rank's attention ------------------------------------------------------------------------------------
  // o and ht (nullable) from the inputs and h0 (nullptr: a zero state).
  virtual void forward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g,
                       const float* beta, const float* h0, void* o, float* ht, Stream st) = 0;
  // The backward of forward() on the same inputs and h0: dq, dk, dv, dg, dbeta and dh0 (nullable) from do and dht
  // (nullptr: zero). It keeps nothing from the forward: what it needs it makes again from the inputs and h0.
  virtual void backward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g,
                        const float* beta, const float* h0, const void* d_o, const float* dht, void* dq, void* dk,
                        void* dv, float* dg, float* dbeta, float* dh0, Stream st) = 0;

  // --- the boundary: what an SP rank sends before anything else -----------------------------------------------
  // The rank map: A (nullable) and M (nullable), the final state from a zero start; v is read for M alone (nullptr
  // where M is).
  virtual void rank_map(const GdnShape& s, const void* k, const void* v, const float* g, const float* beta, float* A,
                        float* M, Stream st) = 0;
  // D: the initial-state gradient of a zero final-state gradient (it needs neither v nor the state).
  virtual void initial_dstate(const GdnShape& s, const void* q, const void* k, const float* g, const float* beta,
                              const void* d_o, float* D, Stream st) = 0;

  // --- the dense rank map's arithmetic (sp/rank_map.h), per head h of `heads` ----------------------------------
  // A [heads, n, n], x, b, out [heads, n, cols]: out_h = A_h x_h + b_h (out may alias x or b).
  virtual void dense_apply(size_t heads, size_t n, size_t cols, const float* A, const float* x, const float* b,
                           float* out, Stream st) = 0;
  // out_h = A2_h A1_h (out may alias A2 or A1).
  virtual void dense_product(size_t heads, size_t n, const float* A2, const float* A1, float* out, Stream st) = 0;
  // out_h = A_h^T (out may alias A).
  virtual void dense_transpose(size_t heads, size_t n, const float* A, float* out, Stream st) = 0;
  // out_h = I.
  virtual void dense_identity(size_t heads, size_t n, float* out, Stream st) = 0;
};

// fp32 stages over kernels/gdn/cpu/gdn_chunked.h, for host memory.
std::unique_ptr<GdnKernels> make_cpu_gdn_kernels();

}  // namespace spb
