// DeepSpeed-Ulysses: an all-to-all turns the sequence-sharded tensors [B, L, H, D] into head-sharded ones
// [B, P*L, H/P, D], each rank runs the single-device attention (GLA, or Gated DeltaNet with its per-head gates and
// betas travelling too) over the whole sequence for its H/P heads, and an all-to-all turns the outputs (and in the
// backward, the gradients) back. No state passes between ranks; the traffic is the activations themselves. The whole
// sequence's ht and dh0 come back to every rank by an all-gather over heads.
#include "runtime/error.h"
#include "sp/method.h"
#include "sp/rank_attention.h"
#include "sp/timeline.h"

namespace spb {
namespace {

// Every rank takes H / P whole heads.
std::string heads_limit(const SpConfig& c, int P) {
  return c.local.H % P == 0 ? "" : "ulysses splits the heads over the ranks, and H=" + std::to_string(c.local.H) +
                                       " is not divisible by the world size " + std::to_string(P);
}

GlaShape head_shape(const SpConfig& c, int P) {
  const std::string why = heads_limit(c, P);
  SPB_USAGE(why.empty(), "ulysses: " + why);
  GlaShape s = c.local;
  s.T *= P;
  s.H /= P;
  return s;
}

// The whole sequence's attention over this rank's heads, in the family's passes (sp/rank_attention.h).
SpConfig head_config(const SpConfig& c, int P) {
  SpConfig h = c;
  h.local = head_shape(c, P);
  return h;
}

class Ulysses final : public SpMethod {
 public:
  Ulysses(Runtime& rt, const SpConfig& c)
      : rt_(rt), L_(c.local), F_(head_shape(c, rt.world())), act_(dtype_size(rt.kern->act_dtype())),
        gdn_(c.attention == Attention::gdn), attn_(make_rank_attention(rt, head_config(c, rt.world()))),
        q_(*rt.dev, F_.qk_elems() * act_), k_(*rt.dev, F_.qk_elems() * act_), v_(*rt.dev, F_.v_elems() * act_),
        g_(*rt.dev, gate_elems(F_) * gate_bytes()), x_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        y_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        send_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        recv_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        dq_(*rt.dev, F_.qk_elems() * act_), dk_(*rt.dev, F_.qk_elems() * act_),
        dg_(*rt.dev, gate_elems(F_) * gate_bytes()),
        h0_(*rt.dev, F_.state_elems() * 4), dht_(*rt.dev, F_.state_elems() * 4), ht_(*rt.dev, F_.state_elems() * 4),
        mine_(*rt.dev, F_.state_elems() * 4),
        all_(*rt.dev, L_.state_elems() * 4) {
    if (gdn_) beta_ = Buffer(*rt.dev, gate_elems(F_) * 4), dbeta_ = Buffer(*rt.dev, gate_elems(F_) * 4);
  }

  void forward(const SpForwardArgs& a) override {
    to_heads(a.q, q_.get(), L_.dk, act_);
    to_heads(a.k, k_.get(), L_.dk, act_);
    to_heads(a.v, v_.get(), L_.dv, act_);
    to_heads(a.g, g_.get(), gate_row(), gate_bytes());
    if (gdn_) to_heads(a.beta, beta_.get(), 1, 4);
    const float* h0 = a.h0 ? my_heads(a.h0, h0_.f32()) : nullptr;
    {
      TimelineSpan span(rt_, attn_->forward_span(), Lane::compute);
      attn_->forward(head_args(), h0, ht_.f32());
    }
    to_sequence(x_.get(), a.o, L_.dv, act_);
    if (a.h_out) all_heads(ht_.f32(), a.h_out);
  }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    SPB_CHECK(a.grad_ld == 0, "ulysses writes dq, dk and dv dense (takes_grad_ld)");
    to_heads(a.d_o, y_.get(), L_.dv, act_);
    const float* h0 = f.h0 ? my_heads(f.h0, h0_.f32()) : nullptr;
    const float* dht = a.dht ? my_heads(a.dht, dht_.f32()) : nullptr;
    {
      TimelineSpan span(rt_, attn_->backward_span(), Lane::compute);
      // (q_, k_, v_, g_ and beta_ hold the forward's, in this object's head layout)
      const SpForwardArgs hf = head_args();
      attn_->prepare_backward(hf, h0);
      SpBackwardArgs hb;
      hb.d_o = y_.get(), hb.dq = dq_.get(), hb.dk = dk_.get(), hb.dv = x_.get(), hb.dg = dg_.get();
      hb.dbeta = dbeta_.f32();
      attn_->backward(hf, hb, h0, ht_.f32(), dht, mine_.f32());
    }
    to_sequence(dq_.get(), a.dq, L_.dk, act_);
    to_sequence(dk_.get(), a.dk, L_.dk, act_);
    to_sequence(x_.get(), a.dv, L_.dv, act_);
    to_sequence(dg_.get(), a.dg, gate_row(), gate_bytes());
    if (gdn_) to_sequence(dbeta_.get(), a.dbeta, 1, 4);
    if (a.dh_in) all_heads(mine_.f32(), a.dh_in);
  }

 private:
  Stream stream() const { return rt_.dev->compute_stream(); }
  // The gates of a head and token: GLA's dk activations, Gated DeltaNet's one fp32 (as its beta).
  int gate_row() const { return gdn_ ? 1 : L_.dk; }
  size_t gate_bytes() const { return gdn_ ? 4 : act_; }
  size_t gate_elems(const GlaShape& s) const { return size_t(s.B) * s.T * s.H * size_t(gate_row()); }
  // The forward's inputs in this object's head layout, its output x_.
  SpForwardArgs head_args() {
    SpForwardArgs h;
    h.q = q_.get(), h.k = k_.get(), h.v = v_.get(), h.g = g_.get(), h.beta = beta_.f32(), h.o = x_.get();
    return h;
  }

  // Layouts, for one tensor of feature size D in elements of `eb` bytes (P ranks, Hp = H/P heads each):
  //   local [B, L, H, D]  <->  wire [P][B, L, Hp*D]  <->(all-to-all)<->  wire [P][B, L, Hp*D]  <->  full [B, P*L, Hp, D]
  void local_wire(const void* src, void* dst, int D, size_t eb, bool to_wire) {
    const int64_t P = rt_.world(), B = L_.B, L = L_.T, H = L_.H, row = H / P * D;
    const int64_t dims[4] = {P, B, L, row};
    const int64_t local[4] = {row, L * H * D, H * D, 1}, wire[4] = {B * L * row, L * row, row, 1};
    rt_.kern->copy_4d(dst, src, eb, dims, to_wire ? wire : local, to_wire ? local : wire, stream());
  }
  void wire_full(const void* src, void* dst, int D, size_t eb, bool to_full) {
    const int64_t P = rt_.world(), B = L_.B, L = L_.T, row = L_.H / P * D;
    const int64_t dims[4] = {P, B, L, row};
    const int64_t wire[4] = {B * L * row, L * row, row, 1}, full[4] = {L * row, P * L * row, row, 1};
    rt_.kern->copy_4d(dst, src, eb, dims, to_full ? full : wire, to_full ? wire : full, stream());
  }
  size_t slab_bytes(int D, size_t eb) const { return size_t(L_.B) * L_.T * (L_.H / rt_.world()) * D * eb; }

  void to_heads(const void* local, void* full, int D, size_t eb) {
    TimelineSpan span(rt_, "all_to_all", Lane::compute);
    local_wire(local, send_.get(), D, eb, true);
    rt_.comm->all_to_all(send_.get(), recv_.get(), slab_bytes(D, eb), stream());
    wire_full(recv_.get(), full, D, eb, true);
  }
  void to_sequence(const void* full, void* local, int D, size_t eb) {
    TimelineSpan span(rt_, "all_to_all", Lane::compute);
    wire_full(full, send_.get(), D, eb, false);
    rt_.comm->all_to_all(send_.get(), recv_.get(), slab_bytes(D, eb), stream());
    local_wire(recv_.get(), local, D, eb, false);
  }

  // This rank's heads of a [B, H, dk, dv] state.
  const float* my_heads(const float* state, float* out) {
    const int64_t S = int64_t(L_.dk) * L_.dv, Hp = L_.H / rt_.world();
    const int64_t dims[4] = {L_.B, Hp * S, 1, 1}, src[4] = {L_.H * S, 1, 0, 0}, dst[4] = {Hp * S, 1, 0, 0};
    rt_.kern->copy_4d(out, state + rt_.rank() * Hp * S, 4, dims, dst, src, stream());
    return out;
  }
  // Every rank's heads back into a [B, H, dk, dv] state.
  void all_heads(const float* mine, float* out) {
    rt_.comm->all_gather(mine, all_.get(), F_.state_elems() * 4, stream());
    const int64_t P = rt_.world(), S = int64_t(L_.dk) * L_.dv, Hp = L_.H / P;
    const int64_t dims[4] = {P, L_.B, Hp * S, 1}, src[4] = {L_.B * Hp * S, Hp * S, 1, 0},
                  dst[4] = {Hp * S, L_.H * S, 1, 0};
    rt_.kern->copy_4d(out, all_.get(), 4, dims, dst, src, stream());
  }

  Runtime& rt_;
  GlaShape L_, F_;  // this rank's sequence shard; this rank's head shard of the whole sequence
  size_t act_;
  bool gdn_;  // Gated DeltaNet: gates and betas of one fp32 a head and token travel too
  std::unique_ptr<RankAttention> attn_;
  Buffer q_, k_, v_, g_, x_, y_, send_, recv_, dq_, dk_, dg_, h0_, dht_, ht_, mine_, all_, beta_, dbeta_;
};

}  // namespace
}  // namespace spb

using spb::Ulysses;
SPB_REGISTER_METHOD_LIMITED("ulysses", "DeepSpeed-Ulysses: all-to-all to heads, whole-sequence attention per head group, back",
                            Ulysses, spb::heads_limit)
