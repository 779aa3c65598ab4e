// LASP-1: the serial chain, faithful to the official code. Rank p receives S_in from p-1 *before* its own compute,
// runs the whole local forward from it, and sends its final state on to p+1; the backward runs the chain in reverse.
// Nothing overlaps, so the chain's P-1 hops and the ranks' computes add up.
#include "sp/method.h"
#include "sp/sp_local.h"
#include "sp/timeline.h"
#include "kernels/gla/gla.h"

namespace spb {
namespace {

class Lasp1 final : public SpMethod {
 public:
  Lasp1(Runtime& rt, const SpConfig& c)
      : rt_(rt), ws_(*rt.dev, *rt.kern, c.local, c.shared_dhs, c.remade_states), S_in_(*rt.dev, c.local.state_elems() * 4),
        dS_out_(*rt.dev, c.local.state_elems() * 4), ht_(*rt.dev, c.local.state_elems() * 4),
        dh_(*rt.dev, c.local.state_elems() * 4) {}

  void forward(const SpForwardArgs& a) override {
    const int p = rt_.rank(), P = rt_.world();
    const Stream st = rt_.dev->compute_stream();
    const size_t bytes = ws_.shape.state_elems() * 4;
    if (p == 0) {
      copy_or_zero(*rt_.dev, S_in_.f32(), a.h0, ws_.shape.state_elems(), st);
    } else {
      TimelineSpan span(rt_, "recv", Lane::compute);
      rt_.comm->recv(S_in_.get(), bytes, p - 1, st);
    }
    float* h_out = a.h_out ? a.h_out : ht_.f32();
    {
      TimelineSpan span(rt_, "gla_forward", Lane::compute);
      gla_forward(*rt_.kern, ws_, a.q, a.k, a.v, a.g, S_in_.f32(), a.o, h_out, st);
    }
    if (p + 1 < P) {
      TimelineSpan span(rt_, "send", Lane::compute);
      rt_.comm->send(h_out, bytes, p + 1, st);
    }
  }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    const int p = rt_.rank(), P = rt_.world();
    const Stream st = rt_.dev->compute_stream();
    const size_t bytes = ws_.shape.state_elems() * 4;
    if (ws_.remakes_states()) {  // from the S_in the forward received, before this rank waits for dS_out
      TimelineSpan span(rt_, "remake_states", Lane::compute);
      gla_remake_states(*rt_.kern, ws_, f.k, f.v, f.g, S_in_.f32(), st);
    }
    if (p == P - 1) {
      copy_or_zero(*rt_.dev, dS_out_.f32(), a.dht, ws_.shape.state_elems(), st);
    } else {
      TimelineSpan span(rt_, "recv", Lane::compute);
      rt_.comm->recv(dS_out_.get(), bytes, p + 1, st);
    }
    float* dh_in = a.dh_in ? a.dh_in : dh_.f32();
    {
      TimelineSpan span(rt_, "gla_backward", Lane::compute);
      gla_backward_saved(*rt_.kern, ws_, f.q, f.k, f.v, f.h_out ? f.h_out : ht_.f32(), a.d_o, dS_out_.f32(), a.dq,
                         a.dk, a.dv, a.dg, dh_in, st, a.grad_ld);
    }
    if (p > 0) {
      TimelineSpan span(rt_, "send", Lane::compute);
      rt_.comm->send(dh_in, bytes, p - 1, st);
    }
  }
  bool takes_grad_ld() const override { return true; }

 private:
  Runtime& rt_;
  GlaWorkspace ws_;
  Buffer S_in_, dS_out_, ht_, dh_;  // ht_, dh_: for a caller that wants no h_out / dh_in
};

}  // namespace
}  // namespace spb

using spb::Lasp1;
SPB_REGISTER_METHOD("lasp1", "LASP-1: serial chain of states, receive before compute, P-1 hops", Lasp1)
