// What every scan-based SP method does on its own rank (DESIGN §2), so that zeco, lasp2 and ring differ only in how
// they obtain S_in and dS_out:
//  forward, in order (the default): Lambda_p and M_p alone (forward_boundary: a chunk-parallel reduction from the raw
//            gates, no chunk state stored), sent at once; gc beside that reduction on the communication stream
//            (forward_boundary's gates_on_comm) or while they travel (forward_gates, where the boundary did not leave
//            it); once S_in is known, the chunk states from it (the ordinary recurrence with h0 = S_in, so they are
//            true as they are written) and o (forward_output_from_initial). Compared with
//            computing the zero-start states first and correcting them, this trades one pass over the chunk states
//            (read + write, ~175 us at 16K tokens on an H200) for a reduction that only reads k, v and gc; on the
//            GPU the chunk states reuse that reduction (chunk_states_fwd_after_boundary), so it costs nothing extra.
//  forward, overlapped: the zero-start chunk states (M_p comes with them) and o from them while the communication
//            runs (forward_local_states + forward_local_output), and o += its correction once S_in is known
//            (forward_apply_initial); the backward then makes the states true (backward_true_states).
//  backward: D_p alone (backward_boundary, the same reduction over q, do and gc), sent at once; once dS_out is known,
//            the state gradients from it (the recurrence with dht = dS_out, reusing the reduction likewise) and every
//            gradient (backward_finish).
//  states beside the scan (both directions): the boundary state alone, sent at once, as in order; then, without
//            waiting for it, the chunk states from S_in / dS_out as they arrive (forward_states_beside,
//            backward_states_beside: GlaKernels::chunk_states_*_arriving, whose blocks add the incoming state when the
//            scan's stream has signalled it with signal_arrival), and after the scan o / every gradient
//            (forward_output_after_arrival, backward_finish_after_arrival, which first settle what was stored before
//            the state arrived). The scan then runs beside the chunk states instead of between two kernels.
// Head groups (the in-order schedule only): the (b, h) pairs split into `groups` ranges (group(i)), and the in-order
// stages take the group they compute, so that a method can send one group's boundary state while the next group's
// boundary kernel runs, and compute one group's outputs while the next group's state travels (zeco). Each group's
// stages are the whole shape's restricted to its pairs (GlaShape::pair_range): the same functions, one launch each.
// Group i's stages go on stream(i): the compute stream for even i, the second compute stream for odd i, so that the
// blocks of one group's launches fill the last wave of the other's (fork / join order the two); all other work goes
// on the compute stream, but forward_boundary's chunk_cumsum where gates_on_comm.
#pragma once

#include <memory>
#include <vector>

#include "sp/method.h"
#include "sp/rank_map.h"
#include "sp/timeline.h"
#include "kernels/gla/gla.h"

namespace spb {

// The rank-local part of a scan-based method for either family (make_sp_local picks by SpConfig::attention): the
// in-order schedule above, the head groups and the rank's map, which is all Gated DeltaNet runs (SpLocalGdn); GLA's
// other orders (--overlap) are SpLocalGla's alone, and the base refuses them.
class SpLocal {
 public:
  virtual ~SpLocal() = default;

  // --- in order, every family ----------------------------------------------------------------------------------
  // -> transition(), local_final() (M_p) of the group's pairs. gates_on_comm: where the boundary kernel reads the raw
  // gates alone (GlaKernels::final_state_reads_gates), gc of every pair too, by chunk_cumsum on the communication
  // stream beside group 0's boundary (after the compute stream's earlier work): the caller makes the compute stream
  // wait for the communication stream before anything reads gc.
  virtual void forward_boundary(const SpForwardArgs& a, bool gates_on_comm = false, int group = 0) = 0;
  // -> gc on the compute stream; false (nothing enqueued) where the boundary calls left it (or the family has none).
  virtual bool forward_gates(const SpForwardArgs& a) = 0;
  virtual void forward_output_from_initial(const SpForwardArgs& a, int group = 0) = 0;  // reads S_in() of the group
  // -> local_dh_in() (D_p) of the group's pairs
  virtual void backward_boundary(const SpForwardArgs& f, const SpBackwardArgs& a, int group = 0) = 0;
  virtual void backward_true_states() = 0;                                               // no-op if already true
  virtual void backward_finish(const SpForwardArgs& f, const SpBackwardArgs& a, int group = 0) = 0;  // dS_out()

  // --- GLA's other orders (SpLocalGla; a UsageError here) ------------------------------------------------------
  virtual void forward_local_states(const SpForwardArgs& a);  // -> transition, local_final and the zero-start states
  virtual void forward_local_output(const SpForwardArgs& a);
  virtual void forward_apply_initial(const SpForwardArgs& a);  // reads S_in()
  // The states beside the scan (one group). signal_arrival(forward, st): on the scan's stream after the scan that
  // writes S_in() (forward) or dS_out() (backward) in this pass (the pass begins with forward_boundary /
  // backward_boundary). The compute stream must wait for the scan before the *_after_arrival calls.
  virtual void signal_arrival(bool forward, Stream st);
  virtual void forward_states_beside(const SpForwardArgs& a);         // after forward_boundary; S_in() as it arrives
  virtual void forward_output_after_arrival(const SpForwardArgs& a);  // after the scan
  virtual void backward_states_beside(const SpForwardArgs& f, const SpBackwardArgs& a);         // after the boundary
  virtual void backward_finish_after_arrival(const SpForwardArgs& f, const SpBackwardArgs& a);  // after the scan

  // --- head groups ---------------------------------------------------------------------------------------------
  int groups() const { return int(groups_.size()); }
  const GlaShape& group(int i) const { return groups_.at(size_t(i)); }
  // The stream of group i's stages, and its timeline lane.
  Lane lane(int group) const { return group % 2 ? Lane::compute2 : Lane::compute; }
  Stream stream(int group) const { return lane_stream(*rt_.dev, lane(group)); }
  // fork: the second compute stream waits for the compute stream's work so far; join: the other way round.
  void fork();
  void join();

  // --- the rank's map (sp/rank_map.h) over its whole state -------------------------------------------------------
  virtual RankMap map() const = 0;
  virtual float* transition() = 0;                           // A_p, for the forward scan
  virtual float* reverse_transition() { return transition(); }  // A_p^T, for the reverse scan
  // out = A_p in + M_p: the state after this rank, given the state before it.
  void fold_forward(const float* in, float* out, Stream st);
  // out = A_p^T in + D_p: the gradient before this rank, given the gradient after it.
  void fold_backward(const float* in, float* out, Stream st);

  const GlaShape& shape() const { return shape_; }
  float* local_final() { return local_final_.f32(); }
  float* local_dh_in() { return local_dh_in_.f32(); }
  float* S_in() { return S_in_.f32(); }
  float* dS_out() { return dS_out_.f32(); }
  // Scratch for a state nobody asked for (h_out or dh_in passed as nullptr).
  float* spare_state() { return spare_.f32(); }

 protected:
  SpLocal(Runtime& rt, const GlaShape& s, int groups);
  Runtime& rt_;
  GlaShape shape_;
  std::vector<GlaShape> groups_;
  Buffer local_final_, local_dh_in_, S_in_, dS_out_, spare_;

 private:
  EventHandle forked_, joined_;
};

// c.attention's rank-local part over c.local in `groups` head groups (SpLocalGla::head_groups_for).
std::unique_ptr<SpLocal> make_sp_local(Runtime& rt, const SpConfig& c, int groups = 1);

class SpLocalGla final : public SpLocal {
 public:
  // This rank's GLA over c.local (its workspace's dhs: c.shared_dhs where it is given; gc and hs: c.remade_states,
  // made again by group 0's backward_boundary) in `groups` head groups.
  SpLocalGla(Runtime& rt, const SpConfig& c, int groups = 1);

  void forward_boundary(const SpForwardArgs& a, bool gates_on_comm = false, int group = 0) override;
  bool forward_gates(const SpForwardArgs& a) override;
  void forward_output_from_initial(const SpForwardArgs& a, int group = 0) override;
  void forward_local_states(const SpForwardArgs& a) override;
  void forward_local_output(const SpForwardArgs& a) override;
  void forward_apply_initial(const SpForwardArgs& a) override;
  void backward_boundary(const SpForwardArgs& f, const SpBackwardArgs& a, int group = 0) override;
  void backward_true_states() override;
  void backward_finish(const SpForwardArgs& f, const SpBackwardArgs& a, int group = 0) override;
  void signal_arrival(bool forward, Stream st) override;
  void forward_states_beside(const SpForwardArgs& a) override;
  void forward_output_after_arrival(const SpForwardArgs& a) override;
  void backward_states_beside(const SpForwardArgs& f, const SpBackwardArgs& a) override;
  void backward_finish_after_arrival(const SpForwardArgs& f, const SpBackwardArgs& a) override;

  // The head groups for c.head_groups requested (0: the default, one group) at c.local: at most one per pair, one in
  // the other orders (c.overlap), and K (c.blocks) must divide each group's state rows; UsageError otherwise.
  static int head_groups_for(const SpConfig& c);

  // GLA's diagonal decay, whose transition() is lambda (the forward's and, A^T = A, the backward's).
  RankMap map() const override { return gla_rank_map(rt_, ws_.shape); }
  float* transition() override { return lambda(); }
  float* lambda() { return ws_.lambda.f32(); }

 private:
  GlaWorkspace ws_;
  // The group's o or gradients, from the true chunk states (the forward's) and state gradients.
  void output(const SpForwardArgs& a, int group);
  void grads(const SpForwardArgs& f, const SpBackwardArgs& a, int group);
  GlaKernels::ArrivingState arriving(bool forward);
  // Where the workspace remakes_states(): gc and the true chunk states, from S_in (group 0's backward_boundary).
  void remake_states(const SpForwardArgs& f);

  bool states_true_ = false;  // hs and ht in the workspace already include S_in
  bool gc_ready_ = false;     // gc in the workspace is chunk_cumsum(g) of the current forward
  bool gc_on_comm_ = false;   // ... written on the communication stream (gates_ marks its end)
  EventHandle start_;        // forward_boundary's chunk_cumsum on the communication stream waits for it
  EventHandle gates_;
  // signal_arrival's words (forward, backward) and the epochs of the current passes (each boundary call starts one)
  Buffer arrival_;
  uint32_t epoch_[2] = {0, 0};
};

// A buffer of `bytes` filled with `src` (nullable: zeros), on stream st.
void copy_or_zero(Device& dev, float* dst, const float* src, size_t elems, Stream st);

}  // namespace spb
