// A single-device GLA forward and backward composed from the stages: what `dp` runs on each rank, what Ulysses runs
// over its heads, and the "single-device run of the whole sequence" every SP method is checked against.
#pragma once

#include "kernels/gla_kernels.h"

namespace spb {

// The fp32 intermediates of one GLA call; reused across calls of the same shape.
struct GlaWorkspace {
  GlaShape shape;
  Buffer gc, lambda, hs, ht, dhs;
  GlaWorkspace(Device& dev, const GlaShape& s)
      : shape(s),
        gc(dev, s.qk_elems() * 4),
        lambda(dev, s.state_rows() * 4),
        hs(dev, s.chunk_state_elems() * 4),
        ht(dev, s.state_elems() * 4),
        dhs(dev, s.chunk_state_elems() * 4) {}
};

// o and ht (nullable) from q, k, v, g and h0 (nullable: zero). Leaves gc, lambda, hs and ht in the workspace.
void gla_forward(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v, const void* g,
                 const float* h0, void* o, float* ht, Stream st);

// dq, dk, dv, dg and dh0 (nullable) from the inputs, do and dht (nullable: zero); recomputes the forward states.
void gla_backward(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v, const void* g,
                  const float* h0, const void* d_o, const float* dht, void* dq, void* dk, void* dv, void* dg,
                  float* dh0, Stream st);

}  // namespace spb
