// DeepSpeed-Ulysses for GLA: an all-to-all turns the sequence-sharded tensors [B, L, H, D] into head-sharded ones
// [B, P*L, H/P, D], each rank runs the single-device GLA over the whole sequence for its H/P heads, and an all-to-all
// turns the outputs (and in the backward, the gradients) back. No state passes between ranks; the traffic is the
// activations themselves. The whole sequence's ht and dh0 come back to every rank by an all-gather over heads.
#include "runtime/error.h"
#include "sp/method.h"
#include "sp/timeline.h"
#include "kernels/gla/gla.h"

namespace spb {
namespace {

// Every rank takes H / P whole heads; GLA only so far (Gated DeltaNet's beta and per-head gates would travel too).
std::string heads_limit(const SpConfig& c, int P) {
  if (c.attention != Attention::gla) return "ulysses has no Gated DeltaNet version yet (DESIGN §12)";
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

class Ulysses final : public SpMethod {
 public:
  Ulysses(Runtime& rt, const SpConfig& c)
      : rt_(rt), L_(c.local), F_(head_shape(c, rt.world())), act_(dtype_size(rt.kern->act_dtype())),
        ws_(*rt.dev, *rt.kern, F_, c.shared_dhs, c.remade_states),
        q_(*rt.dev, F_.qk_elems() * act_), k_(*rt.dev, F_.qk_elems() * act_), v_(*rt.dev, F_.v_elems() * act_),
        g_(*rt.dev, F_.qk_elems() * act_), x_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        y_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        send_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        recv_(*rt.dev, std::max(F_.qk_elems(), F_.v_elems()) * act_),
        dq_(*rt.dev, F_.qk_elems() * act_), dk_(*rt.dev, F_.qk_elems() * act_),
        dg_(*rt.dev, F_.qk_elems() * act_),
        h0_(*rt.dev, F_.state_elems() * 4), dht_(*rt.dev, F_.state_elems() * 4), ht_(*rt.dev, F_.state_elems() * 4),
        mine_(*rt.dev, F_.state_elems() * 4),
        all_(*rt.dev, L_.state_elems() * 4) {}

  void forward(const SpForwardArgs& a) override {
    to_heads(a.q, q_.get(), L_.dk);
    to_heads(a.k, k_.get(), L_.dk);
    to_heads(a.v, v_.get(), L_.dv);
    to_heads(a.g, g_.get(), L_.dk);
    const float* h0 = a.h0 ? my_heads(a.h0, h0_.f32()) : nullptr;
    {
      TimelineSpan span(rt_, "gla_forward", Lane::compute);
      gla_forward(*rt_.kern, ws_, q_.get(), k_.get(), v_.get(), g_.get(), h0, x_.get(), ht_.f32(), stream());
    }
    to_sequence(x_.get(), a.o, L_.dv);
    if (a.h_out) all_heads(ht_.f32(), a.h_out);
  }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    SPB_CHECK(a.grad_ld == 0, "ulysses writes dq, dk and dv dense (takes_grad_ld)");
    to_heads(a.d_o, y_.get(), L_.dv);
    const float* h0 = f.h0 ? my_heads(f.h0, h0_.f32()) : nullptr;
    const float* dht = a.dht ? my_heads(a.dht, dht_.f32()) : nullptr;
    {
      TimelineSpan span(rt_, "gla_backward", Lane::compute);
      // (q_, k_, v_ and g_ hold the forward's, in this object's head layout)
      if (ws_.remakes_states()) gla_remake_states(*rt_.kern, ws_, k_.get(), v_.get(), g_.get(), h0, stream());
      gla_backward_saved(*rt_.kern, ws_, q_.get(), k_.get(), v_.get(), ht_.f32(), y_.get(), dht, dq_.get(), dk_.get(),
                         x_.get(), dg_.get(), mine_.f32(), stream());
    }
    to_sequence(dq_.get(), a.dq, L_.dk);
    to_sequence(dk_.get(), a.dk, L_.dk);
    to_sequence(x_.get(), a.dv, L_.dv);
    to_sequence(dg_.get(), a.dg, L_.dk);
    if (a.dh_in) all_heads(mine_.f32(), a.dh_in);
  }

 private:
  Stream stream() const { return rt_.dev->compute_stream(); }

  // Layouts, for one tensor of feature size D (P ranks, Hp = H/P heads each):
  //   local [B, L, H, D]  <->  wire [P][B, L, Hp*D]  <->(all-to-all)<->  wire [P][B, L, Hp*D]  <->  full [B, P*L, Hp, D]
  void local_wire(const void* src, void* dst, int D, bool to_wire) {
    const int64_t P = rt_.world(), B = L_.B, L = L_.T, H = L_.H, row = H / P * D;
    const int64_t dims[4] = {P, B, L, row};
    const int64_t local[4] = {row, L * H * D, H * D, 1}, wire[4] = {B * L * row, L * row, row, 1};
    rt_.kern->copy_4d(dst, src, act_, dims, to_wire ? wire : local, to_wire ? local : wire, stream());
  }
  void wire_full(const void* src, void* dst, int D, bool to_full) {
    const int64_t P = rt_.world(), B = L_.B, L = L_.T, row = L_.H / P * D;
    const int64_t dims[4] = {P, B, L, row};
    const int64_t wire[4] = {B * L * row, L * row, row, 1}, full[4] = {L * row, P * L * row, row, 1};
    rt_.kern->copy_4d(dst, src, act_, dims, to_full ? full : wire, to_full ? wire : full, stream());
  }
  size_t slab_bytes(int D) const { return size_t(L_.B) * L_.T * (L_.H / rt_.world()) * D * act_; }

  void to_heads(const void* local, void* full, int D) {
    TimelineSpan span(rt_, "all_to_all", Lane::compute);
    local_wire(local, send_.get(), D, true);
    rt_.comm->all_to_all(send_.get(), recv_.get(), slab_bytes(D), stream());
    wire_full(recv_.get(), full, D, true);
  }
  void to_sequence(const void* full, void* local, int D) {
    TimelineSpan span(rt_, "all_to_all", Lane::compute);
    wire_full(full, send_.get(), D, false);
    rt_.comm->all_to_all(send_.get(), recv_.get(), slab_bytes(D), stream());
    local_wire(recv_.get(), local, D, false);
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
  GlaWorkspace ws_;
  Buffer q_, k_, v_, g_, x_, y_, send_, recv_, dq_, dk_, dg_, h0_, dht_, ht_, mine_, all_;
};

}  // namespace
}  // namespace spb

using spb::Ulysses;
SPB_REGISTER_METHOD_LIMITED("ulysses", "DeepSpeed-Ulysses: all-to-all to heads, whole-sequence GLA per head group, back",
                            Ulysses, spb::heads_limit)
