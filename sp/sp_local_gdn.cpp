// Gated DeltaNet's rank-local part (DESIGN §12), in order only: before the scan the rank's map (A_p, M_p) from its
// tokens alone (GdnKernels::rank_map), then the whole forward from the true incoming state; in the backward D_p
// alone, then the whole backward from the true incoming gradient. The reverse scan takes A_p^T, made beside A_p.
#include "runtime/error.h"
#include "sp/rank_attention.h"
#include "sp/sp_local.h"
#include "sp/timeline.h"

namespace spb {
namespace {

class SpLocalGdn final : public SpLocal {
 public:
  SpLocalGdn(Runtime& rt, const SpConfig& c, int groups)
      : SpLocal(rt, c.local, 1), s_(gdn_shape(c.local)) {
    SPB_USAGE(rt.gdn, "--attention gdn: the " + rt.backend + " backend has no Gated DeltaNet kernels");
    SPB_USAGE(c.overlap == SpOverlap::none, "--overlap " + std::to_string(int(c.overlap)) +
                                                ": Gated DeltaNet runs in order only (--overlap 0)");
    SPB_USAGE(groups == 1, "--head-groups: Gated DeltaNet scans all its heads at once (--head-groups 0 or 1)");
    A_ = Buffer(*rt.dev, map().transition_bytes());
    At_ = Buffer(*rt.dev, map().transition_bytes());
    ht_ = Buffer(*rt.dev, c.local.state_elems() * 4);
  }

  void forward_boundary(const SpForwardArgs& a, bool gates_on_comm, int group) override {
    (void)gates_on_comm, (void)group;
    TimelineSpan span(rt_, "boundary_map", Lane::compute);
    const Stream st = rt_.dev->compute_stream();
    rt_.gdn->rank_map(s_, a.k, a.v, gates(a), a.beta, A_.f32(), local_final(), st);
    rt_.gdn->dense_transpose(heads(), size_t(s_.dk), A_.f32(), At_.f32(), st);
  }
  bool forward_gates(const SpForwardArgs&) override { return false; }
  void forward_output_from_initial(const SpForwardArgs& a, int group) override {
    (void)group;
    TimelineSpan span(rt_, "output", Lane::compute);
    rt_.gdn->forward(s_, a.q, a.k, a.v, gates(a), a.beta, S_in(), a.o, ht_.f32(), rt_.dev->compute_stream());
  }
  void backward_boundary(const SpForwardArgs& f, const SpBackwardArgs& a, int group) override {
    (void)group;
    TimelineSpan span(rt_, "boundary_dstate", Lane::compute);
    rt_.gdn->initial_dstate(s_, f.q, f.k, gates(f), f.beta, a.d_o, local_dh_in(), rt_.dev->compute_stream());
  }
  void backward_true_states() override {}
  void backward_finish(const SpForwardArgs& f, const SpBackwardArgs& a, int group) override {
    (void)group;
    SPB_CHECK(a.grad_ld == 0, "Gated DeltaNet writes its gradients dense (no grad_ld)");
    TimelineSpan span(rt_, "grads", Lane::compute);
    rt_.gdn->backward(s_, f.q, f.k, f.v, gates(f), f.beta, S_in(), a.d_o, dS_out(), a.dq, a.dk, a.dv,
                      static_cast<float*>(a.dg), a.dbeta, nullptr, rt_.dev->compute_stream());
  }

  RankMap map() const override { return gdn_rank_map(rt_, shape_); }
  float* transition() override { return A_.f32(); }
  float* reverse_transition() override { return At_.f32(); }

 private:
  static const float* gates(const SpForwardArgs& a) { return static_cast<const float*>(a.g); }
  size_t heads() const { return size_t(s_.B) * s_.H; }

  GdnShape s_;
  Buffer A_, At_, ht_;  // A_p, A_p^T; the forward's final state (the methods hand on fold_forward's)
};

}  // namespace

std::unique_ptr<SpLocal> make_sp_local(Runtime& rt, const SpConfig& c, int groups) {
  if (c.attention == Attention::gdn) return std::make_unique<SpLocalGdn>(rt, c, groups);
  return std::make_unique<SpLocalGla>(rt, c, groups);
}

}  // namespace spb
