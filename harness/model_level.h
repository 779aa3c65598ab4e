// The model level: training steps of the GLA language model (model/gla_model.h) with the attention of every block run
// by an SP method, timed with the paper's protocol (5 warm-up steps, the mean of 100) and checked: before the timed
// steps, the first step's loss and gradient norm against those of the same step with a reference method.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "harness/runtime_options.h"
#include "runtime/bootstrap.h"

namespace spb {

struct ModelOptions {
  std::string method = "zeco";
  std::string backend = "auto";
  std::string allscan = "auto";
  int batch = 1, seq = -1, tokens_per_rank = -1;  // -1: not given (default: 16384 tokens per rank)
  int vocab = 32000, hidden = 2048, layers = 20, heads = 32, mlp = 0, gate_rank = 16;
  double expand_k = 0.5, expand_v = 1.0;
  int blocks = 1, overlap = 0, head_groups = 0, ranks_per_node = 0;
  int warmup = 5, steps = 100, log_every = 10, profile = 0, timeline_steps = 3;
  uint64_t seed = 1;
  float lr = 3e-4f, weight_decay = 0.1f;
  std::string data, dump, csv, timeline;
  std::string stage_times;  // --stage-times: the model's and the GLA stages' kernel calls timed, to this CSV
  // auto (the fastest level that fits: auto_recompute_levels), none, states, elementwise, states+elementwise, all
  // (--recompute alone), blocks
  std::string recompute = "auto";
  bool plan = false;  // --plan: print the memory of every --recompute level, run nothing
  int grad_overlap = 0;  // 1: --grad-overlap, -1: --no-grad-overlap, 0: grad_overlap_by_default (model/)
  bool shard_optimizer = false, wgrad_beside = false, nodes_over_network = false, resume = true;
  int check = 1;
  double tolerance = 0;  // 0: 1e-5 on the CPU (fp32), 5e-3 on the GPU (bf16)
  SimOptions sim;        // --backend sim: --sim-stages is the model's stage table (results/<kind>_model_stages.csv)
};

void add_model_command(CLI::App& app, ModelOptions& o);
int run_model(Bootstrap& boot, const ModelOptions& o);

}  // namespace spb
