// Ring-Attention-style SP: the inputs themselves travel. In the forward, (k, v, g) blocks go round the ring; at step j
// rank p holds the block of rank p-j, computes that rank's map (A, M; sp/rank_map.h) from it and composes it into
// S_in (the offset of the map of the ranks since). In the backward, (q, do, g) blocks go round the other way and each
// rank folds the state gradients D of the ranks after it into dS_out. Each step's transfer (communication stream)
// overlaps the previous step's compute (compute stream); two ring buffers alternate, and a transfer never overwrites
// a buffer the compute stream is still reading.
// GLA's block map is a reduction that only reads the block (Lambda, M), and its output from zero-start states
// overlaps the first step. Gated DeltaNet's blocks carry beta too (and k in the backward, which D and A^T need), each
// arriving block's dense map costs about a forward of the block (and its D about a backward): P - 1 passes more per
// direction than zeco, the price of sending no state; and it runs in order (SpLocal), its output after the ring.
#include <initializer_list>
#include <utility>

#include "runtime/error.h"
#include "sp/method.h"
#include "sp/rank_attention.h"
#include "sp/sp_local.h"
#include "sp/timeline.h"

namespace spb {
namespace {

class Ring final : public SpMethod {
 public:
  Ring(Runtime& rt, const SpConfig& c)
      : rt_(rt), s_(c.local), gdn_(c.attention == Attention::gdn), local_(make_sp_local(rt, c)),
        act_(dtype_size(rt.kern->act_dtype())),
        pack_bytes_((2 * c.local.qk_elems() + c.local.v_elems()) * act_ + (gdn_ ? 2 * gate_bytes() : 0)),
        ring_{Buffer(*rt.dev, pack_bytes_), Buffer(*rt.dev, pack_bytes_)},
        gc_(*rt.dev, c.local.qk_elems() * 4), lambda_(*rt.dev, local_->map().transition_bytes()),
        decay_(*rt.dev, local_->map().transition_bytes()), contrib_(*rt.dev, local_->map().state_bytes()),
        packed_(*rt.dev, EventUse::order), received_(*rt.dev, EventUse::order), joined_(*rt.dev, EventUse::order),
        used_{EventHandle(*rt.dev, EventUse::order), EventHandle(*rt.dev, EventUse::order)} {}

  bool takes_grad_ld() const override { return !gdn_; }  // GLA's gradients are SpLocalGla's chunk_grads

  void forward(const SpForwardArgs& a) override {
    if (gdn_) return forward_gdn(a);
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    local_->forward_local_states(a);
    pack(a.k, a.v, a.g, s_.qk_elems(), s_.v_elems());
    local_->forward_local_output(a);  // overlaps the first step
    const RankMap map = local_->map();
    dev.fill_zero(local_->S_in(), map.state_bytes(), st);
    map.identity(decay_.f32(), st);
    rotate(+1, pack_bytes_, [&](const char* blk, int src) {
      if (src < 0) return false;
      // M and Lambda of rank src from its (k, v, g); (decay, S_in) = (decay, S_in) after (Lambda, M).
      const char* k = blk;
      const char* v = blk + s_.qk_elems() * act_;
      const char* g = v + s_.v_elems() * act_;
      rt_.kern->chunk_final_state(s_, k, v, g, gc_.f32(), contrib_.f32(), lambda_.f32(), st);
      accumulate(local_->S_in());
      return true;
    });
    if (a.h0) map.apply(decay_.f32(), a.h0, local_->S_in(), local_->S_in(), st);
    local_->forward_apply_initial(a);
    local_->fold_forward(local_->S_in(), a.h_out ? a.h_out : local_->spare_state(), st);
  }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    if (gdn_) return backward_gdn(f, a);
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    local_->backward_boundary(f, a);  // D_p, for dh_in
    pack(f.q, a.d_o, f.g, s_.qk_elems(), s_.v_elems());
    local_->backward_true_states();  // overlaps the first step
    const RankMap map = local_->map();
    dev.fill_zero(local_->dS_out(), map.state_bytes(), st);
    map.identity(decay_.f32(), st);
    rotate(-1, pack_bytes_, [&](const char* blk, int src) {
      if (src >= rt_.world()) return false;
      // D and Lambda of rank src from its (q, do, g); (decay, dS_out) = (decay, dS_out) after (Lambda, D).
      const char* q = blk;
      const char* d_o = blk + s_.qk_elems() * act_;
      const char* g = d_o + s_.v_elems() * act_;
      rt_.kern->chunk_cumsum(s_, g, gc_.f32(), lambda_.f32(), st);  // lambda_ (gc_ where the kernel reads gc)
      rt_.kern->chunk_initial_dstate(s_, q, d_o, g, gc_.f32(), contrib_.f32(), st);
      accumulate(local_->dS_out());
      return true;
    });
    if (a.dht) map.apply(decay_.f32(), a.dht, local_->dS_out(), local_->dS_out(), st);
    local_->backward_finish(f, a);
    local_->fold_backward(local_->dS_out(), a.dh_in ? a.dh_in : local_->spare_state(), st);
  }

 private:
  // Gated DeltaNet, in order: this rank's map first (for h_out), the ring, then the whole forward from S_in. A block
  // is [k | v | g | beta].
  void forward_gdn(const SpForwardArgs& a) {
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    local_->forward_boundary(a);
    const size_t qk = s_.qk_elems() * act_, vb = s_.v_elems() * act_;
    const size_t bytes = pack({{a.k, qk}, {a.v, vb}, {a.g, gate_bytes()}, {a.beta, gate_bytes()}});
    const RankMap map = local_->map();
    dev.fill_zero(local_->S_in(), map.state_bytes(), st);
    map.identity(decay_.f32(), st);
    rotate(+1, bytes, [&](const char* blk, int src) {
      if (src < 0) return false;
      const float* g = reinterpret_cast<const float*>(blk + qk + vb);
      rt_.gdn->rank_map(gdn_shape(s_), blk, blk + qk, g, g + gates(), lambda_.f32(), contrib_.f32(), st);
      accumulate(local_->S_in());
      return true;
    });
    if (a.h0) map.apply(decay_.f32(), a.h0, local_->S_in(), local_->S_in(), st);
    local_->forward_output_from_initial(a);
    local_->fold_forward(local_->S_in(), a.h_out ? a.h_out : local_->spare_state(), st);
  }

  // The backward likewise: a block is [q | do | k | g | beta], whose A^T and D the arriving rank makes.
  void backward_gdn(const SpForwardArgs& f, const SpBackwardArgs& a) {
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    local_->backward_boundary(f, a);  // D_p, for dh_in
    const size_t qk = s_.qk_elems() * act_, vb = s_.v_elems() * act_;
    const size_t bytes = pack({{f.q, qk}, {a.d_o, vb}, {f.k, qk}, {f.g, gate_bytes()}, {f.beta, gate_bytes()}});
    const RankMap map = local_->map();
    dev.fill_zero(local_->dS_out(), map.state_bytes(), st);
    map.identity(decay_.f32(), st);
    rotate(-1, bytes, [&](const char* blk, int src) {
      if (src >= rt_.world()) return false;
      const char *q = blk, *d_o = blk + qk, *k = d_o + vb;
      const float* g = reinterpret_cast<const float*>(k + qk);
      const GdnShape gs = gdn_shape(s_);
      rt_.gdn->rank_map(gs, k, nullptr, g, g + gates(), lambda_.f32(), nullptr, st);
      rt_.gdn->dense_transpose(size_t(s_.B) * s_.H, size_t(s_.dk), lambda_.f32(), lambda_.f32(), st);
      rt_.gdn->initial_dstate(gs, q, k, g, g + gates(), d_o, contrib_.f32(), st);
      accumulate(local_->dS_out());
      return true;
    });
    if (a.dht) map.apply(decay_.f32(), a.dht, local_->dS_out(), local_->dS_out(), st);
    local_->backward_finish(f, a);
    local_->fold_backward(local_->dS_out(), a.dh_in ? a.dh_in : local_->spare_state(), st);
  }
  size_t gates() const { return size_t(s_.B) * s_.T * s_.H; }  // Gated DeltaNet's gates (and betas), fp32
  size_t gate_bytes() const { return gates() * 4; }

  // ring_[0] = the parts one after another, each (pointer, bytes); returns their bytes.
  size_t pack(std::initializer_list<std::pair<const void*, size_t>> parts) {
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    char* dst = static_cast<char*>(ring_[0].get());
    size_t total = 0;
    for (const auto& [src, bytes] : parts) dev.copy(dst + total, src, bytes, st), total += bytes;
    SPB_CHECK(total <= pack_bytes_, "ring: a block of " + std::to_string(total) + " bytes past its buffers");
    dev.record(packed_.get(), st);
    return total;
  }
  // GLA's [x | y | g] (x, g: qk-shaped; y: v-shaped).
  void pack(const void* x, const void* y, const void* g, size_t nx, size_t ny) {
    pack({{x, nx * act_}, {y, ny * act_}, {g, nx * act_}});
  }

  // P-1 steps of blocks of `bytes`; at step j the block of rank p - dir*j arrives and `use(block, src)` runs on the
  // compute stream (returning whether it read the block).
  template <class Use>
  void rotate(int dir, size_t bytes, Use&& use) {
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream(), cs = dev.comm_stream();
    const int p = rt_.rank(), P = rt_.world();
    const int to = (p + dir + P) % P, from = (p - dir + P) % P;
    dev.wait(cs, packed_.get());
    for (int step = 1; step < P; ++step) {
      const int cur = (step - 1) % 2, nxt = step % 2;
      dev.wait(cs, used_[nxt].get());  // the compute stream is done with what this buffer held two steps ago
      TimelineSpan transfer(rt_, "ring_step", Lane::comm);
      rt_.comm->group_start();
      rt_.comm->send(ring_[cur].get(), bytes, to, cs);
      rt_.comm->recv(ring_[nxt].get(), bytes, from, cs);
      rt_.comm->group_end();
      dev.record(received_.get(), cs);
      dev.wait(st, received_.get());
      TimelineSpan compute(rt_, "ring_fold", Lane::compute);
      if (use(static_cast<const char*>(ring_[nxt].get()), p - dir * step)) dev.record(used_[nxt].get(), st);
    }
    dev.record(joined_.get(), cs);
    dev.wait(st, joined_.get());
  }

  // (decay_, carry), the map of the ranks between src and this one, composed after src's (lambda_, contrib_).
  void accumulate(float* carry) {
    local_->map().compose(decay_.f32(), carry, lambda_.f32(), contrib_.f32(), decay_.f32(), carry,
                         rt_.dev->compute_stream());
  }

  Runtime& rt_;
  GlaShape s_;
  bool gdn_;
  std::unique_ptr<SpLocal> local_;
  size_t act_, pack_bytes_;
  Buffer ring_[2];
  Buffer gc_, lambda_, decay_, contrib_;
  EventHandle packed_, received_, joined_;
  EventHandle used_[2];
};

}  // namespace
}  // namespace spb

using spb::Ring;
SPB_REGISTER_METHOD("ring", "Ring-Attention style: k, v, g blocks travel the ring; (q, do, g) back in the backward", Ring)
