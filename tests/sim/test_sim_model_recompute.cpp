// The simulated model level replays `--recompute=blocks` (block checkpointing: each block's input kept, the whole
// block, its SP method's forward included, made again in its backward), what a long context is simulated with. A
// tiny model's step on CPU ranks at each level, recorded and written as `spbench model --stage-times` writes it, then
// the same model over the simulated model kernels read from that table makes the same calls: every model kernel
// call and every GLA stage call this rank recorded (stage, shape key and count), each model call found in the table
// and taking its time on the simulated device. With blocks, the remade forward shows as each block's forward stages
// called twice a step. dp, zeco, lasp2 and lasp1 (the methods the long-context sweep runs), at 1 and 2 ranks.
#include <cstdio>
#include <map>

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

using Calls = std::map<std::pair<std::string, std::string>, size_t>;  // (stage, shape): calls

Calls calls_of(const std::vector<StageSample>& samples) {
  Calls c;
  for (const StageSample& s : samples) c[{s.stage, s.shape}] += s.ms.size();
  return c;
}

// Both recorders around a runtime's GLA stages and a model's kernels; take() gives (model's, GLA's) samples.
struct Recorders {
  RecordingKernels* gla = nullptr;
  RecordingModelKernels* model = nullptr;
  std::unique_ptr<ModelKernels> wrap(Runtime& rt, std::unique_ptr<ModelKernels> inner) {
    auto k = std::make_unique<RecordingKernels>(std::move(rt.kern), *rt.dev);
    gla = k.get();
    rt.kern = std::move(k);
    auto m = std::make_unique<RecordingModelKernels>(std::move(inner), *rt.dev);
    model = m.get();
    return m;
  }
  void set_recording(bool on) { gla->set_recording(on), model->set_recording(on); }
};

struct Recorded {
  std::vector<StageSample> model, gla;
};

// Step 1 (after an unrecorded step 0) of `method` at `level` on `rt`, both recorders on; `data` where the kernels
// compute (CPU ranks), none where they are the simulation's.
Recorded run_step(Runtime& rt, std::unique_ptr<ModelKernels> kernels, const std::string& method, Recompute level,
                  const TokenData* data) {
  const int p = rt.rank(), L = kSeq / rt.world();
  Recorders rec;
  auto wrapped = rec.wrap(rt, std::move(kernels));
  GlaModel model(rt, std::move(wrapped), tiny(), kBatch, L, method, SpConfig{}, level, 5);
  for (int s = 0; s < 2; ++s) {
    rec.set_recording(s == 1);
    if (data)
      model.forward_backward(data->window(s, p * L, (p + 1) * L));
    else
      model.forward_backward({});
    model.optimizer_step(AdamWConfig{});
  }
  rec.set_recording(false);
  return {rec.model->take(), rec.gla->take()};
}

// The CPU ranks' step, written by rank 0 to `path` as `spbench model --stage-times` writes its rows.
Recorded record(const std::string& method, Recompute level, const std::string& path) {
  Bootstrap& boot = *test::boot();
  auto rt = make_runtime(boot, "cpu");
  const TokenData data("", tiny().vocab, kBatch, kSeq, 9);
  Recorded r = run_step(*rt, make_model_kernels(*rt->dev), method, level, &data);
  {
    std::unique_ptr<CsvAppender> csv;
    if (boot.rank() == 0) {
      std::remove(path.c_str());
      csv = std::make_unique<CsvAppender>(path, model_stage_columns());
    }
    std::vector<StageSample> all = r.model;
    all.insert(all.end(), r.gla.begin(), r.gla.end());
    ResultRow base;
    base.set("method", method).set("world_size", boot.size()).set("recompute", std::string(recompute_name(level)));
    append_stage_rows(boot, all, 1, base, csv.get());
  }
  boot.barrier();  // the file is whole before any rank reads it
  return r;
}

// The calls of one step of the chunked forward's output stage (once a block's attention forward).
size_t forward_calls(const Calls& gla) {
  size_t n = 0;
  for (const auto& [key, calls] : gla)
    if (key.first == "chunk_output") n += calls;
  return n;
}

void replay(const std::string& method, Recompute level) {
  Bootstrap& boot = *test::boot();
  const std::string what = method + " --recompute=" + recompute_name(level) + " P=" + std::to_string(boot.size());
  const std::string path = "sim_model_recompute_" + method + "_" + recompute_name(level) + "_np" +
                           std::to_string(boot.size()) + ".csv";
  const Recorded recorded = record(method, level, path);
  const StageTable table(path);
  for (const auto& row : read_csv(path)) EXPECT_EQ(row.at("recompute"), recompute_name(level)) << what;

  // The simulated device's clocks under the model's kernels; the GLA stages run on the CPU (they take no simulated
  // time), since the model and the GLA stages share one activation type and the CPU's is fp32.
  auto owned_dev = std::make_unique<SimDevice>(make_manual_clock(), SimGpu{});
  SimDevice& dev = *owned_dev;
  Runtime rt{boot, "sim", std::move(owned_dev), make_cpu_kernels(), make_mpi_communicator(boot), nullptr,
             resolve_topology(boot)};
  auto kernels = make_sim_model_kernels(dev, table, DType::f32);
  ASSERT_FALSE(kernels->computes());
  Recorded replayed;
  ASSERT_NO_THROW(replayed = run_step(rt, std::move(kernels), method, level, nullptr)) << what;

  EXPECT_EQ(calls_of(replayed.model), calls_of(recorded.model)) << what << ": the model kernels' calls differ";
  EXPECT_EQ(calls_of(replayed.gla), calls_of(recorded.gla)) << what << ": the GLA stages' calls differ";
  double total_s = 0;
  for (const StageSample& s : replayed.model)
    for (double ms : s.ms) {
      const double want = table.seconds(s.stage, s.shape);
      EXPECT_NEAR(ms * 1e-3, want, 1e-9 * want + 1e-15) << what << ": " << s.stage << " at " << s.shape;
      total_s += ms * 1e-3;
    }
  EXPECT_GT(total_s, 0) << what;
  // Where blocks are remade, every block's attention runs its forward twice a step (the forward, then again in the
  // backward); at none once.
  const size_t fwd = forward_calls(calls_of(recorded.gla));
  const size_t want_fwd = size_t(tiny().layers) * (remakes_blocks(level) ? 2 : 1);
  EXPECT_EQ(fwd, want_fwd) << what << ": chunk_output calls a step";
  boot.barrier();
  if (boot.rank() == 0) std::remove(path.c_str());
}

TEST(SimModelRecompute, ReplaysBlocksOfDp) { replay("dp", Recompute::blocks); }
TEST(SimModelRecompute, ReplaysBlocksOfZeco) { replay("zeco", Recompute::blocks); }
TEST(SimModelRecompute, ReplaysBlocksOfLasp2) { replay("lasp2", Recompute::blocks); }
TEST(SimModelRecompute, ReplaysBlocksOfLasp1) { replay("lasp1", Recompute::blocks); }
TEST(SimModelRecompute, ReplaysNoneOfZeco) { replay("zeco", Recompute::none); }  // the forward once a block

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
