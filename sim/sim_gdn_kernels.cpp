// The simulated Gated DeltaNet stages (DESIGN §10, §12): each GdnKernels call runs no arithmetic and advances its
// stream by the GPU's time for that stage at that shape key (sim/stage_table_gdn.h builds the keys, for the recorder
// and for this replay), the table's time being the mean over the rows that recorded the key (StageTable).
//   - The rank's attention (gdn_forward, gdn_backward, gdn_rank_map, gdn_initial_dstate): the key's time, and a key
//     the table lacks is a UsageError naming the stage, the key and the file (as GLA's chunk stages): a rank's shape
//     does not depend on P, so a table recorded at the run's tokens per GPU, heads and head sizes has them all.
//   - The dense map's arithmetic (gdn_dense_apply, _product, _transpose, _identity), whose shapes change with K (the
//     column blocks) and with the scan: the key's time where the table has it; else the time of the stage's nearest
//     recorded shape by work (heads n n cols for apply, heads n^3 for the product, heads n^2 for the others) plus the
//     difference in work at the stage's marginal rate, the least-squares slope over its recorded shapes where there
//     are two sizes or more and it is positive, else the difference in the bytes the call moves at the device's copy
//     rate (apply reads A and x, b, writes out: 4 (n n + 3 n cols) bytes a head). A product or identity the table
//     has no row of (ring calls them at P > 1 only, so one GPU records none) is replayed from apply's or transpose's
//     rows, the stage of the same arithmetic. As GLA's state algebra
//     (sim/sim_kernels.cpp): a recorded time is mostly the launch, which a rate through zero would scale with the
//     work. A stage the table has no row of at all is a UsageError naming it, the key and the file.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "runtime/error.h"
#include "sim/sim_runtime.h"
#include "sim/stage_table_gdn.h"

namespace spb {
namespace {

// The numbers of a shape key by name ("heads16 n128 cols8": heads 16, n 128, cols 8).
std::map<std::string, double> key_parts(const std::string& shape) {
  std::map<std::string, double> out;
  std::istringstream in(shape);
  std::string part;
  while (in >> part) {
    const size_t at = part.find_first_of("0123456789");
    if (at == std::string::npos || at == 0) continue;
    out[part.substr(0, at)] = std::stod(part.substr(at));
  }
  return out;
}

// A dense stage's size as the replay counts it: its work (multiply-adds or elements) and the bytes it moves.
struct DenseSize {
  double work = 0, bytes = 0;
};

DenseSize dense_size(const std::string& stage, double heads, double n, double cols) {
  if (stage == "gdn_dense_apply") return {heads * n * n * cols, 4 * heads * (n * n + 3 * n * cols)};
  if (stage == "gdn_dense_product") return {heads * n * n * n, 12 * heads * n * n};
  if (stage == "gdn_dense_transpose") return {heads * n * n, 8 * heads * n * n};
  return {heads * n * n, 4 * heads * n * n};  // gdn_dense_identity
}

class SimGdnKernels final : public GdnKernels {
 public:
  SimGdnKernels(SimDevice& dev, StageTable table, DType act) : dev_(dev), table_(std::move(table)), act_(act) {
    for (const char* stage : {"gdn_dense_apply", "gdn_dense_product", "gdn_dense_transpose", "gdn_dense_identity"}) {
      Dense& d = dense_[stage];
      for (const std::string& shape : table_.shapes(stage)) {
        const auto p = key_parts(shape);
        auto get = [&](const char* name) {
          auto it = p.find(name);
          return it == p.end() ? 1.0 : it->second;
        };
        d.recorded.push_back({shape, dense_size(stage, get("heads"), get("n"), get("cols")),
                              table_.seconds(stage, shape)});
      }
      // By work, so that of two recorded shapes equally near (in ratio) the smaller is taken.
      std::stable_sort(d.recorded.begin(), d.recorded.end(),
                       [](const Recorded& a, const Recorded& b) { return a.size.work < b.size.work; });
      double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (const Recorded& r : d.recorded)
        n += 1, sx += r.size.work, sy += r.seconds, sxx += r.size.work * r.size.work, sxy += r.size.work * r.seconds;
      const double den = n * sxx - sx * sx;
      d.slope = den > 0 ? (n * sxy - sx * sy) / den : 0;
    }
    // Stages no run on one GPU calls (ring's composition of maps, its identity) replay the recorded stage of the same
    // arithmetic: A2 A1 is A2 applied to n columns (the same multiply-adds, by work), identity an elementwise pass
    // over n^2 as the transpose.
    for (const auto& [stage, like] : {std::pair{"gdn_dense_product", "gdn_dense_apply"},
                                      std::pair{"gdn_dense_identity", "gdn_dense_transpose"}})
      if (dense_[stage].recorded.empty()) dense_[stage] = dense_[like];
  }

  DType act_dtype() const override { return act_; }
  void forward(const GdnShape& s, const void*, const void*, const void*, const float*, const float*, const float*,
               void*, float*, Stream st) override {
    run("gdn_forward", gdn_stage_shape_key(s), st);
  }
  void backward(const GdnShape& s, const void*, const void*, const void*, const float*, const float*, const float*,
                const void*, const float*, void*, void*, void*, float*, float*, float*, Stream st) override {
    run("gdn_backward", gdn_stage_shape_key(s), st);
  }
  void rank_map(const GdnShape& s, const void*, const void*, const float*, const float*, float* A, float*,
                Stream st) override {
    run("gdn_rank_map", gdn_rank_map_key(s, A != nullptr), st);
  }
  void initial_dstate(const GdnShape& s, const void*, const void*, const float*, const float*, const void*, float*,
                      Stream st) override {
    run("gdn_initial_dstate", gdn_stage_shape_key(s), st);
  }
  void dense_apply(size_t heads, size_t n, size_t cols, const float*, const float*, const float*, float*,
                   Stream st) override {
    dense("gdn_dense_apply", gdn_dense_apply_key(heads, n, cols), heads, n, cols, st);
  }
  void dense_product(size_t heads, size_t n, const float*, const float*, float*, Stream st) override {
    dense("gdn_dense_product", gdn_dense_key(heads, n), heads, n, 1, st);
  }
  void dense_transpose(size_t heads, size_t n, const float*, float*, Stream st) override {
    dense("gdn_dense_transpose", gdn_dense_key(heads, n), heads, n, 1, st);
  }
  void dense_identity(size_t heads, size_t n, float*, Stream st) override {
    dense("gdn_dense_identity", gdn_dense_key(heads, n), heads, n, 1, st);
  }

 private:
  // The table's time of (stage, shape), looked up once per key; a UsageError where it has none.
  void run(const char* stage, const std::string& shape, Stream st) {
    std::string k = std::string(stage) + '|' + shape;
    auto it = seconds_.find(k);
    if (it == seconds_.end()) {
      const std::vector<std::string> shapes = table_.shapes(stage);
      std::string has;  // the shapes it has of the stage, the first few
      for (size_t i = 0; i < shapes.size() && i < 4; ++i) has += (i ? "; " : "") + shapes[i];
      if (shapes.size() > 4) has += "; ...";
      SPB_USAGE_RANK(std::binary_search(shapes.begin(), shapes.end(), shape),
                     "the stage table " + table_.path() + " has no time for " + stage + " at " + shape +
                         (shapes.empty() ? " (no row of " + std::string(stage) + " at all)"
                                         : " (it has it at " + has + ")") +
                         ": record Gated DeltaNet's stages on a GPU at this shape (spbench operator --attention gdn "
                         "--stage-times)");
      it = seconds_.emplace(std::move(k), table_.seconds(stage, shape)).first;
    }
    dev_.run_kernel(st, it->second);
  }

  void dense(const char* stage, const std::string& shape, size_t heads, size_t n, size_t cols, Stream st) {
    const Dense& d = dense_.at(stage);
    SPB_USAGE_RANK(!d.recorded.empty(), "the stage table " + table_.path() + " has no row of " + stage +
                                            " (wanted at " + shape + "): record Gated DeltaNet's stages on a GPU "
                                            "(spbench operator --attention gdn --stage-times)");
    for (const Recorded& r : d.recorded)
      if (r.shape == shape) return dev_.run_kernel(st, r.seconds);
    const DenseSize size = dense_size(stage, double(heads), double(n), double(cols));
    const Recorded& near = *std::min_element(d.recorded.begin(), d.recorded.end(), [&](const Recorded& a,
                                                                                       const Recorded& b) {
      return std::fabs(std::log(size.work / a.size.work)) < std::fabs(std::log(size.work / b.size.work));
    });
    const double extra = d.slope > 0 ? (size.work - near.size.work) * d.slope
                                     : (size.bytes - near.size.bytes) / dev_.gpu().copy_Bps;
    dev_.run_kernel(st, std::max(0.0, near.seconds + extra));
  }

  struct Recorded {
    std::string shape;
    DenseSize size;
    double seconds;
  };
  struct Dense {
    std::vector<Recorded> recorded;
    double slope = 0;  // seconds per unit of work
  };

  SimDevice& dev_;
  StageTable table_;
  DType act_;
  std::unordered_map<std::string, double> seconds_;
  std::map<std::string, Dense> dense_;
};

}  // namespace

std::unique_ptr<GdnKernels> make_sim_gdn_kernels(SimDevice& dev, StageTable table, DType act) {
  return std::make_unique<SimGdnKernels>(dev, std::move(table), act);
}

}  // namespace spb
