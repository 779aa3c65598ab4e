// Ring-Attention-style SP for GLA: the inputs themselves travel. In the forward, (k, v, g) blocks go round the ring;
// at step j rank p holds the block of rank p-j, computes that rank's map (Lambda, M; sp/rank_map.h) from it and
// composes it into S_in (the offset of the map of the ranks since). In the backward, (q, do, g) blocks go round the
// other way and each rank folds the state gradients D of the ranks after it into dS_out. Each step's transfer
// (communication stream) overlaps the previous step's compute (compute stream); two ring buffers alternate, and a
// transfer never overwrites a buffer the compute stream is still reading.
#include "sp/method.h"
#include "sp/sp_local.h"
#include "sp/timeline.h"

namespace spb {
namespace {

class Ring final : public SpMethod {
 public:
  Ring(Runtime& rt, const SpConfig& c)
      : rt_(rt), s_(c.local), local_(make_sp_local(rt, c)),
        act_(dtype_size(rt.kern->act_dtype())),
        pack_bytes_((2 * c.local.qk_elems() + c.local.v_elems()) * act_),
        ring_{Buffer(*rt.dev, pack_bytes_), Buffer(*rt.dev, pack_bytes_)},
        gc_(*rt.dev, c.local.qk_elems() * 4), lambda_(*rt.dev, local_->map().transition_bytes()),
        decay_(*rt.dev, local_->map().transition_bytes()), contrib_(*rt.dev, local_->map().state_bytes()),
        packed_(*rt.dev, EventUse::order), received_(*rt.dev, EventUse::order), joined_(*rt.dev, EventUse::order),
        used_{EventHandle(*rt.dev, EventUse::order), EventHandle(*rt.dev, EventUse::order)} {}

  bool takes_grad_ld() const override { return true; }  // its gradients are SpLocalGla's chunk_grads

  void forward(const SpForwardArgs& a) override {
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    local_->forward_local_states(a);
    pack(a.k, a.v, a.g, s_.qk_elems(), s_.v_elems());
    local_->forward_local_output(a);  // overlaps the first step
    const RankMap map = local_->map();
    dev.fill_zero(local_->S_in(), map.state_bytes(), st);
    map.identity(decay_.f32(), st);
    rotate(+1, [&](const char* blk, int src) {
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
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    local_->backward_boundary(f, a);  // D_p, for dh_in
    pack(f.q, a.d_o, f.g, s_.qk_elems(), s_.v_elems());
    local_->backward_true_states();  // overlaps the first step
    const RankMap map = local_->map();
    dev.fill_zero(local_->dS_out(), map.state_bytes(), st);
    map.identity(decay_.f32(), st);
    rotate(-1, [&](const char* blk, int src) {
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
  // ring_[0] = [x | y | g] of this rank (x, g: qk-shaped; y: v-shaped).
  void pack(const void* x, const void* y, const void* g, size_t nx, size_t ny) {
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream();
    char* dst = static_cast<char*>(ring_[0].get());
    dev.copy(dst, x, nx * act_, st);
    dev.copy(dst + nx * act_, y, ny * act_, st);
    dev.copy(dst + (nx + ny) * act_, g, nx * act_, st);
    dev.record(packed_.get(), st);
  }

  // P-1 steps; at step j the block of rank p - dir*j arrives and `use(block, src)` runs on the compute stream
  // (returning whether it read the block).
  template <class Use>
  void rotate(int dir, Use&& use) {
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
      rt_.comm->send(ring_[cur].get(), pack_bytes_, to, cs);
      rt_.comm->recv(ring_[nxt].get(), pack_bytes_, from, cs);
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
  std::unique_ptr<SpLocal> local_;
  size_t act_, pack_bytes_;
  Buffer ring_[2];
  Buffer gc_, lambda_, decay_, contrib_;
  EventHandle packed_, received_, joined_;
  EventHandle used_[2];
};

// GLA only so far: for Gated DeltaNet each arriving block's dense map would be built from (k, v, g, beta) at about
// the cost of its forward, P - 1 times a pass (DESIGN §12).
std::string gla_only(const SpConfig& c, int) {
  return c.attention == Attention::gla ? "" : "ring has no Gated DeltaNet version yet (DESIGN §12)";
}

}  // namespace
}  // namespace spb

using spb::Ring;
SPB_REGISTER_METHOD_LIMITED("ring", "Ring-Attention style: k, v, g blocks travel the ring; (q, do, g) back in the backward",
                            Ring, spb::gla_only)
