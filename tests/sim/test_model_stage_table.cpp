// The model's recording kernels (sim/model_stage_table.h) on CPU ranks: the model run through them computes the same
// step bit for bit, and they record every ModelKernels call of the recorded steps by stage and shape (the products
// at their M, N, K, AdamW once a step over the flat vector, ...); a model whose kernels do not compute
// (ModelKernels::computes) runs its steps without tokens or weights drawn on the host.
#include <map>
#include <set>

#include "../mpi_test_main.h"
#include "model/gla_model.h"
#include "model/token_data.h"
#include "sim/model_stage_table.h"
#include "sp/runtime.h"
#include "tiny_model.h"

namespace spb {
namespace {

GlaModelConfig tiny() { return test::tiny_model(); }
constexpr int kBatch = test::kTinyBatch, kSeq = test::kTinySeq;
constexpr int kSteps = 2;

struct Trained {
  std::vector<double> losses;
  std::vector<float> weights;
};

// kSteps steps of zeco over this rank's slice with `kernels`.
Trained train(Runtime& rt, std::unique_ptr<ModelKernels> kernels) {
  const int P = rt.world(), p = rt.rank(), L = kSeq / P;
  GlaModel model(rt, std::move(kernels), tiny(), kBatch, L, "zeco", SpConfig{}, Recompute::none, 5);
  const TokenData data("", tiny().vocab, kBatch, kSeq, 9);
  const AdamWConfig adam{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  Trained out;
  for (int s = 0; s < kSteps; ++s) {
    out.losses.push_back(model.forward_backward(data.window(s, p * L, (p + 1) * L)));
    model.optimizer_step(adam);
  }
  out.weights = model.download_params();
  return out;
}

TEST(RecordingModelKernels, TheStepIsTheSameBitForBit) {
  auto rt = make_runtime(*test::boot(), "cpu");
  const Trained plain = train(*rt, make_model_kernels(*rt->dev));
  auto rec = std::make_unique<RecordingModelKernels>(make_model_kernels(*rt->dev), *rt->dev);
  rec->set_recording(true);
  const Trained recorded = train(*rt, std::move(rec));
  EXPECT_EQ(recorded.losses, plain.losses);
  EXPECT_TRUE(recorded.weights == plain.weights) << "the weights after " << kSteps << " steps differ";
}

TEST(RecordingModelKernels, RecordsEveryCallByStageAndShape) {
  auto rt = make_runtime(*test::boot(), "cpu");
  const int P = rt->world(), L = kSeq / P, N = kBatch * L;
  const GlaModelConfig c = tiny();
  auto owned = std::make_unique<RecordingModelKernels>(make_model_kernels(*rt->dev), *rt->dev);
  RecordingModelKernels& rec = *owned;
  GlaModel model(*rt, std::move(owned), c, kBatch, L, "zeco", SpConfig{}, Recompute::none, 5);
  const TokenData data("", c.vocab, kBatch, kSeq, 9);
  const AdamWConfig adam{};
  auto step = [&](int s) {
    model.forward_backward(data.window(s, rt->rank() * L, (rt->rank() + 1) * L));
    model.optimizer_step(adam);
  };
  step(0);  // not recorded
  EXPECT_TRUE(rec.take().empty());
  rec.set_recording(true);
  for (int s = 1; s <= kSteps; ++s) step(s);
  rec.set_recording(false);
  std::map<std::string, std::map<std::string, double>> per_step;  // stage -> shape -> calls per step
  for (const StageSample& x : rec.take()) {
    per_step[x.stage][x.shape] = double(x.ms.size()) / kSteps;
    for (double ms : x.ms) EXPECT_GE(ms, 0) << x.stage << " " << x.shape;
  }
  EXPECT_TRUE(rec.take().empty()) << "take() leaves nothing behind";

  // Every ModelKernels method the CPU model calls (convert only makes an act copy that fp32 ranks do not have).
  std::set<std::string> stages;
  for (const auto& [stage, shapes] : per_step) stages.insert(stage);
  EXPECT_EQ(stages, (std::set<std::string>{"adamw", "copy_columns", "cross_entropy", "embedding_bwd", "embedding_fwd",
                                           "forget_gate_bwd", "forget_gate_fwd", "gated_rmsnorm_bwd",
                                           "gated_rmsnorm_fwd", "gemm", "rmsnorm_add_fwd", "rmsnorm_bwd",
                                           "rmsnorm_fwd", "swiglu_bwd", "swiglu_fwd"}));
  const std::string n = std::to_string(N);
  auto calls = [&](const std::string& stage, const std::string& shape) {
    auto s = per_step.find(stage);
    if (s == per_step.end()) return 0.0;
    auto it = s->second.find(shape);
    return it == s->second.end() ? 0.0 : it->second;
  };
  // The products: q and k (key dim 48) per block, the MLP's stacked gate and up (2 x 64), its down product, the LM
  // head's logits (one chunk of N rows) and its weight gradient over the N rows.
  EXPECT_EQ(calls("gemm", "ta0 tb1 M" + n + " N48 K96 c_fp32"), 2.0 * c.layers);
  EXPECT_EQ(calls("gemm", "ta0 tb1 M" + n + " N128 K96 c_fp32"), 1.0 * c.layers);
  EXPECT_EQ(calls("gemm", "ta0 tb1 M" + n + " N96 K64 c_fp32"), 1.0 * c.layers);
  EXPECT_EQ(calls("gemm", "ta0 tb1 M" + n + " N64 K96 c_fp32"), 1.0);
  EXPECT_EQ(calls("gemm", "ta1 tb0 M64 N96 K" + n + " c_fp32"), 1.0);
  // AdamW once a step over the whole flat vector, no act copy on fp32 ranks.
  EXPECT_EQ(per_step["adamw"].size(), 1u);
  EXPECT_EQ(calls("adamw", "n" + std::to_string(model.param_elems()) + " act_copy0"), 1.0);
  EXPECT_EQ(calls("embedding_fwd", "n" + n + " D96"), 1.0);
  EXPECT_EQ(calls("embedding_bwd", "n" + n + " D96"), 1.0);
  EXPECT_EQ(calls("cross_entropy", "n" + n + " V64"), 1.0);
  // The first block's norm alone; the others after a residual add (each block's second, the next block's first,
  // the final norm); every one's backward writes the act copy of dx.
  EXPECT_EQ(calls("rmsnorm_fwd", "n" + n + " D96"), 1.0);
  EXPECT_EQ(calls("rmsnorm_add_fwd", "n" + n + " D96"), 2.0 * c.layers);
  EXPECT_EQ(calls("rmsnorm_bwd", "n" + n + " D96 dx_act1"), 2.0 * c.layers + 1);
  EXPECT_EQ(calls("forget_gate_fwd", "n" + n + " C48"), 1.0 * c.layers);
  // The output gate over N x 12 rows of dv 8; its backward writes dz into the stacked gradient's rows of
  // 2 x 48 + 2 x 96 + 16 = 304.
  EXPECT_EQ(calls("gated_rmsnorm_fwd", "rows" + std::to_string(N * 12) + " D8"), 1.0 * c.layers);
  EXPECT_EQ(calls("gated_rmsnorm_bwd", "rows" + std::to_string(N * 12) + " D8 heads12 ld304"), 1.0 * c.layers);
  EXPECT_EQ(calls("swiglu_fwd", "rows" + n + " F64"), 1.0 * c.layers);
  EXPECT_EQ(calls("swiglu_bwd", "rows" + n + " F64 y1"), 1.0 * c.layers);
  // zeco writes dq, dk, dv into the stacked gradient itself: only the gate's rank-16 gradient is copied in.
  EXPECT_EQ(calls("copy_columns", "rows" + n + " cols16 dst_cols304"), 1.0 * c.layers);
}

// Kernels that compute nothing (as a simulated device's): the model draws no weights and reads no tokens.
class NoKernels final : public ModelKernels {
 public:
  DType act_dtype() const override { return DType::f32; }
  bool computes() const override { return false; }
  void gemm(bool, bool, int, int, int, float, const void*, const void*, float, void*, DType, Stream) override {}
  void convert(size_t, const void*, DType, void*, DType, Stream) override {}
  void embedding_fwd(int, int, const int32_t*, const float*, float*, Stream) override {}
  void embedding_bwd(int, int, const int32_t*, const float*, float*, Stream) override {}
  void rmsnorm_fwd(int, int, const float*, const float*, float, void*, float*, Stream) override {}
  void rmsnorm_add_fwd(int, int, const float*, const float*, const float*, float, float*, void*, float*,
                       Stream) override {}
  void rmsnorm_bwd(int, int, const float*, const float*, const float*, const float*, float*, float*, void*,
                   Stream) override {}
  void forget_gate_fwd(int, int, const void*, const float*, float, void*, Stream) override {}
  void forget_gate_bwd(int, int, const void*, const float*, float, const void*, void*, float*, Stream) override {}
  void gated_rmsnorm_fwd(int, int, const void*, const void*, const float*, float, void*, float*, Stream) override {}
  void gated_rmsnorm_bwd(int, int, const void*, const void*, const float*, const float*, const void*, void*, void*,
                         float*, int, size_t, Stream) override {}
  void swiglu_fwd(int, int, const void*, void*, Stream) override {}
  void swiglu_bwd(int, int, const void*, const void*, void*, void*, Stream) override {}
  void copy_columns(int, int, const void*, int, int, void*, Stream) override {}
  void cross_entropy(int, int, const float*, const int32_t*, float, float*, void*, Stream) override {}
  void adamw(size_t, float*, const float*, float*, float*, float, float, float, float, float, int, void*,
             Stream) override {}
};

TEST(RecordingModelKernels, AModelThatDoesNotComputeNeedsNoTokens) {
  auto rt = make_runtime(*test::boot(), "cpu");
  const int L = kSeq / rt->world();
  auto owned = std::make_unique<RecordingModelKernels>(std::make_unique<NoKernels>(), *rt->dev);
  EXPECT_FALSE(owned->computes());
  RecordingModelKernels& rec = *owned;
  rec.set_recording(true);
  GlaModel model(*rt, std::move(owned), tiny(), kBatch, L, "zeco", SpConfig{}, Recompute::none, 5);
  model.forward_backward({});  // no tokens: none are laid out or copied in
  model.optimizer_step(AdamWConfig{});
  std::set<std::string> stages;
  for (const StageSample& x : rec.take()) stages.insert(x.stage);
  EXPECT_TRUE(stages.count("gemm") && stages.count("adamw") && stages.count("cross_entropy"));
}

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
