// The simulated GLA stages: each call runs no arithmetic and advances its stream by the GPU's time for that stage at
// that shape (sim/stage_table.h). The state algebra (state_fold, vec_add, copy_4d) is memory-bound: a size the table
// lacks takes the time of the stage's nearest recorded size, plus (or less) the difference in size at the stage's
// marginal rate, the least-squares slope of its recorded times where the table holds two sizes of it or more (copy_4d,
// a strided copy), else the bytes it moves at the device's copy rate (a fold and a vector add read two fp32 operands
// and write one). A recorded time holds the kernel's launch, which a rate through zero would scale with the size. A
// vector add the table has no row of (one GPU's table: nothing composes there) takes the fold's rows the same way.
#include "sim/sim_runtime.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace spb {
namespace {

class SimKernels final : public GlaKernels {
 public:
  SimKernels(SimDevice& dev, StageTable table) : dev_(dev), table_(std::move(table)) {
    for (const char* stage : {"state_fold", "vec_add", "copy_4d"}) {  // the fold first: vec_add may take its rows
      Sized& z = sized_[stage];
      for (const std::string& shape : table_.shapes(stage))
        z.recorded.push_back({shape, size_of(shape), table_.seconds(stage, shape)});
      // By size, so that of two recorded sizes equally near (in ratio) the smaller is taken.
      std::sort(z.recorded.begin(), z.recorded.end(), [](const Recorded& a, const Recorded& b) {
        return a.size < b.size;
      });
      // A vector add the table has no row of takes the fold's: the same traffic per element (two fp32 operands
      // read, one written) in one elementwise kernel, its time mostly the launch (H200: vec_add n1024 5.6 us beside
      // state_fold rows1024 cols64 5.7-6.0 us in one table). A table recorded on one GPU has none: only a
      // composition of two ranks' maps adds decays (zeco's rail-logdepth across three nodes or more, ring).
      if (z.recorded.empty() && std::string(stage) == "vec_add") {
        for (const Recorded& fold : sized_.at("state_fold").recorded) z.recorded.push_back(fold);
        z.stand_in = "state_fold";
      }
      double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (const Recorded& r : z.recorded)
        n += 1, sx += r.size, sy += r.seconds, sxx += r.size * r.size, sxy += r.size * r.seconds;
      const double den = n * sxx - sx * sx;
      z.slope = den > 0 ? (n * sxy - sx * sy) / den : 0;
    }
  }

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
    sized("state_fold", stage_key({{"rows", (long long)rows}, {"cols", (long long)cols}}), double(rows * cols), 12, st);
  }
  void vec_add(size_t n, const float*, const float*, float*, Stream st) override {
    sized("vec_add", stage_key({{"n", (long long)n}}), double(n), 12, st);
  }
  void copy_4d(void*, const void*, size_t elem_bytes, const int64_t dims[4], const int64_t*, const int64_t*,
               Stream st) override {
    const size_t bytes = elem_bytes * size_t(dims[0] * dims[1] * dims[2] * dims[3]);
    sized("copy_4d", stage_key({{"bytes", (long long)bytes}}), double(bytes), 2, st);
  }

 private:
  void run(const char* stage, const GlaShape& s, Stream st) {
    dev_.run_kernel(st, table_.seconds(stage, stage_shape_key(s)));
  }
  struct Recorded {
    std::string shape;
    double size, seconds;
  };
  // The size a shape key counts: the product of its numbers ("rows2048 cols128": 262144).
  static double size_of(const std::string& shape) {
    double count = 1;
    for (size_t at = shape.find_first_of("0123456789"); at != std::string::npos;
         at = shape.find_first_of("0123456789", at)) {
      size_t len = 0;
      count *= std::stod(shape.substr(at), &len);
      at += len;
    }
    return count;
  }
  // A memory-bound stage of `size` (elements or bytes, as its shape key counts), moving `bytes_per` bytes of memory
  // traffic per unit of size: the table's time at this shape, else from its nearest recorded size (the header).
  void sized(const char* stage, const std::string& shape, double size, double bytes_per, Stream st) {
    const Sized& z = sized_.at(stage);
    const char* stand_in = std::string(stage) == "vec_add" ? " (nor of state_fold, its stand-in)" : "";
    SPB_USAGE_RANK(!z.recorded.empty(), "the stage table " + table_.path() + " has no row of " + stage + stand_in);
    for (const Recorded& r : z.recorded)  // (a stand-in's keys are its own stage's: none is this one's)
      if (r.shape == shape) return dev_.run_kernel(st, r.seconds);
    const Recorded& near = *std::min_element(z.recorded.begin(), z.recorded.end(), [&](const Recorded& a,
                                                                                        const Recorded& b) {
      return std::fabs(std::log(size / a.size)) < std::fabs(std::log(size / b.size));
    });
    const double per = z.slope > 0 ? z.slope : bytes_per / dev_.gpu().copy_Bps;
    dev_.run_kernel(st, std::max(0.0, near.seconds + (size - near.size) * per));
  }

  SimDevice& dev_;
  StageTable table_;
  // A memory-bound stage's recorded shapes, and the least-squares slope of their times over their sizes.
  struct Sized {
    std::vector<Recorded> recorded;
    double slope = 0;
    std::string stand_in;  // the stage whose rows these are, where the table has none of this one
  };
  std::map<std::string, Sized> sized_;
};

}  // namespace

std::unique_ptr<GlaKernels> make_sim_kernels(SimDevice& dev, StageTable table) {
  return std::make_unique<SimKernels>(dev, std::move(table));
}

}  // namespace spb
