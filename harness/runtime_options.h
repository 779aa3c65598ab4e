// What every level asks of its runtime (sp/runtime.h, make_runtime): the backend, zeco's All-Scan, and where the
// ranks sit (nodes, and whether NCCL reaches across them over its network).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "sim/sim_runtime.h"

namespace spb {

// --backend, --allscan, --ranks-per-node N (nodes of N consecutive ranks, one host standing in for several) and
// --nodes-over-network (NCCL between those nodes over its network transport).
// Validators whose messages name the bound as the user wrote it: an integer flag >= lo, or a real flag that is
// finite and > 0 (>= 0 with `zero_ok`). "--iters: must be an integer >= 1 (got 0)".
CLI::Validator at_least(long long lo);
CLI::Validator finite_positive(bool zero_ok = false);

void add_runtime_options(CLI::App& app, std::string& backend, std::string& allscan, int& ranks_per_node,
                         bool& nodes_over_network);

// --sim-stages, --sim-calibration, --sim-platform: what --backend sim runs on (sim/sim_runtime.h).
struct SimOptions {
  std::string stages, calibration, platform;
};
void add_sim_options(CLI::App& app, SimOptions& o);

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
  void mark(class ResultRow& r) const;  // simulated = 1, platform
  // A level's extra CSV columns, with simulated and platform after them where the run is simulated.
  std::vector<std::string> columns(std::vector<std::string> extra) const;
};

// The runtime of a level: make_runtime, or for --backend sim make_sim_runtime. For the simulation, `allscan` is
// resolved as on GPUs (into sim->scan); a device protocol then runs as the host chain over the device transport, and
// `allscan` says host.
std::unique_ptr<Runtime> make_level_runtime(Bootstrap& boot, const std::string& backend, std::string& allscan,
                                            int ranks_per_node, bool nodes_over_network, const SimOptions& sim_opt,
                                            SimRows* sim);

}  // namespace spb
