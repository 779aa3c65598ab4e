#include "harness/sp_local.h"

#include "harness/error.h"
#include "harness/timeline.h"

namespace spb {

SpLocalGla::SpLocalGla(Runtime& rt, const GlaShape& s)
    : rt_(rt),
      ws_(*rt.dev, s),
      local_final_(*rt.dev, s.state_elems() * 4),
      local_dh_in_(*rt.dev, s.state_elems() * 4),
      S_in_(*rt.dev, s.state_elems() * 4),
      dS_out_(*rt.dev, s.state_elems() * 4),
      spare_(*rt.dev, s.state_elems() * 4),
      start_(*rt.dev, EventUse::order) {}

void SpLocalGla::forward_boundary(const SpForwardArgs& a, bool gates_on_comm) {
  Device& dev = *rt_.dev;
  const bool beside = gates_on_comm && rt_.kern->final_state_reads_gates(ws_.shape);
  if (beside) {
    dev.record(start_.get(), dev.compute_stream());  // the previous backward may still read gc
    dev.wait(dev.comm_stream(), start_.get());
    TimelineSpan span(rt_, "cumsum", true);
    // lambda comes from the boundary kernel, which sends it with M_p: gc only.
    rt_.kern->chunk_cumsum(ws_.shape, a.g, ws_.gc.f32(), nullptr, dev.comm_stream());
  }
  TimelineSpan span(rt_, "boundary_state", false);
  states_true_ = false;
  const bool own_gc = rt_.kern->chunk_final_state(ws_.shape, a.k, a.v, a.g, ws_.gc.f32(), local_final_.f32(),
                                                  ws_.lambda.f32(), dev.compute_stream());
  SPB_CHECK(!(own_gc && beside), "SpLocalGla: the boundary wrote gc while chunk_cumsum ran beside it");
  gc_ready_ = own_gc || beside;
}

void SpLocalGla::forward_gates(const SpForwardArgs& a) {
  if (gc_ready_) return;
  TimelineSpan span(rt_, "cumsum", false);
  // lambda came with M_p, and the communication may be reading it now: gc only.
  rt_.kern->chunk_cumsum(ws_.shape, a.g, ws_.gc.f32(), nullptr, rt_.dev->compute_stream());
  gc_ready_ = true;
}

void SpLocalGla::forward_output_from_initial(const SpForwardArgs& a) {
  forward_gates(a);
  TimelineSpan span(rt_, "output", false);
  const Stream st = rt_.dev->compute_stream();
  // (after forward_boundary: the GPU reuses that reduction)
  rt_.kern->chunk_states_fwd_after_boundary(ws_.shape, a.k, a.v, ws_.gc.f32(), S_in_.f32(), ws_.hs.f32(),
                                            ws_.ht.f32(), st);
  rt_.kern->chunk_output(ws_.shape, a.q, a.k, a.v, ws_.gc.f32(), ws_.hs.f32(), a.o, st);
  states_true_ = true;
}

void SpLocalGla::forward_local_states(const SpForwardArgs& a) {
  TimelineSpan span(rt_, "local_states", false);
  states_true_ = false;
  const Stream st = rt_.dev->compute_stream();
  rt_.kern->chunk_cumsum(ws_.shape, a.g, ws_.gc.f32(), ws_.lambda.f32(), st);
  gc_ready_ = true;
  rt_.kern->chunk_states_fwd(ws_.shape, a.k, a.v, ws_.gc.f32(), nullptr, ws_.hs.f32(), local_final_.f32(), st);
}

void SpLocalGla::forward_local_output(const SpForwardArgs& a) {
  TimelineSpan span(rt_, "local_output", false);
  rt_.kern->chunk_output(ws_.shape, a.q, a.k, a.v, ws_.gc.f32(), ws_.hs.f32(), a.o, rt_.dev->compute_stream());
}

void SpLocalGla::forward_apply_initial(const SpForwardArgs& a) {
  TimelineSpan span(rt_, "apply_initial", false);
  rt_.kern->output_add_initial(ws_.shape, a.q, ws_.gc.f32(), S_in_.f32(), a.o, rt_.dev->compute_stream());
}

void SpLocalGla::backward_boundary(const SpForwardArgs& f, const SpBackwardArgs& a) {
  TimelineSpan span(rt_, "boundary_dstate", false);
  SPB_CHECK(gc_ready_, "SpLocalGla: backward_boundary before the forward computed gc");
  rt_.kern->chunk_initial_dstate(ws_.shape, f.q, a.d_o, f.g, ws_.gc.f32(), local_dh_in_.f32(),
                                 rt_.dev->compute_stream());
}

void SpLocalGla::backward_true_states() {
  if (states_true_) return;
  TimelineSpan span(rt_, "true_states", false);
  // The overlapped forward left gc, lambda and the zero-start states in the workspace; S_in makes them true.
  const Stream st = rt_.dev->compute_stream();
  rt_.dev->copy(ws_.ht.f32(), local_final_.f32(), ws_.shape.state_elems() * 4, st);
  rt_.kern->states_add_initial(ws_.shape, ws_.gc.f32(), S_in_.f32(), ws_.hs.f32(), ws_.ht.f32(), st);
  states_true_ = true;
}

void SpLocalGla::backward_finish(const SpForwardArgs& f, const SpBackwardArgs& a) {
  TimelineSpan span(rt_, "grads", false);
  SPB_CHECK(states_true_, "SpLocalGla: backward_finish before the states were made true");
  const Stream st = rt_.dev->compute_stream();
  // (after backward_boundary: the GPU reuses that reduction where no other boundary call came between, as in ring)
  rt_.kern->chunk_states_bwd_after_boundary(ws_.shape, f.q, a.d_o, ws_.gc.f32(), dS_out_.f32(), ws_.dhs.f32(),
                                            nullptr, st);
  rt_.kern->chunk_grads(ws_.shape, f.q, f.k, f.v, ws_.gc.f32(), ws_.hs.f32(), ws_.ht.f32(), ws_.dhs.f32(), a.d_o,
                        a.dq, a.dk, a.dv, a.dg, st);
}

void SpLocalGla::fold_forward(const float* in, float* out, Stream st) {
  rt_.kern->state_fold(ws_.shape.state_rows(), ws_.shape.dv, ws_.lambda.f32(), in, local_final_.f32(), out, st);
}

void SpLocalGla::fold_backward(const float* in, float* out, Stream st) {
  rt_.kern->state_fold(ws_.shape.state_rows(), ws_.shape.dv, ws_.lambda.f32(), in, local_dh_in_.f32(), out, st);
}

void copy_or_zero(Device& dev, float* dst, const float* src, size_t elems, Stream st) {
  if (src) dev.copy(dst, src, elems * 4, st);
  else dev.fill_zero(dst, elems * 4, st);
}

}  // namespace spb
