// `dp`, the paper's "DP baseline" and the ideal: every rank runs its own tokens as an independent sequence, so there
// is no communication at all. Its result is checked against the single-device run of each rank's own tokens.
#include "sp/method.h"
#include "sp/timeline.h"
#include "kernels/gla/gla.h"

namespace spb {
namespace {

class DataParallel final : public SpMethod {
 public:
  DataParallel(Runtime& rt, const SpConfig& c) : rt_(rt), ws_(*rt.dev, *rt.kern, c.local, c.shared_dhs, c.remade_states) {}

  void forward(const SpForwardArgs& a) override {
    TimelineSpan span(rt_, "gla_forward", Lane::compute);
    gla_forward(*rt_.kern, ws_, a.q, a.k, a.v, a.g, a.h0, a.o, final_state(a), rt_.dev->compute_stream());
  }
  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    TimelineSpan span(rt_, "gla_backward", Lane::compute);
    if (ws_.remakes_states()) gla_remake_states(*rt_.kern, ws_, f.k, f.v, f.g, f.h0, rt_.dev->compute_stream());
    gla_backward_saved(*rt_.kern, ws_, f.q, f.k, f.v, final_state(f), a.d_o, a.dht, a.dq, a.dk, a.dv, a.dg, a.dh_in,
                       rt_.dev->compute_stream(), a.grad_ld);
  }
  bool independent_sequences() const override { return true; }
  bool takes_grad_ld() const override { return true; }

 private:
  float* final_state(const SpForwardArgs& a) { return a.h_out ? a.h_out : ws_.ht.f32(); }
  Runtime& rt_;
  GlaWorkspace ws_;
};

}  // namespace
}  // namespace spb

using spb::DataParallel;
SPB_REGISTER_METHOD("dp", "ideal baseline: each rank its own sequence, no communication", DataParallel)
