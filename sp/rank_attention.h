// A rank's attention as whole passes from a known initial state, for either family (DESIGN §3, §12): what dp and
// lasp1 run on each rank and the single-device reference runs over the whole sequence. GLA's keeps the forward's
// chunk states for the backward (gla_backward_saved); Gated DeltaNet's backward makes what it needs again from the
// inputs and h0.
#pragma once

#include <memory>

#include "sp/method.h"

namespace spb {

class RankAttention {
 public:
  virtual ~RankAttention() = default;
  // o and ht (nullptr: kept inside) from a's inputs and h0 (nullptr: zero), on the compute stream.
  virtual void forward(const SpForwardArgs& a, const float* h0, float* ht) = 0;
  // What the backward must make again from the forward's inputs and h0 before it runs (GLA's lent chunk states,
  // SpConfig::remade_states), enqueued before the caller waits for dht; nothing by default.
  virtual void prepare_backward(const SpForwardArgs& f, const float* h0) { (void)f, (void)h0; }
  virtual bool remakes_states() const { return false; }  // whether prepare_backward does anything
  // a's gradients and dh0 (nullable) from do and dht (nullptr: zero), after forward(f, h0, forward_ht) on the same
  // inputs (forward_ht: what that call was given).
  virtual void backward(const SpForwardArgs& f, const SpBackwardArgs& a, const float* h0, const float* forward_ht,
                        const float* dht, float* dh0) = 0;
  // Whether backward() writes dq, dk and dv at SpBackwardArgs::grad_ld (SpMethod::takes_grad_ld).
  virtual bool takes_grad_ld() const = 0;
  // The timeline's names of the two passes.
  virtual const char* forward_span() const = 0;
  virtual const char* backward_span() const = 0;
};

// c.attention's passes over c.local (GLA's workspace borrowing c.shared_dhs and c.remade_states) on rt.
std::unique_ptr<RankAttention> make_rank_attention(Runtime& rt, const SpConfig& c);

// Gated DeltaNet's shape for the same tensors.
GdnShape gdn_shape(const GlaShape& s);

}  // namespace spb
