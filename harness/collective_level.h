// The collective level: an nccl-tests-style sweep of the SP methods' communication patterns over the per-rank state
// size, the All-Scan block size and the world size.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "harness/runtime_options.h"
#include "runtime/bootstrap.h"

namespace spb {

struct CollectiveOptions {
  std::vector<std::string> patterns;  // empty: all
  std::string backend = "auto", allscan = "auto";
  SimOptions sim;  // --backend sim
  size_t min_bytes = 64 << 10, max_bytes = 32 << 20;
  int factor = 2;
  int dv = 128;
  // gla (default) or gdn: Gated DeltaNet's dense rank map, dk x dk a head (--dk, default dv), in the patterns whose
  // traffic or arithmetic it changes (allscan, chain, allgather)
  std::string attention = "gla";
  int dk = 0;
  std::vector<long long> block_elems = {16384};
  int warmup = 5, iters = 50, check = 1;
  std::string csv;
  bool resume = true;
  // `latency` (the paper's Table 2): every call alone after a barrier; `back-to-back`: calls enqueued one after
  // another, which pipeline into each other and measure a throughput (harness/NOTES.md, the collective level).
  std::string timing = "latency";
  bool barrier_each = false;  // --barrier-each: the older name of --timing latency
  int calls_per_event = 1;    // back-to-back: an event after every this many calls (1: after each call)
  bool probe = false;         // also measure the one-hop flag latency and the pair bandwidth (GPU)
  int ranks_per_node = 0;     // simulated nodes of this many consecutive ranks (0: SPB_RANKS_PER_NODE, else the launch's)
  bool nodes_over_network = false;  // NCCL between the simulated nodes over its network transport
};

void add_collective_command(CLI::App& app, CollectiveOptions& o);
// The `timing` column of a row timed with these options: latency, back_to_back or back_to_back_perG.
std::string timing_column(const CollectiveOptions& o);
int run_collective(Bootstrap& boot, const CollectiveOptions& o);

}  // namespace spb
