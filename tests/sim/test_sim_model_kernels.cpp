// The simulated model kernels (sim/sim_model_kernels.h) replay what RecordingModelKernels (sim/model_stage_table.h)
// records: a tiny model's step on CPU ranks, recorded and written as stage rows, then the same model run over the
// simulated kernels finds a time for every call of its steps (both build their shape keys with the same functions,
// sim/stage_table_recorder.h and sim/model_stage_table.h), and its compute stream advances by the recorded times.
// dp and zeco, at 1 and 2 ranks.
#include <cstdio>

#include "../mpi_test_main.h"
#include "model/gla_model.h"
#include "model/token_data.h"
#include "runtime/csv.h"
#include "sim/model_stage_table.h"
#include "sim/sim_model_kernels.h"
#include "sp/runtime.h"
#include "tiny_model.h"

namespace spb {
namespace {

GlaModelConfig tiny() { return test::tiny_model(); }
constexpr int kBatch = test::kTinyBatch, kSeq = test::kTinySeq;

// Step 1 (after an unrecorded step 0) of `method` on CPU ranks with both recorders, written by rank 0 to `path` as
// `spbench model --stage-times` writes it. Returns this rank's model samples.
std::vector<StageSample> record(const std::string& method, const std::string& path) {
  Bootstrap& boot = *test::boot();
  auto rt = make_runtime(boot, "cpu");
  const int P = rt->world(), p = rt->rank(), L = kSeq / P;
  auto gla = std::make_unique<RecordingKernels>(std::move(rt->kern), *rt->dev);
  RecordingKernels& gla_rec = *gla;
  rt->kern = std::move(gla);
  auto owned = std::make_unique<RecordingModelKernels>(make_model_kernels(*rt->dev), *rt->dev);
  RecordingModelKernels& rec = *owned;
  GlaModel model(*rt, std::move(owned), tiny(), kBatch, L, method, SpConfig{}, Recompute::none, 5);
  const TokenData data("", tiny().vocab, kBatch, kSeq, 9);
  for (int s = 0; s < 2; ++s) {
    rec.set_recording(s == 1), gla_rec.set_recording(s == 1);
    model.forward_backward(data.window(s, p * L, (p + 1) * L));
    model.optimizer_step(AdamWConfig{});
  }
  std::vector<StageSample> mine = rec.take(), all = mine, g = gla_rec.take();
  all.insert(all.end(), g.begin(), g.end());
  {
    std::unique_ptr<CsvAppender> csv;
    if (p == 0) {
      std::remove(path.c_str());
      csv = std::make_unique<CsvAppender>(path, model_stage_columns());
    }
    ResultRow base;
    base.set("method", method).set("world_size", P);
    append_stage_rows(boot, all, 1, base, csv.get());
  }
  boot.barrier();  // the file is whole before any rank reads it
  return mine;
}

void replay(const std::string& method) {
  Bootstrap& boot = *test::boot();
  const std::string path = "sim_model_kernels_" + method + "_np" + std::to_string(boot.size()) + ".csv";
  const std::vector<StageSample> recorded = record(method, path);
  const StageTable table(path);

  // The simulated device's clocks under the model's kernels; the GLA stages run on the CPU (they take no simulated
  // time), since the model and the GLA stages share one activation type and the CPU's is fp32.
  auto owned_dev = std::make_unique<SimDevice>(make_manual_clock(), SimGpu{});
  SimDevice& dev = *owned_dev;
  Runtime rt{boot, "sim", std::move(owned_dev), make_cpu_kernels(), make_mpi_communicator(boot), nullptr,
             resolve_topology(boot)};
  const int L = kSeq / rt.world();
  auto kernels = make_sim_model_kernels(dev, table, DType::f32);
  EXPECT_FALSE(kernels->computes());
  GlaModel model(rt, std::move(kernels), tiny(), kBatch, L, method, SpConfig{}, Recompute::none, 5);
  double step_s = 0;
  for (int s = 0; s < 2; ++s) {  // every call of both steps has its key in the table: no UsageError
    dev.synchronize();
    const double t0 = dev.stream_time(dev.compute_stream());
    EXPECT_NO_THROW({
      model.forward_backward({});
      model.optimizer_step(AdamWConfig{});
    }) << method << " step " << s;
    dev.synchronize();
    step_s = dev.stream_time(dev.compute_stream()) - t0;
  }
  // Step 1's compute stream: the table's time of each call this rank recorded, plus the device's own fills.
  double expected_s = 0;
  for (const StageSample& x : recorded) expected_s += double(x.ms.size()) * table.seconds(x.stage, x.shape);
  EXPECT_GT(expected_s, 0) << method;
  EXPECT_GE(step_s, expected_s * (1 - 1e-12)) << method;
  EXPECT_LT(step_s, expected_s * 1.01 + 1e-6) << method;
  boot.barrier();
  if (boot.rank() == 0) std::remove(path.c_str());
}

TEST(SimModelKernels, ReplaysEveryCallOfDp) { replay("dp"); }
TEST(SimModelKernels, ReplaysEveryCallOfZeco) { replay("zeco"); }

TEST(SimModelKernels, AKeyTheTableLacksNamesTheStageTheKeyAndTheFile) {
  Bootstrap& boot = *test::boot();
  const std::string path = "sim_model_kernels_lacking_np" + std::to_string(boot.size()) + ".csv";
  record("dp", path);
  SimDevice dev(make_manual_clock(), SimGpu{});
  auto k = make_sim_model_kernels(dev, StageTable(path));
  try {
    k->swiglu_fwd(7, 5, nullptr, nullptr, dev.compute_stream());
    ADD_FAILURE() << "no UsageError";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("swiglu_fwd"), std::string::npos) << what;
    EXPECT_NE(what.find("rows7 F5"), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
  }
  boot.barrier();
  if (boot.rank() == 0) std::remove(path.c_str());
}

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
