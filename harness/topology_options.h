// Where a level's ranks sit: the options every level shares for nodes (sp/runtime.h, Topology).
#pragma once

#include <CLI/CLI.hpp>

namespace spb {

// --ranks-per-node N (nodes of N consecutive ranks, one host standing in for several) and --nodes-over-network
// (NCCL between those nodes over its network transport), for make_runtime.
void add_topology_options(CLI::App& app, int& ranks_per_node, bool& nodes_over_network);

}  // namespace spb
