// LASP-2: every rank all-gathers the rank maps (A_j, M_j) of all ranks (sp/rank_map.h: [state | transition]; GLA's A_j
// is its decay Lambda_j, Gated DeltaNet's a dk x dk matrix per head) and
// folds the ranks before it (the suffix after it in the backward). The all-gather and the fold run on the
// communication stream, overlapped with the local compute, as the LASP-2 paper does; the price is P states of traffic
// per rank instead of one. The orders (--overlap) are
// zeco's: the local schedule is SpLocalGla's for both.
#include "sp/method.h"
#include "sp/sp_local.h"
#include "sp/timeline.h"

namespace spb {
namespace {

class Lasp2 final : public SpMethod {
 public:
  Lasp2(Runtime& rt, const SpConfig& c)
      : rt_(rt), s_(c.local), overlap_(c.overlap), local_(make_sp_local(rt, c)),
        record_elems_(local_->map().state_elems() + local_->map().transition_elems()),
        mine_(*rt.dev, record_elems_ * 4), all_(*rt.dev, record_elems_ * 4 * rt.world()),
        ready_(*rt.dev, EventUse::order), folded_(*rt.dev, EventUse::order) {}

  bool takes_grad_ld() const override { return true; }  // its gradients are SpLocalGla's chunk_grads

  void forward(const SpForwardArgs& a) override {
    Device& dev = *rt_.dev;
    // In order, gc on the communication stream (idle until the all-gather) beside the boundary kernel, as in zeco.
    if (overlap_ == SpOverlap::output) local_->forward_local_states(a);
    else local_->forward_boundary(a, /*gates_on_comm=*/true);
    gather(local_->local_final(), local_->transition());
    // S_in = fold of ranks 0..p-1 over h0.
    const Stream cs = dev.comm_stream();
    TimelineSpan span(rt_, "fold", Lane::comm);
    copy_or_zero(dev, local_->S_in(), a.h0, s_.state_elems(), cs);
    for (int j = 0; j < rt_.rank(); ++j) fold_rank(j, local_->S_in());
    if (overlap_ == SpOverlap::states) local_->signal_arrival(true, cs);
    dev.record(folded_.get(), cs);
    if (overlap_ == SpOverlap::states) {
      local_->forward_states_beside(a);  // beside the all-gather
      dev.wait(dev.compute_stream(), folded_.get());
      local_->forward_output_after_arrival(a);
    } else if (overlap_ == SpOverlap::output) {
      local_->forward_local_output(a);  // overlaps the all-gather
      dev.wait(dev.compute_stream(), folded_.get());
      local_->forward_apply_initial(a);
    } else {
      local_->forward_gates(a);  // overlaps the all-gather (where it did not run beside the boundary kernel)
      dev.wait(dev.compute_stream(), folded_.get());
      local_->forward_output_from_initial(a);
    }
    local_->fold_forward(local_->S_in(), a.h_out ? a.h_out : local_->spare_state(), dev.compute_stream());
  }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    Device& dev = *rt_.dev;
    local_->backward_boundary(f, a);
    gather(local_->local_dh_in(), local_->reverse_transition());
    // dS_out = fold of ranks P-1..p+1 over dht.
    const Stream cs = dev.comm_stream();
    TimelineSpan span(rt_, "fold_reverse", Lane::comm);
    copy_or_zero(dev, local_->dS_out(), a.dht, s_.state_elems(), cs);
    for (int j = rt_.world() - 1; j > rt_.rank(); --j) fold_rank(j, local_->dS_out());
    if (overlap_ == SpOverlap::states) local_->signal_arrival(false, cs);
    dev.record(folded_.get(), cs);
    if (overlap_ == SpOverlap::states) {
      local_->backward_states_beside(f, a);  // beside the all-gather
      dev.wait(dev.compute_stream(), folded_.get());
      local_->backward_finish_after_arrival(f, a);
    } else {
      local_->backward_true_states();  // overlaps the all-gather (only the overlapped forward leaves work here)
      dev.wait(dev.compute_stream(), folded_.get());
      local_->backward_finish(f, a);
    }
    local_->fold_backward(local_->dS_out(), a.dh_in ? a.dh_in : local_->spare_state(), dev.compute_stream());
  }

 private:
  // Every rank's [state | transition] record into all_, on the communication stream (the backward's transition is
  // A^T: SpLocal::reverse_transition).
  void gather(const float* state, const float* transition) {
    Device& dev = *rt_.dev;
    const Stream st = dev.compute_stream(), cs = dev.comm_stream();
    const RankMap map = local_->map();
    dev.copy(mine_.f32(), state, map.state_bytes(), st);
    dev.copy(mine_.f32() + map.state_elems(), transition, map.transition_bytes(), st);
    dev.record(ready_.get(), st);
    dev.wait(cs, ready_.get());
    TimelineSpan span(rt_, "allgather", Lane::comm);
    rt_.comm->all_gather(mine_.get(), all_.get(), record_elems_ * 4, cs);
  }
  // carry = A_j carry + state_j (GLA: A_j = diag(exp Lambda_j))
  void fold_rank(int j, float* carry) {
    const RankMap map = local_->map();
    const float* rec = all_.f32() + size_t(j) * record_elems_;
    map.apply(rec + map.state_elems(), carry, rec, carry, rt_.dev->comm_stream());
  }

  Runtime& rt_;
  GlaShape s_;
  SpOverlap overlap_;
  std::unique_ptr<SpLocal> local_;
  size_t record_elems_;
  Buffer mine_, all_;
  EventHandle ready_, folded_;
};

}  // namespace
}  // namespace spb

using spb::Lasp2;
SPB_REGISTER_METHOD("lasp2", "LASP-2: all-gather of every rank's state and decay, then a prefix fold", Lasp2)
