// The simulated GLA stages: each call runs no arithmetic and advances its stream by the GPU's time for that stage at
// that shape (sim/stage_table.h). The state algebra (state_fold, vec_add, copy_4d) is memory-bound: a size the table
// lacks takes the bytes per second of that stage's recorded sizes (their median), since its time is its bytes'.
#include "sim/sim_runtime.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "runtime/error.h"

namespace spb {
namespace {

class SimKernels final : public GlaKernels {
 public:
  SimKernels(SimDevice& dev, StageTable table) : dev_(dev), table_(std::move(table)) {}

  DType act_dtype() const override { return DType::bf16; }
  DType chunk_state_type() const override { return DType::bf16; }

  void chunk_cumsum(const GlaShape& s, const void*, float*, float*, Stream st) override { run("chunk_cumsum", s, st); }
  void chunk_states_fwd(const GlaShape& s, const void*, const void*, const float*, const float*, void*, float*,
                        Stream st) override {
    run("chunk_states_fwd", s, st);
  }
  void chunk_output(const GlaShape& s, const void*, const void*, const void*, const float*, const void*, void*,
                    Stream st) override {
    run("chunk_output", s, st);
  }
  void output_add_initial(const GlaShape& s, const void*, const float*, const float*, void*, Stream st) override {
    run("output_add_initial", s, st);
  }
  void states_add_initial(const GlaShape& s, const float*, const float*, void*, float*, Stream st) override {
    run("states_add_initial", s, st);
  }
  void chunk_states_bwd(const GlaShape& s, const void*, const void*, const float*, const float*, void*, float*,
                        Stream st) override {
    run("chunk_states_bwd", s, st);
  }
  void chunk_grads(const GlaShape& s, const void*, const void*, const void*, const float*, const void*, const float*,
                   const void*, const void*, void*, void*, void*, void*, Stream st) override {
    run("chunk_grads", s, st);
  }
  bool chunk_final_state(const GlaShape& s, const void*, const void*, const void*, float*, float*, float*,
                         Stream st) override {
    run("chunk_final_state", s, st);
    return false;  // as on the GPU: it read the raw gates and left gc to chunk_cumsum
  }
  bool final_state_reads_gates(const GlaShape&) const override { return true; }
  void chunk_initial_dstate(const GlaShape& s, const void*, const void*, const void*, const float*, float*,
                            Stream st) override {
    run("chunk_initial_dstate", s, st);
  }
  void chunk_states_fwd_after_boundary(const GlaShape& s, const void*, const void*, const float*, const float*, void*,
                                       float*, Stream st) override {
    run("chunk_states_fwd_after_boundary", s, st);
  }
  void chunk_states_bwd_after_boundary(const GlaShape& s, const void*, const void*, const float*, const float*,
                                       void*, float*, Stream st) override {
    run("chunk_states_bwd_after_boundary", s, st);
  }
  void chunk_states_fwd_arriving(const GlaShape& s, const void*, const void*, const float*, const ArrivingState&,
                                 void*, float*, Stream st) override {
    run("chunk_states_fwd_arriving", s, st);
  }
  void chunk_states_bwd_arriving(const GlaShape& s, const void*, const void*, const float*, const ArrivingState&,
                                 void*, float*, Stream st) override {
    run("chunk_states_bwd_arriving", s, st);
  }
  void chunk_states_settle(const GlaShape& s, bool reverse, const float*, const ArrivingState&, void*, float*,
                           Stream st) override {
    run(reverse ? "chunk_states_settle_bwd" : "chunk_states_settle_fwd", s, st);
  }
  void signal_ready(uint32_t*, uint32_t, Stream) override {}
  void state_fold(size_t rows, size_t cols, const float*, const float*, const float*, float*, Stream st) override {
    // The device All-Scan folds inside its kernel as it forwards each block: its per-block cost holds that.
    if (dev_.device_transport()) return;
    sized("state_fold", "rows" + std::to_string(rows) + " cols" + std::to_string(cols), double(rows * cols), st);
  }
  void vec_add(size_t n, const float*, const float*, float*, Stream st) override {
    sized("vec_add", "n" + std::to_string(n), double(n), st);
  }
  void copy_4d(void*, const void*, size_t elem_bytes, const int64_t dims[4], const int64_t*, const int64_t*,
               Stream st) override {
    const size_t bytes = elem_bytes * size_t(dims[0] * dims[1] * dims[2] * dims[3]);
    sized("copy_4d", "bytes" + std::to_string(bytes), double(bytes), st);
  }

 private:
  void run(const char* stage, const GlaShape& s, Stream st) {
    dev_.run_kernel(st, table_.seconds(stage, stage_shape_key(s)));
  }
  // A memory-bound stage: the table's time at this size, else this size at the stage's recorded rate.
  void sized(const char* stage, const std::string& shape, double size, Stream st) {
    if (table_.has(stage, shape)) return dev_.run_kernel(st, table_.seconds(stage, shape));
    dev_.run_kernel(st, size / table_.rate(stage));
  }

  SimDevice& dev_;
  StageTable table_;
};

}  // namespace

std::unique_ptr<GlaKernels> make_sim_kernels(SimDevice& dev, StageTable table) {
  return std::make_unique<SimKernels>(dev, std::move(table));
}

}  // namespace spb
