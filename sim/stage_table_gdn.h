// Gated DeltaNet's stage times (DESIGN §10, §12): RecordingGdnKernels times every GdnKernels call of a run with the
// StageRecorder the GLA stages use (sim/stage_table_recorder.h), one stage and shape key per call, and its rows go
// out with theirs (`spbench operator --attention gdn --stage-times FILE`: the same columns, append_stage_rows); the
// simulated GdnKernels (sim/sim_gdn_kernels.cpp) replays them. The keys are built here, once, for both:
//   gdn_forward, gdn_backward, gdn_initial_dstate   "B1 T16384 H16 dk128 dv128" (the rank's GdnShape)
//   gdn_rank_map                                    "B1 T16384 H16 dk128 dv128 A1" (A0: the call made M alone)
//   gdn_dense_apply                                 "heads16 n128 cols8" (out = A x + b, per head)
//   gdn_dense_product, gdn_dense_transpose, gdn_dense_identity   "heads16 n128"
// The stage names are GLA's with a gdn_ prefix where they would meet (a table may hold both families' rows: the GLA
// stages a GDN method calls, copy_4d for zeco's column blocks, are recorded under their own names beside these).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/gdn/gdn_kernels.h"
#include "sim/stage_table_recorder.h"

namespace spb {

std::string gdn_stage_shape_key(const GdnShape& s);
std::string gdn_rank_map_key(const GdnShape& s, bool with_A);
std::string gdn_dense_key(size_t heads, size_t n);                 // product, transpose, identity
std::string gdn_dense_apply_key(size_t heads, size_t n, size_t cols);

// GdnKernels that run `inner` and, while recording, time every call on its stream.
class RecordingGdnKernels final : public GdnKernels {
 public:
  RecordingGdnKernels(std::unique_ptr<GdnKernels> inner, Device& dev);
  void set_recording(bool on) { rec_.set_recording(on); }
  // Every recorded call since the last take, grouped by stage and shape (synchronizes the device).
  std::vector<StageSample> take() { return rec_.take(); }

  DType act_dtype() const override { return inner_->act_dtype(); }
  void forward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g, const float* beta,
               const float* h0, void* o, float* ht, Stream st) override;
  void backward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g, const float* beta,
                const float* h0, const void* d_o, const float* dht, void* dq, void* dk, void* dv, float* dg,
                float* dbeta, float* dh0, Stream st) override;
  void rank_map(const GdnShape& s, const void* k, const void* v, const float* g, const float* beta, float* A, float* M,
                Stream st) override;
  void initial_dstate(const GdnShape& s, const void* q, const void* k, const float* g, const float* beta,
                      const void* d_o, float* D, Stream st) override;
  void dense_apply(size_t heads, size_t n, size_t cols, const float* A, const float* x, const float* b, float* out,
                   Stream st) override;
  void dense_product(size_t heads, size_t n, const float* A2, const float* A1, float* out, Stream st) override;
  void dense_transpose(size_t heads, size_t n, const float* A, float* out, Stream st) override;
  void dense_identity(size_t heads, size_t n, float* out, Stream st) override;

 private:
  std::unique_ptr<GdnKernels> inner_;
  StageRecorder rec_;
};

}  // namespace spb
