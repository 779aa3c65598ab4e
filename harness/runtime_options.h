// The flags of what every level asks of its backend (backend/backend.h, make_backend): the backend, zeco's All-Scan,
// where the ranks sit (nodes, and whether NCCL reaches across them over its network) and what the simulation runs on.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace spb {

// --backend, --allscan, --ranks-per-node N (nodes of N consecutive ranks, one host standing in for several) and
// --nodes-over-network (NCCL between those nodes over its network transport).
// Validators whose messages name the bound as the user wrote it: an integer flag >= lo, or a real flag that is
// finite and > 0 (>= 0 with `zero_ok`). "--iters: must be an integer >= 1 (got 0)".
CLI::Validator at_least(long long lo);
CLI::Validator finite_positive(bool zero_ok = false);

void add_runtime_options(CLI::App& app, std::string& backend, std::string& allscan, int& ranks_per_node,
                         bool& nodes_over_network);

// --sim-stages, --sim-calibration, --sim-platform: what --backend sim runs on (SimOptions, backend/backend.h).
void add_sim_options(CLI::App& app, SimOptions& o);

}  // namespace spb
