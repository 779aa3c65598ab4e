#include "sp/sp_local.h"

#include <algorithm>
#include <string>

#include "runtime/error.h"
#include "sp/timeline.h"

namespace spb {

int SpLocalGla::head_groups_for(const SpConfig& c) {
  const int groups = c.head_groups;
  const GlaShape& s = c.local;
  SPB_USAGE(groups >= 0, "--head-groups must be >= 0 (0: the default)");
  SPB_USAGE(c.overlap == SpOverlap::none || groups <= 1,
            "--overlap " + std::to_string(int(c.overlap)) + " has no head groups (--head-groups 0 or 1)");
  SPB_USAGE(groups <= s.pairs(), "--head-groups " + std::to_string(groups) + ": more groups than the " +
                                     std::to_string(s.pairs()) + " (batch, head) pairs");
  // One group by default: on one H200 every extra group costs more than the scan it hides (zeco/NOTES.md, "Head
  // groups").
  const int n = groups ? groups : 1;
  if (n == 1) return 1;  // (K against the whole state: validate_blocks)
  for (const GlaShape& g : s.split_pairs(n))
    SPB_USAGE(size_t(g.pairs()) * g.dk % size_t(c.blocks) == 0,
              "--head-groups " + std::to_string(groups) + ": a group of " + std::to_string(g.pairs()) + " heads has " +
                  std::to_string(size_t(g.pairs()) * g.dk) + " state rows, which K = " + std::to_string(c.blocks) +
                  " blocks do not divide");
  return n;
}

SpLocal::SpLocal(Runtime& rt, const GlaShape& s, int groups)
    : rt_(rt),
      shape_(s),
      groups_(s.split_pairs(groups)),
      local_final_(*rt.dev, s.state_elems() * 4),
      local_dh_in_(*rt.dev, s.state_elems() * 4),
      S_in_(*rt.dev, s.state_elems() * 4),
      dS_out_(*rt.dev, s.state_elems() * 4),
      spare_(*rt.dev, s.state_elems() * 4),
      forked_(*rt.dev, EventUse::order),
      joined_(*rt.dev, EventUse::order) {}

namespace {
[[noreturn]] void only_gla(const char* what) {
  throw UsageError(std::string("--overlap: ") + what + " is GLA's alone; Gated DeltaNet runs in order (--overlap 0)");
}
}  // namespace

void SpLocal::forward_local_states(const SpForwardArgs&) { only_gla("the zero-start chunk states"); }
void SpLocal::forward_local_output(const SpForwardArgs&) { only_gla("the output from zero-start states"); }
void SpLocal::forward_apply_initial(const SpForwardArgs&) { only_gla("the output's correction"); }
void SpLocal::signal_arrival(bool, Stream) { only_gla("the states beside the scan"); }
void SpLocal::forward_states_beside(const SpForwardArgs&) { only_gla("the states beside the scan"); }
void SpLocal::forward_output_after_arrival(const SpForwardArgs&) { only_gla("the states beside the scan"); }
void SpLocal::backward_states_beside(const SpForwardArgs&, const SpBackwardArgs&) {
  only_gla("the states beside the scan");
}
void SpLocal::backward_finish_after_arrival(const SpForwardArgs&, const SpBackwardArgs&) {
  only_gla("the states beside the scan");
}

SpLocalGla::SpLocalGla(Runtime& rt, const SpConfig& c, int groups)
    : SpLocal(rt, c.local, groups),
      ws_(*rt.dev, *rt.kern, c.local, c.shared_dhs, c.remade_states),
      start_(*rt.dev, EventUse::order),
      gates_(*rt.dev, EventUse::order),
      arrival_(*rt.dev, 2 * sizeof(uint32_t)) {
  rt.dev->fill_zero(arrival_.get(), arrival_.bytes(), rt.dev->compute_stream());  // epochs start at 1
}

void SpLocal::fork() {
  Device& dev = *rt_.dev;
  dev.record(forked_.get(), dev.compute_stream());
  dev.wait(dev.second_compute_stream(), forked_.get());
}

void SpLocal::join() {
  Device& dev = *rt_.dev;
  dev.record(joined_.get(), dev.second_compute_stream());
  dev.wait(dev.compute_stream(), joined_.get());
}

void SpLocalGla::forward_boundary(const SpForwardArgs& a, bool gates_on_comm, int group) {
  Device& dev = *rt_.dev;
  const GlaShape& part = groups_.at(size_t(group));
  const bool beside = gates_on_comm && rt_.kern->final_state_reads_gates(part);
  if (group == 0) gc_ready_ = false, gc_on_comm_ = beside, ++epoch_[0];
  if (beside && group == 0) {
    dev.record(start_.get(), dev.compute_stream());  // the previous backward may still read gc
    dev.wait(dev.comm_stream(), start_.get());
    TimelineSpan span(rt_, "cumsum", Lane::comm);
    // lambda comes from the boundary kernel, which sends it with M_p: gc only.
    rt_.kern->chunk_cumsum(ws_.shape, a.g, ws_.gc.f32(), nullptr, dev.comm_stream());
    dev.record(gates_.get(), dev.comm_stream());
  }
  TimelineSpan span(rt_, "boundary_state", lane(group));
  states_true_ = false;
  const bool own_gc = rt_.kern->chunk_final_state(part, a.k, a.v, a.g, ws_.gc.f32(), local_final_.f32(),
                                                  ws_.lambda.f32(), stream(group));
  SPB_CHECK(!(own_gc && beside), "SpLocalGla: the boundary wrote gc while chunk_cumsum ran beside it");
  // gc of every pair: beside group 0's boundary, or written by every group's boundary (or by neither, for
  // forward_gates).
  if (group == 0) gc_ready_ = own_gc || beside;
  else gc_ready_ = gc_ready_ && (own_gc || beside);
}

bool SpLocalGla::forward_gates(const SpForwardArgs& a) {
  if (gc_ready_) return false;
  TimelineSpan span(rt_, "cumsum", Lane::compute);
  // lambda came with M_p, and the communication may be reading it now: gc only.
  rt_.kern->chunk_cumsum(ws_.shape, a.g, ws_.gc.f32(), nullptr, rt_.dev->compute_stream());
  gc_ready_ = true;
  return true;
}

void SpLocalGla::forward_output_from_initial(const SpForwardArgs& a, int group) {
  SPB_CHECK(gc_ready_ || group == 0, "SpLocalGla: forward_output_from_initial of a later group before gc");
  forward_gates(a);
  TimelineSpan span(rt_, "output", lane(group));
  // (after forward_boundary: the GPU reuses that reduction)
  rt_.kern->chunk_states_fwd_after_boundary(groups_.at(size_t(group)), a.k, a.v, ws_.gc.f32(), S_in_.f32(),
                                            ws_.hs.get(), ws_.ht.f32(), stream(group));
  output(a, group);
  states_true_ = group == groups() - 1;  // (every group, in order)
}

void SpLocalGla::output(const SpForwardArgs& a, int group) {
  rt_.kern->chunk_output(groups_.at(size_t(group)), a.q, a.k, a.v, ws_.gc.f32(), ws_.hs.get(), a.o, stream(group));
}

GlaKernels::ArrivingState SpLocalGla::arriving(bool forward) {
  GlaKernels::ArrivingState s;
  s.state = forward ? S_in_.f32() : dS_out_.f32();
  s.ready = static_cast<const uint32_t*>(arrival_.get()) + (forward ? 0 : 1);
  s.epoch = epoch_[forward ? 0 : 1];
  return s;
}

void SpLocalGla::signal_arrival(bool forward, Stream st) {
  rt_.kern->signal_ready(static_cast<uint32_t*>(arrival_.get()) + (forward ? 0 : 1), epoch_[forward ? 0 : 1], st);
}

void SpLocalGla::forward_states_beside(const SpForwardArgs& a) {
  SPB_CHECK(groups() == 1, "SpLocalGla: the states beside the scan have no head groups");
  forward_gates(a);
  Device& dev = *rt_.dev;
  if (gc_on_comm_) dev.wait(dev.compute_stream(), gates_.get());  // (chunk_cumsum beside the boundary kernel)
  TimelineSpan span(rt_, "states", Lane::compute);
  rt_.kern->chunk_states_fwd_arriving(ws_.shape, a.k, a.v, ws_.gc.f32(), arriving(true), ws_.hs.get(), ws_.ht.f32(),
                                      dev.compute_stream());
}

void SpLocalGla::forward_output_after_arrival(const SpForwardArgs& a) {
  TimelineSpan span(rt_, "output", Lane::compute);
  rt_.kern->chunk_states_settle(ws_.shape, false, ws_.gc.f32(), arriving(true), ws_.hs.get(), ws_.ht.f32(),
                                rt_.dev->compute_stream());
  output(a, 0);
  states_true_ = true;
}

void SpLocalGla::forward_local_states(const SpForwardArgs& a) {
  SPB_CHECK(groups() == 1, "SpLocalGla: the overlapped order has no head groups");
  TimelineSpan span(rt_, "local_states", Lane::compute);
  states_true_ = false;
  const Stream st = rt_.dev->compute_stream();
  rt_.kern->chunk_cumsum(ws_.shape, a.g, ws_.gc.f32(), ws_.lambda.f32(), st);
  gc_ready_ = true;
  rt_.kern->chunk_states_fwd(ws_.shape, a.k, a.v, ws_.gc.f32(), nullptr, ws_.hs.get(), local_final_.f32(), st);
}

void SpLocalGla::forward_local_output(const SpForwardArgs& a) {
  TimelineSpan span(rt_, "local_output", Lane::compute);
  rt_.kern->chunk_output(ws_.shape, a.q, a.k, a.v, ws_.gc.f32(), ws_.hs.get(), a.o, rt_.dev->compute_stream());
}

void SpLocalGla::forward_apply_initial(const SpForwardArgs& a) {
  TimelineSpan span(rt_, "apply_initial", Lane::compute);
  rt_.kern->output_add_initial(ws_.shape, a.q, ws_.gc.f32(), S_in_.f32(), a.o, rt_.dev->compute_stream());
}

void SpLocalGla::backward_boundary(const SpForwardArgs& f, const SpBackwardArgs& a, int group) {
  if (group == 0 && ws_.remakes_states()) remake_states(f);
  TimelineSpan span(rt_, "boundary_dstate", lane(group));
  if (group == 0) ++epoch_[1];
  SPB_CHECK(gc_ready_, "SpLocalGla: backward_boundary before the forward computed gc");
  rt_.kern->chunk_initial_dstate(groups_.at(size_t(group)), f.q, a.d_o, f.g, ws_.gc.f32(), local_dh_in_.f32(),
                                 stream(group));
}

void SpLocalGla::remake_states(const SpForwardArgs& f) {
  TimelineSpan span(rt_, "remake_states", Lane::compute);
  // The true states straight from S_in, whatever the forward's schedule (backward_true_states then has nothing to
  // do). Before the boundary kernel: a chunk-state call between it and backward_finish would leave the GPU no
  // partial states to reuse, and group 1's boundary (on the second stream) waits for group 0's.
  gla_remake_states(*rt_.kern, ws_, f.k, f.v, f.g, S_in_.f32(), rt_.dev->compute_stream());
  gc_ready_ = true;
  states_true_ = true;
}

void SpLocalGla::backward_true_states() {
  if (states_true_) return;
  TimelineSpan span(rt_, "true_states", Lane::compute);
  // The overlapped forward left gc, lambda and the zero-start states in the workspace; S_in makes them true.
  const Stream st = rt_.dev->compute_stream();
  rt_.dev->copy(ws_.ht.f32(), local_final_.f32(), ws_.shape.state_elems() * 4, st);
  rt_.kern->states_add_initial(ws_.shape, ws_.gc.f32(), S_in_.f32(), ws_.hs.get(), ws_.ht.f32(), st);
  states_true_ = true;
}

void SpLocalGla::backward_finish(const SpForwardArgs& f, const SpBackwardArgs& a, int group) {
  TimelineSpan span(rt_, "grads", lane(group));
  // (after backward_boundary: the GPU reuses that reduction where no other boundary call on these pairs came
  // between, as in ring)
  rt_.kern->chunk_states_bwd_after_boundary(groups_.at(size_t(group)), f.q, a.d_o, ws_.gc.f32(), dS_out_.f32(),
                                            ws_.dhs.get(), nullptr, stream(group));
  grads(f, a, group);
}

void SpLocalGla::grads(const SpForwardArgs& f, const SpBackwardArgs& a, int group) {
  SPB_CHECK(states_true_, "SpLocalGla: the gradients before the states were made true");
  GlaShape s = groups_.at(size_t(group));
  s.grad_ld = a.grad_ld;
  rt_.kern->chunk_grads(s, f.q, f.k, f.v, ws_.gc.f32(), ws_.hs.get(), ws_.ht.f32(), ws_.dhs.get(), a.d_o, a.dq, a.dk,
                        a.dv, a.dg, stream(group));
}

void SpLocalGla::backward_states_beside(const SpForwardArgs& f, const SpBackwardArgs& a) {
  SPB_CHECK(groups() == 1, "SpLocalGla: the states beside the scan have no head groups");
  TimelineSpan span(rt_, "dstates", Lane::compute);
  rt_.kern->chunk_states_bwd_arriving(ws_.shape, f.q, a.d_o, ws_.gc.f32(), arriving(false), ws_.dhs.get(), nullptr,
                                      rt_.dev->compute_stream());
}

void SpLocalGla::backward_finish_after_arrival(const SpForwardArgs& f, const SpBackwardArgs& a) {
  TimelineSpan span(rt_, "grads", Lane::compute);
  rt_.kern->chunk_states_settle(ws_.shape, true, ws_.gc.f32(), arriving(false), ws_.dhs.get(), nullptr,
                                rt_.dev->compute_stream());
  grads(f, a, 0);
}

void SpLocal::fold_forward(const float* in, float* out, Stream st) {
  map().apply(transition(), in, local_final_.f32(), out, st);
}

void SpLocal::fold_backward(const float* in, float* out, Stream st) {
  map().apply(reverse_transition(), in, local_dh_in_.f32(), out, st);
}

void copy_or_zero(Device& dev, float* dst, const float* src, size_t elems, Stream st) {
  if (src) dev.copy(dst, src, elems * 4, st);
  else dev.fill_zero(dst, elems * 4, st);
}

}  // namespace spb
