// LASP-1: the serial chain, faithful to the official code. Rank p receives S_in from p-1 *before* its own compute,
// runs the whole local forward from it, and sends its final state on to p+1; the backward runs the chain in reverse.
// Nothing overlaps, so the chain's P-1 hops and the ranks' computes add up.
#include "sp/method.h"
#include "sp/rank_attention.h"
#include "sp/sp_local.h"
#include "sp/timeline.h"

namespace spb {
namespace {

class Lasp1 final : public SpMethod {
 public:
  Lasp1(Runtime& rt, const SpConfig& c)
      : rt_(rt), s_(c.local), attn_(make_rank_attention(rt, c)), S_in_(*rt.dev, c.local.state_elems() * 4),
        dS_out_(*rt.dev, c.local.state_elems() * 4), ht_(*rt.dev, c.local.state_elems() * 4),
        dh_(*rt.dev, c.local.state_elems() * 4) {}

  void forward(const SpForwardArgs& a) override {
    const int p = rt_.rank(), P = rt_.world();
    const Stream st = rt_.dev->compute_stream();
    const size_t bytes = s_.state_elems() * 4;
    if (p == 0) {
      copy_or_zero(*rt_.dev, S_in_.f32(), a.h0, s_.state_elems(), st);
    } else {
      TimelineSpan span(rt_, "recv", Lane::compute);
      rt_.comm->recv(S_in_.get(), bytes, p - 1, st);
    }
    float* h_out = a.h_out ? a.h_out : ht_.f32();
    {
      TimelineSpan span(rt_, attn_->forward_span(), Lane::compute);
      attn_->forward(a, S_in_.f32(), h_out);
    }
    if (p + 1 < P) {
      TimelineSpan span(rt_, "send", Lane::compute);
      rt_.comm->send(h_out, bytes, p + 1, st);
    }
  }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    const int p = rt_.rank(), P = rt_.world();
    const Stream st = rt_.dev->compute_stream();
    const size_t bytes = s_.state_elems() * 4;
    if (attn_->remakes_states()) {  // from the S_in the forward received, before this rank waits for dS_out
      TimelineSpan span(rt_, "remake_states", Lane::compute);
      attn_->prepare_backward(f, S_in_.f32());
    }
    if (p == P - 1) {
      copy_or_zero(*rt_.dev, dS_out_.f32(), a.dht, s_.state_elems(), st);
    } else {
      TimelineSpan span(rt_, "recv", Lane::compute);
      rt_.comm->recv(dS_out_.get(), bytes, p + 1, st);
    }
    float* dh_in = a.dh_in ? a.dh_in : dh_.f32();
    {
      TimelineSpan span(rt_, attn_->backward_span(), Lane::compute);
      attn_->backward(f, a, S_in_.f32(), f.h_out ? f.h_out : ht_.f32(), dS_out_.f32(), dh_in);
    }
    if (p > 0) {
      TimelineSpan span(rt_, "send", Lane::compute);
      rt_.comm->send(dh_in, bytes, p - 1, st);
    }
  }
  bool takes_grad_ld() const override { return attn_->takes_grad_ld(); }

 private:
  Runtime& rt_;
  GlaShape s_;
  std::unique_ptr<RankAttention> attn_;
  Buffer S_in_, dS_out_, ht_, dh_;  // ht_, dh_: for a caller that wants no h_out / dh_in
};

}  // namespace
}  // namespace spb

using spb::Lasp1;
SPB_REGISTER_METHOD("lasp1", "LASP-1: serial chain of states, receive before compute, P-1 hops", Lasp1)
