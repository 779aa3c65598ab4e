#include "sp/rank_attention.h"

#include "runtime/error.h"
#include "kernels/gla/gla.h"

namespace spb {
namespace {

class GlaAttention final : public RankAttention {
 public:
  GlaAttention(Runtime& rt, const SpConfig& c) : rt_(rt), ws_(*rt.dev, *rt.kern, c.local, c.shared_dhs, c.remade_states) {}

  void forward(const SpForwardArgs& a, const float* h0, float* ht) override {
    gla_forward(*rt_.kern, ws_, a.q, a.k, a.v, a.g, h0, a.o, ht ? ht : ws_.ht.f32(), rt_.dev->compute_stream());
  }
  void prepare_backward(const SpForwardArgs& f, const float* h0) override {
    if (ws_.remakes_states()) gla_remake_states(*rt_.kern, ws_, f.k, f.v, f.g, h0, rt_.dev->compute_stream());
  }
  bool remakes_states() const override { return ws_.remakes_states(); }
  void backward(const SpForwardArgs& f, const SpBackwardArgs& a, const float* h0, const float* forward_ht,
                const float* dht, float* dh0) override {
    (void)h0;  // the forward's chunk states carry it
    gla_backward_saved(*rt_.kern, ws_, f.q, f.k, f.v, forward_ht ? forward_ht : ws_.ht.f32(), a.d_o, dht, a.dq, a.dk,
                       a.dv, a.dg, dh0, rt_.dev->compute_stream(), a.grad_ld);
  }
  bool takes_grad_ld() const override { return true; }
  const char* forward_span() const override { return "gla_forward"; }
  const char* backward_span() const override { return "gla_backward"; }

 private:
  Runtime& rt_;
  GlaWorkspace ws_;
};

class GdnAttention final : public RankAttention {
 public:
  GdnAttention(Runtime& rt, const SpConfig& c) : rt_(rt), s_(gdn_shape(c.local)) {
    SPB_USAGE(rt.gdn, "--attention gdn: the " + rt.backend + " backend has no Gated DeltaNet kernels");
  }

  void forward(const SpForwardArgs& a, const float* h0, float* ht) override {
    rt_.gdn->forward(s_, a.q, a.k, a.v, static_cast<const float*>(a.g), a.beta, h0, a.o, ht,
                     rt_.dev->compute_stream());
  }
  void backward(const SpForwardArgs& f, const SpBackwardArgs& a, const float* h0, const float* forward_ht,
                const float* dht, float* dh0) override {
    (void)forward_ht;
    SPB_CHECK(a.grad_ld == 0, "Gated DeltaNet writes its gradients dense (no grad_ld)");
    rt_.gdn->backward(s_, f.q, f.k, f.v, static_cast<const float*>(f.g), f.beta, h0, a.d_o, dht, a.dq, a.dk, a.dv,
                      static_cast<float*>(a.dg), a.dbeta, dh0, rt_.dev->compute_stream());
  }
  bool takes_grad_ld() const override { return false; }
  const char* forward_span() const override { return "gdn_forward"; }
  const char* backward_span() const override { return "gdn_backward"; }

 private:
  Runtime& rt_;
  GdnShape s_;
};

}  // namespace

GdnShape gdn_shape(const GlaShape& s) { return GdnShape{s.B, s.T, s.H, s.dk, s.dv}; }

std::unique_ptr<RankAttention> make_rank_attention(Runtime& rt, const SpConfig& c) {
  if (c.attention == Attention::gdn) return std::make_unique<GdnAttention>(rt, c);
  return std::make_unique<GlaAttention>(rt, c);
}

}  // namespace spb
