// What a level runs on, made by one call (DESIGN §4): for --backend cpu, gpu or sim, the runtime (device, GLA
// kernels, communicator, topology), the model's kernels where the level asks for them, the stage recorders where
// --stage-times asks for them, zeco's All-Scan resolved, and what a simulated run's rows say. The levels (harness/)
// reach the simulated backend only through this floor: they include no header of sim/ and cast no device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model_kernels.h"
#include "runtime/bootstrap.h"
#include "sp/runtime.h"

namespace spb {

class CsvAppender;
class RecordingGdnKernels;
class RecordingKernels;
class RecordingModelKernels;
class ResultRow;

// --sim-stages, --sim-calibration, --sim-platform: what --backend sim runs on (sim/sim_runtime.h).
struct SimOptions {
  std::string stages, calibration, platform;
};

// What a level's rows say of a simulated run: the backend each row stands for, and the platform.
struct SimRows {
  bool on = false;
  std::string scan;      // the All-Scan zeco's rows stand for (device-ll16, host-hier, ...): --allscan as on GPUs
  std::string platform;  // the `platform` column
  // `scan` is a device protocol: zeco's and the allscan pattern's runs take the device transport.
  bool device() const;
  // The backend column of a row (zeco's or the allscan pattern's take `scan` but for the plain chain, every other
  // one nccl).
  std::string backend(bool uses_scan) const;
  void mark(ResultRow& r) const;  // simulated = 1, platform
  // A level's extra CSV columns, with simulated and platform after them where the run is simulated.
  std::vector<std::string> columns(std::vector<std::string> extra) const;
};

// --stage-times: the recorders around a level's kernels (the GLA stages', Gated DeltaNet's where the runtime has them,
// and the model's at the model level), and the stage CSV that rank 0 appends their rows to.
class StageRecording {
 public:
  StageRecording(RecordingKernels* gla, RecordingGdnKernels* gdn, RecordingModelKernels* model,
                 std::unique_ptr<CsvAppender> csv);
  ~StageRecording();
  void set_recording(bool on);
  // Every rank's calls since the last append, of every recorder, merged on rank 0 into rows built from `base` (the
  // level's row of the run: its shape, method and provenance), one per stage and shape (append_stage_rows). Every
  // rank calls it; a row rank 0 cannot write stops them all.
  void append_rows(const Bootstrap& boot, int iters, const ResultRow& base);

 private:
  RecordingKernels* gla_;
  RecordingGdnKernels* gdn_;      // none where the runtime has no Gated DeltaNet stages
  RecordingModelKernels* model_;  // none at the operator level
  std::unique_ptr<CsvAppender> csv_;  // rank 0's
};

// What a level asks for.
struct BackendRequest {
  std::string backend;  // cpu, gpu or sim (resolve_backend first: not auto)
  std::string allscan;  // --allscan as given
  int ranks_per_node = 0;
  bool nodes_over_network = false;
  SimOptions sim;
  bool model_kernels = false;  // the model level: its ModelKernels too
  std::string stage_times;     // --stage-times: recorders around the kernels, rows to this CSV (the model's columns
                               // where model_kernels)
};

struct Backend {
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<ModelKernels> model_kernels;  // where asked for: the device's, the simulated ones, recorded
  std::unique_ptr<StageRecording> stages;       // where --stage-times asked for it
  // The All-Scan the methods and patterns are given (SpConfig::allscan): --allscan as given, but "host" where the
  // simulation runs a device protocol (as the chain over its device transport).
  std::string allscan;
  std::string scan;  // `allscan` resolved (resolve_allscan): what runs
  SimRows sim;       // sim.on: --backend sim

  // Under the simulation, from now on point-to-point operations stand for the device All-Scan's peer writes where
  // the run `uses_scan` (zeco, the allscan pattern) and sim.scan is a device protocol, else for NCCL's sends; nothing
  // elsewhere. The levels call it before making each method or pattern.
  void select_transport(bool uses_scan) const;
};

// In this order, agreed on by every rank: the runtime (make_runtime, or for --backend sim make_sim_runtime with the
// All-Scan resolved as on GPUs into sim.scan), the stage recorders and their CSV, `allscan` resolved into `scan`, the
// model's kernels. UsageErrors name the flag, on every rank.
Backend make_backend(Bootstrap& boot, const BackendRequest& req);

}  // namespace spb
