// The simulated model kernels (sim/sim_model_kernels.h). The shape keys are built by the functions
// RecordingModelKernels builds them with (stage_key, gemm_shape_key, convert_shape_key):
// tests/sim/test_sim_model_kernels.cpp replays a table the recorder wrote and finds every call of the same step in it.
#include "sim/sim_model_kernels.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/error.h"
#include "sim/model_stage_table.h"

namespace spb {
namespace {

class SimModelKernels final : public ModelKernels {
 public:
  SimModelKernels(SimDevice& dev, StageTable table, DType act) : dev_(dev), table_(std::move(table)), act_(act) {}

  DType act_dtype() const override { return act_; }
  bool computes() const override { return false; }
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float, const void*, const void*, float, void*,
            DType c_type, Stream st) override {
    run("gemm", gemm_shape_key(trans_a, trans_b, M, N, K, c_type), st);
  }
  void convert(size_t n, const void*, DType src_type, void*, DType dst_type, Stream st) override {
    run("convert", convert_shape_key(n, src_type, dst_type), st);
  }
  void embedding_fwd(int n, int D, const int32_t*, const float*, float*, Stream st) override {
    run("embedding_fwd", stage_key({{"n", n}, {"D", D}}), st);
  }
  void embedding_bwd(int n, int D, const int32_t*, const float*, float*, Stream st) override {
    run("embedding_bwd", stage_key({{"n", n}, {"D", D}}), st);
  }
  void rmsnorm_fwd(int n, int D, const float*, const float*, float, void*, float*, Stream st) override {
    run("rmsnorm_fwd", stage_key({{"n", n}, {"D", D}}), st);
  }
  void rmsnorm_add_fwd(int n, int D, const float*, const float*, const float*, float, float*, void*, float*,
                       Stream st) override {
    run("rmsnorm_add_fwd", stage_key({{"n", n}, {"D", D}}), st);
  }
  void rmsnorm_bwd(int n, int D, const float*, const float*, const float*, const float*, float*, float*,
                   void* dx_act, Stream st) override {
    run("rmsnorm_bwd", stage_key({{"n", n}, {"D", D}, {"dx_act", dx_act != nullptr}}), st);
  }
  void forget_gate_fwd(int n, int C, const void*, const float*, float, void*, Stream st) override {
    run("forget_gate_fwd", stage_key({{"n", n}, {"C", C}}), st);
  }
  void forget_gate_bwd(int n, int C, const void*, const float*, float, const void*, void*, float*,
                       Stream st) override {
    run("forget_gate_bwd", stage_key({{"n", n}, {"C", C}}), st);
  }
  void gated_rmsnorm_fwd(int rows, int D, const void*, const void*, const float*, float, void*, float*,
                         Stream st) override {
    run("gated_rmsnorm_fwd", stage_key({{"rows", rows}, {"D", D}}), st);
  }
  void gated_rmsnorm_bwd(int rows, int D, const void*, const void*, const float*, const float*, const void*, void*,
                         void*, float*, int heads, size_t dz_ld, Stream st) override {
    run("gated_rmsnorm_bwd", stage_key({{"rows", rows}, {"D", D}, {"heads", heads}, {"ld", (long long)dz_ld}}), st);
  }
  void swiglu_fwd(int rows, int F, const void*, void*, Stream st) override {
    run("swiglu_fwd", stage_key({{"rows", rows}, {"F", F}}), st);
  }
  void swiglu_bwd(int rows, int F, const void*, const void*, void*, void* y, Stream st) override {
    run("swiglu_bwd", stage_key({{"rows", rows}, {"F", F}, {"y", y != nullptr}}), st);
  }
  void copy_columns(int rows, int cols, const void*, int dst_cols, int, void*, Stream st) override {
    run("copy_columns", stage_key({{"rows", rows}, {"cols", cols}, {"dst_cols", dst_cols}}), st);
  }
  void cross_entropy(int n, int V, const float*, const int32_t*, float, float*, void*, Stream st) override {
    run("cross_entropy", stage_key({{"n", n}, {"V", V}}), st);
  }
  void adamw(size_t n, float*, const float*, float*, float*, float, float, float, float, float, int, void* p_act,
             Stream st) override {
    run("adamw", stage_key({{"n", (long long)n}, {"act_copy", p_act != nullptr}}), st);
  }

 private:
  // The table's time of (stage, shape), looked up once per key.
  void run(const char* stage, const std::string& shape, Stream st) {
    std::string k = std::string(stage) + '|' + shape;
    auto it = seconds_.find(k);
    if (it == seconds_.end()) {
      const std::vector<std::string> shapes = table_.shapes(stage);
      SPB_USAGE_RANK(std::binary_search(shapes.begin(), shapes.end(), shape),
                     "the model stage table " + table_.path() + " has no time for " + stage + " at " + shape +
                         ": record it on a GPU at this configuration (spbench model --stage-times)");
      it = seconds_.emplace(std::move(k), table_.seconds(stage, shape)).first;
    }
    dev_.run_kernel(st, it->second);
  }

  SimDevice& dev_;
  StageTable table_;
  DType act_;
  std::unordered_map<std::string, double> seconds_;
};

}  // namespace

std::unique_ptr<ModelKernels> make_sim_model_kernels(SimDevice& dev, StageTable table, DType act) {
  return std::make_unique<SimModelKernels>(dev, std::move(table), act);
}

}  // namespace spb
