// The GPU time of each GLA kernel stage at each shape (DESIGN §10): what the simulated kernels (sim/sim_kernels.cpp)
// advance a stream's clock by. A GPU run writes it (`spbench operator --stage-times FILE`, RecordingKernels below
// timing every stage call of every method), rows of level `stage` in results/<kind>_stages.csv, with provenance;
// the simulated build reads it back.
//
// A stage call is named by its stage ("chunk_states_fwd") and its shape key: the GlaShape's "B1 T16384 H16 dk128
// dv128 pairs16" for the GLA stages, "rows2048 cols128" for state_fold, "n2048" for vec_add, "bytes1048576" for
// copy_4d; Gated DeltaNet's stages are gdn_forward and the like (RecordingGdnKernels, sim/stage_table_gdn.h). The
// table's time for a key is the mean over the rows that recorded it (methods and ranks) of their median per call.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gla/gla_kernels.h"
#include "runtime/device.h"
#include "sim/stage_table_recorder.h"

namespace spb {

class Bootstrap;
class CsvAppender;
class ResultRow;

std::string stage_shape_key(const GlaShape& s);

class StageTable {
 public:
  // Reads the rows of level `stage` of `path` (a UsageError naming the file where it has none).
  explicit StageTable(const std::string& path);
  // Seconds per call of `stage` at `shape`; a UsageError naming the stage, the shape and the file where the table has
  // no row of it (a shape the GPU run did not cover: run it there at this shape).
  double seconds(const std::string& stage, const std::string& shape) const;
  // The shapes the table holds a time for at `stage` (none where it has no row of it), in key order.
  std::vector<std::string> shapes(const std::string& stage) const;
  const std::string& path() const { return path_; }
  size_t size() const { return ms_.size(); }

 private:
  std::string path_;
  std::map<std::pair<std::string, std::string>, double> ms_;
};

// GlaKernels that run `inner` and, while recording, time every stage call on its stream (StageRecorder): the stage
// table's input.
class RecordingKernels final : public GlaKernels {
 public:
  RecordingKernels(std::unique_ptr<GlaKernels> inner, Device& dev);
  void set_recording(bool on) { rec_.set_recording(on); }
  // Every recorded call since the last take, grouped by stage and shape (synchronizes the device).
  std::vector<StageSample> take() { return rec_.take(); }

  DType act_dtype() const override { return inner_->act_dtype(); }
  DType chunk_state_type() const override { return inner_->chunk_state_type(); }
  void chunk_cumsum(const GlaShape& s, const void* g, float* gc, float* lambda, Stream st) override;
  void chunk_states_fwd(const GlaShape& s, const void* k, const void* v, const float* gc, const float* h0, void* hs,
                        float* ht, Stream st) override;
  void chunk_output(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc, const void* hs,
                    void* o, Stream st) override;
  void output_add_initial(const GlaShape& s, const void* q, const float* gc, const float* S_in, void* o,
                          Stream st) override;
  void states_add_initial(const GlaShape& s, const float* gc, const float* S_in, void* hs, float* ht,
                          Stream st) override;
  void chunk_states_bwd(const GlaShape& s, const void* q, const void* d_o, const float* gc, const float* dht,
                        void* dhs, float* dh0, Stream st) override;
  void chunk_grads(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc, const void* hs,
                   const float* ht, const void* dhs, const void* d_o, void* dq, void* dk, void* dv, void* dg,
                   Stream st) override;
  bool chunk_final_state(const GlaShape& s, const void* k, const void* v, const void* g, float* gc, float* ht,
                         float* lambda, Stream st) override;
  bool final_state_reads_gates(const GlaShape& s) const override { return inner_->final_state_reads_gates(s); }
  void chunk_initial_dstate(const GlaShape& s, const void* q, const void* d_o, const void* g, const float* gc,
                            float* dh0, Stream st) override;
  void chunk_states_fwd_after_boundary(const GlaShape& s, const void* k, const void* v, const float* gc,
                                       const float* h0, void* hs, float* ht, Stream st) override;
  void chunk_states_bwd_after_boundary(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                       const float* dht, void* dhs, float* dh0, Stream st) override;
  void chunk_states_fwd_arriving(const GlaShape& s, const void* k, const void* v, const float* gc,
                                 const ArrivingState& h0, void* hs, float* ht, Stream st) override;
  void chunk_states_bwd_arriving(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                 const ArrivingState& dht, void* dhs, float* dh0, Stream st) override;
  void chunk_states_settle(const GlaShape& s, bool reverse, const float* gc, const ArrivingState& init, void* hs,
                           float* fin, Stream st) override;
  void signal_ready(uint32_t* ready, uint32_t epoch, Stream st) override;
  void state_fold(size_t rows, size_t cols, const float* decay, const float* x, const float* y, float* out,
                  Stream st) override;
  void vec_add(size_t n, const float* a, const float* b, float* out, Stream st) override;
  void copy_4d(void* dst, const void* src, size_t elem_bytes, const int64_t dims[4], const int64_t dst_strides[4],
               const int64_t src_strides[4], Stream st) override;

 private:
  std::unique_ptr<GlaKernels> inner_;
  StageRecorder rec_;
};

// The stage rows of one method's run, every rank's samples merged on rank 0 (a stage at a shape: the mean over the
// ranks that ran it of their medians): appended by rank 0 to `csv` as rows built from `base` (the operator row of
// that run: its shape, method and provenance), one per stage and shape, pass `stage`, columns stage, shape,
// calls_per_iter and attention (the base's; gla where it has none, as the model level's).
void append_stage_rows(const Bootstrap& boot, const std::vector<StageSample>& mine, int iters, const ResultRow& base,
                       CsvAppender* csv);
// The extra columns of a stage CSV (after the schema).
const std::vector<std::string>& stage_columns();

}  // namespace spb
