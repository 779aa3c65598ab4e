#include "backend/backend.h"

#include "runtime/collective_errors.h"
#include "runtime/csv.h"
#include "runtime/error.h"
#include "sim/model_stage_table.h"
#include "sim/sim_model_kernels.h"
#include "sim/sim_runtime.h"
#include "sim/stage_table.h"
#include "sim/stage_table_gdn.h"
#include "zeco/all_scan.h"

namespace spb {

// The chain over the communicator (`host`) is NCCL's on GPUs, as a measured row names it.
std::string SimRows::backend(bool uses_scan) const { return uses_scan && scan != "host" ? scan : "nccl"; }

bool SimRows::device() const { return is_device_allscan(scan); }

void SimRows::mark(ResultRow& r) const { r.set("simulated", 1).set("platform", platform); }

std::vector<std::string> SimRows::columns(std::vector<std::string> extra) const {
  if (on) extra.insert(extra.end(), {"simulated", "platform"});
  return extra;
}

StageRecording::StageRecording(RecordingKernels* gla, RecordingGdnKernels* gdn, RecordingModelKernels* model,
                               std::unique_ptr<CsvAppender> csv)
    : gla_(gla), gdn_(gdn), model_(model), csv_(std::move(csv)) {}

StageRecording::~StageRecording() = default;

void StageRecording::set_recording(bool on) {
  if (model_) model_->set_recording(on);
  if (gdn_) gdn_->set_recording(on);
  gla_->set_recording(on);
}

void StageRecording::append_rows(const Bootstrap& boot, int iters, const ResultRow& base) {
  std::vector<StageSample> samples;
  if (model_) samples = model_->take();
  for (std::vector<StageSample> more : {gla_->take(), gdn_ ? gdn_->take() : std::vector<StageSample>()})
    samples.insert(samples.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  agree_on_usage_errors(boot, [&] { append_stage_rows(boot, samples, iters, base, csv_.get()); });
}

void Backend::select_transport(bool uses_scan) const {
  if (sim.on) sim_use_device_transport(*rt, sim.device() && uses_scan);
}

namespace {

// The runtime of req.backend. For the simulation, --allscan is resolved as on GPUs (into sim->scan); a device
// protocol then runs as the host chain over the device transport, and `allscan` says host.
std::unique_ptr<Runtime> make_level_runtime(Bootstrap& boot, const BackendRequest& req, std::string& allscan,
                                            SimRows& sim) {
  const SimOptions& so = req.sim;
  if (req.backend != "sim") {
    SPB_USAGE(so.stages.empty() && so.calibration.empty() && so.platform.empty(),
              "--sim-stages, --sim-calibration and --sim-platform go with --backend sim");
    return make_runtime(boot, req.backend, req.ranks_per_node, req.nodes_over_network);
  }
  SPB_USAGE(!req.nodes_over_network, "--nodes-over-network: the simulation's network is its platform file's");
  const SimSetup setup{so.stages, so.calibration, so.platform};
  auto rt = make_sim_runtime(boot, setup, req.ranks_per_node);
  std::string scan;
  agree_on_usage_errors(boot, [&] { scan = resolve_allscan(allscan, /*gpu=*/true, rt->topo); });
  sim = SimRows{true, scan, sim_platform_name(setup)};
  if (is_device_allscan(scan)) allscan = "host";
  return rt;
}

}  // namespace

Backend make_backend(Bootstrap& boot, const BackendRequest& req) {
  Backend b;
  b.allscan = req.allscan;
  b.rt = make_level_runtime(boot, req, b.allscan, b.sim);
  Runtime& rt = *b.rt;
  RecordingKernels* gla_recorder = nullptr;
  RecordingGdnKernels* gdn_recorder = nullptr;
  std::unique_ptr<CsvAppender> stage_csv;
  // Every kernel call timed while recording: the GLA stages' and Gated DeltaNet's here, the model's below.
  if (!req.stage_times.empty()) {
    auto rec = std::make_unique<RecordingKernels>(std::move(rt.kern), *rt.dev);
    gla_recorder = rec.get();
    rt.kern = std::move(rec);
    if (rt.gdn) {
      auto gdn = std::make_unique<RecordingGdnKernels>(std::move(rt.gdn), *rt.dev);
      gdn_recorder = gdn.get();
      rt.gdn = std::move(gdn);
    }
    agree_on_usage_errors(boot, [&] {
      if (boot.rank() == 0)
        stage_csv = std::make_unique<CsvAppender>(req.stage_times,
                                                  req.model_kernels ? model_stage_columns() : stage_columns());
    });
  }
  // The simulation's device protocol is the chain by now: resolved on its SimDevice (no GPU), it stays the chain.
  agree_on_usage_errors(boot, [&] { b.scan = resolve_allscan(b.allscan, rt.dev->is_gpu(), rt.topo); });
  RecordingModelKernels* model_recorder = nullptr;
  if (req.model_kernels) {
    if (b.sim.on)
      agree_on_usage_errors(boot, [&] {
        auto* dev = dynamic_cast<SimDevice*>(rt.dev.get());
        SPB_CHECK(dev, "--backend sim: the runtime's device is not a SimDevice");
        b.model_kernels = make_sim_model_kernels(*dev, StageTable(req.sim.stages));
      });
    else
      b.model_kernels = make_model_kernels(*rt.dev);
    if (gla_recorder) {
      auto rec = std::make_unique<RecordingModelKernels>(std::move(b.model_kernels), *rt.dev);
      model_recorder = rec.get();
      b.model_kernels = std::move(rec);
    }
  }
  if (gla_recorder)
    b.stages = std::make_unique<StageRecording>(gla_recorder, gdn_recorder, model_recorder, std::move(stage_csv));
  return b;
}

}  // namespace spb
