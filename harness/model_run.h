// What the model level's measuring loop (harness/model_level.cpp) and its rows and printing (harness/model_rows.h)
// share: the run every method is measured in, and one method's result.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "harness/model_plan.h"
#include "model/gla_model.h"
#include "model/token_data.h"
#include "runtime/stats.h"

namespace spb {

// The timed steps of one method (timed_steps): per step the max and the mean over ranks of its time.
struct StepTimes {
  std::vector<double> max, mean;  // per timed step: over ranks
  double loss = 0, peak_gib = 0;  // the last step's loss; the most memory a rank used
};

// What measuring every method reads: the plan, the backend, the tokens and the model, and what follows from them once.
struct ModelRun {
  const Bootstrap& boot;
  const ModelPlan& plan;
  const Backend& be;
  Runtime& rt;            // be.rt's
  const TokenData* data;  // none under --backend sim: the simulated kernels read no tokens
  const SimRows& sim;     // what a simulated run's rows say (sim.on: --backend sim)
  std::unique_ptr<GlaModel> model;  // built once, reset for every method (reference_step)
  AdamWConfig adam;
  bool grad_overlap = false;    // the gradients summed beside the backward
  double tolerance = 0;         // the largest relative error of the first step that passes
  std::string scan_backend;     // the All-Scan zeco runs (resolve_allscan)
  double need_gib = 0;          // the model's memory per rank (check_model_memory)
  double ceiling_tflops = NAN;  // the GEMM ceiling measured in this run (gemm_ceiling_tflops)
  double peak_tflops = NAN;     // the datasheet's dense bf16 peak, MFU's denominator; NaN: MFU left empty
  double flops_per_token = 0;
  std::string key;  // the rows' config_key
  StageRecording* stages = nullptr;  // --stage-times: the recorders around the model's kernels and rt.kern (be's)

  // This rank's tokens of training step `step` (none under --backend sim).
  std::vector<int32_t> rank_tokens(int step) const {
    const int p = boot.rank(), L = plan.L;
    return data ? data->window(step, p * L, (p + 1) * L) : std::vector<int32_t>();
  }
};

// One method measured: its first step against the reference method's, the timed steps, the rates that follow.
struct MethodResult {
  double err = NAN;  // the first step's relative error against the reference method; NaN: not checked
  bool ok = true;    // err within the tolerance, or not checked; a wrong result is not written to the CSV
  StepTimes steps;
  Summary time;  // of the steps' max over ranks
  double tokens_per_s_per_gpu = 0;
  double mfu = NAN;           // the field's MFU (of the datasheet peak)
  double ceiling_frac = NAN;  // of the GEMM ceiling measured in this run
};

}  // namespace spb
