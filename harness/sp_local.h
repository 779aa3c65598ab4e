// What every scan-based SP method does on its own rank (DESIGN §2), so that zeco, lasp2 and ring differ only in how
// they obtain S_in and dS_out:
//  forward:  local states from a zero state -> M_p (local_final) and Lambda_p (lambda); then either
//            - overlapped: o from the local states (needs no incoming state, so it runs during the communication),
//              and once S_in is known, o += its correction (forward_local_output + forward_apply_initial); or
//            - in order: once S_in is known, fold it into the chunk states and compute o from the true states
//              (forward_output_from_initial). One pass over the states instead of one over o, and the backward then
//              finds its states ready: cheaper whenever the communication is shorter than the correction pass.
//  backward: the true states (from the saved S_in, unless the forward made them already); local state gradients
//            from a zero final gradient -> D_p (local_dh_in); once dS_out is known, the state gradients are
//            corrected and every gradient computed.
// Where the kernels fold the boundary states inside the consumers (GlaKernels::fuses_boundary), the in-order path
// writes no true state at all: chunk_output_with_initial and chunk_grads_with_boundary read the zero-start ones.
// All work goes on the device's compute stream.
#pragma once

#include "harness/method.h"
#include "kernels/gla.h"

namespace spb {

class SpLocalGla {
 public:
  SpLocalGla(Runtime& rt, const GlaShape& s);

  void forward_local_states(const SpForwardArgs& a);
  void forward_local_output(const SpForwardArgs& a);
  void forward_apply_initial(const SpForwardArgs& a);  // reads S_in()
  void forward_output_from_initial(const SpForwardArgs& a);  // reads S_in()
  void backward_local_dstates(const SpForwardArgs& f, const SpBackwardArgs& a);  // -> local_dh_in (D_p)
  void backward_true_states();                                                 // reads S_in()
  void backward_finish(const SpForwardArgs& f, const SpBackwardArgs& a);  // reads dS_out()

  // out = diag(exp Lambda_p) in + M_p: the state after this rank, given the state before it.
  void fold_forward(const float* in, float* out, Stream st);
  // out = diag(exp Lambda_p) in + D_p: the gradient before this rank, given the gradient after it.
  void fold_backward(const float* in, float* out, Stream st);

  const GlaShape& shape() const { return ws_.shape; }
  float* lambda() { return ws_.lambda.f32(); }
  float* local_final() { return local_final_.f32(); }
  float* local_dh_in() { return local_dh_in_.f32(); }
  float* S_in() { return S_in_.f32(); }
  float* dS_out() { return dS_out_.f32(); }
  // Scratch for a state nobody asked for (h_out or dh_in passed as nullptr).
  float* spare_state() { return spare_.f32(); }

 private:
  void make_states_true(Stream st);  // hs, ht += the S_in terms, in place

  Runtime& rt_;
  GlaWorkspace ws_;
  Buffer local_final_, local_dh_in_, S_in_, dS_out_, spare_;
  bool states_true_ = false;  // hs and ht in the workspace already include S_in
};

// A buffer of `bytes` filled with `src` (nullable: zeros), on stream st.
void copy_or_zero(Device& dev, float* dst, const float* src, size_t elems, Stream st);

}  // namespace spb
