// The operator level: one SP attention (GLA or Gated DeltaNet) forward+backward of a method on this world of ranks, timed with the paper's protocol
// and checked against the single-device run of the same sequence.
#pragma once

#include <CLI/CLI.hpp>

#include "harness/runtime_options.h"
#include <string>

#include "runtime/bootstrap.h"

namespace spb {

struct OperatorOptions {
  std::string method = "zeco";
  std::string attention = "gla";  // the family: gla (the paper's) or gdn (Gated DeltaNet, DESIGN §12)
  std::string backend = "auto";  // cpu, gpu; auto = gpu where this build and node have one, else cpu
  std::string allscan = "auto";  // zeco's All-Scan: host, device; auto = device on GPUs, host on CPUs
  SimOptions sim;                // --backend sim
  int batch = 1, seq = -1, tokens_per_rank = -1,  // -1: not given
      heads = 2, dk = 16, dv = 16, blocks = 1;
  int warmup = 5, iters = 50;
  uint64_t seed = 1;
  std::string gates = "model";
  bool h0 = false, dht = false;
  std::string inputs, outputs, csv;
  std::string timeline;  // append timeline_iters more iterations' compute/comm spans of every rank to this CSV
  std::string stage_times;  // the GPU time of every kernel stage in the timed iterations, as rows of this CSV
  int timeline_iters = 5;
  int check = 1;
  double tolerance = 0;  // 0: 1e-5 on the CPU (fp32), 5e-3 on the GPU (bf16)
  bool resume = true;
  int overlap = 0;  // zeco, lasp2: SpOverlap (0 none, 1 output, 2 states)
  int head_groups = 0;  // zeco, in order: head groups scanned one after another (0: the default, 1)
  int ranks_per_node = 0;  // simulated nodes of this many consecutive ranks (0: SPB_RANKS_PER_NODE, else the launch's)
  bool nodes_over_network = false;  // NCCL between the simulated nodes over its network transport
};

void add_operator_command(CLI::App& app, OperatorOptions& o);
int run_operator(Bootstrap& boot, const OperatorOptions& o);

}  // namespace spb
