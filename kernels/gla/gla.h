// A single-device GLA forward and backward composed from the stages: what `dp` runs on each rank, what Ulysses runs
// over its heads, and the "single-device run of the whole sequence" every SP method is checked against.
#pragma once

#include "kernels/gla/gla_kernels.h"

namespace spb {

// Bytes of one chunk-state tensor (hs or dhs) of shape s in kern.chunk_state_type().
inline size_t chunk_state_bytes(const GlaKernels& kern, const GlaShape& s) {
  return s.chunk_state_elems() * dtype_size(kern.chunk_state_type());
}

// gc and hs lent to a workspace instead of its own (GlaWorkspace's `remade`): for a caller that runs several
// workspaces' forwards and then their backwards, one after another, and has each backward make them again first
// (gla_remake_states), so that one pair serves them all (the model's blocks; fla's chunk GLA likewise keeps no h for
// its backward). Each must hold the shape's: gc qk_elems() fp32, hs chunk_state_bytes().
struct GlaStateBuffers {
  const Buffer* gc = nullptr;
  const Buffer* hs = nullptr;
};

// The intermediates of one GLA call for the kernels `kern`: gc, lambda and ht fp32, the chunk states hs and dhs in
// kern.chunk_state_type(); reused across calls of the same shape with the same kernels.
//
// dhs lives only within a backward (the state gradients, made and read there), so several workspaces whose backwards
// run one after another can share one: `shared_dhs` (nullable: a buffer of its own), of at least
// chunk_state_bytes(kern, s), which dhs then borrows; its owner keeps it for the workspace's life (the model's
// blocks: SpConfig::shared_dhs). `remade` (nullable: buffers of its own) lends gc and hs the same way; the backward
// then makes them again before it reads them (remakes_states()), and lambda and ht stay the workspace's own.
struct GlaWorkspace {
  GlaShape shape;
  Buffer gc, lambda, hs, ht, dhs;
  GlaWorkspace(Device& dev, const GlaKernels& kern, const GlaShape& s, const Buffer* shared_dhs = nullptr,
               const GlaStateBuffers* remade = nullptr)
      : shape(s),
        gc(own_or_lent(dev, s.qk_elems() * 4, remade ? remade->gc : nullptr, "gc")),
        lambda(dev, s.state_rows() * 4),
        hs(own_or_lent(dev, chunk_state_bytes(kern, s), remade ? remade->hs : nullptr, "hs")),
        ht(dev, s.state_elems() * 4),
        dhs(own_or_lent(dev, chunk_state_bytes(kern, s), shared_dhs, "dhs")),
        remakes_states_(remade != nullptr) {}
  // gc and hs are lent: the backward must make them again (gla_remake_states) before it reads them.
  bool remakes_states() const { return remakes_states_; }

 private:
  // A buffer of `bytes` of its own, or a view of `lent` (which must hold that many).
  static Buffer own_or_lent(Device& dev, size_t bytes, const Buffer* lent, const char* what);
  bool remakes_states_;
};

// o and ht (nullable) from q, k, v, g and h0 (nullable: zero). Leaves gc, lambda, hs and ht in the workspace.
void gla_forward(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v, const void* g,
                 const float* h0, void* o, float* ht, Stream st);

// dq, dk, dv, dg and dh0 (nullable) from the inputs, do and dht (nullable: zero); recomputes the forward states.
void gla_backward(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v, const void* g,
                  const float* h0, const void* d_o, const float* dht, void* dq, void* dk, void* dv, void* dg,
                  float* dh0, Stream st);

// gc (without lambda), hs and ht as gla_forward made them from the same k, v, g and h0 (nullable: zero): the start
// of a backward whose workspace remakes_states().
void gla_remake_states(GlaKernels& kern, GlaWorkspace& ws, const void* k, const void* v, const void* g,
                       const float* h0, Stream st);

// The same backward right after gla_forward on the same inputs and workspace: it reuses the gc and chunk states the
// forward left in `ws` (saved for the backward, as autograd would) instead of recomputing them; `forward_ht` is the
// final state that forward returned. Keeping hs costs NT*dk*dv elements of chunk_state_type() per head between the
// passes and saves a cumsum and a state pass (about 0.4 ms of 3.5 at T=16384, H=16, dk=dv=128 on an H200).
// dq, dk and dv go to rows of grad_ld elements where it is not 0 (GlaShape::grad_ld).
void gla_backward_saved(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v,
                        const float* forward_ht, const void* d_o, const float* dht, void* dq, void* dk, void* dv,
                        void* dg, float* dh0, Stream st, int grad_ld = 0);

}  // namespace spb
