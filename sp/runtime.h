// The runtime an SP method runs on: where tensors live (Device), the attention stages (GlaKernels, and GdnKernels for
// Gated DeltaNet) and the data plane (Communicator), plus the bootstrap for host-side agreements. `cpu`: host memory,
// fp32 stages, MPI. `gpu`: one GPU per rank (chosen by the local rank), bf16/fp32 CUDA stages, NCCL.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/communicator.h"
#include "runtime/device.h"
#include "kernels/gdn/gdn_kernels.h"
#include "kernels/gla/gla_kernels.h"

namespace spb {

class Timeline;

// Which ranks share a node (DESIGN §10): node n holds the world ranks [n * ranks_per_node, (n + 1) * ranks_per_node),
// as a launch that fills one node before the next places them (mpirun --map-by ppr:8:node or slot, srun
// --distribution=block). Read from the
// launch (the ranks that share memory), or set by --ranks-per-node / SPB_RANKS_PER_NODE so that one host stands in
// for several nodes.
struct Topology {
  int ranks_per_node = 1;  // 0: the launch's nodes hold different numbers of ranks, or ranks that are not consecutive
  int nodes = 1;
  bool simulated = false;  // ranks_per_node came from --ranks-per-node or SPB_RANKS_PER_NODE
  // Simulated nodes that NCCL sees as separate hosts (--nodes-over-network): their traffic goes over NCCL's network
  // transport, as between real nodes, while each node's own ranks keep NVLink.
  bool over_network = false;
  bool regular() const { return ranks_per_node > 0; }
  std::string describe() const;  // "2 nodes x 4 ranks, simulated": for the output
};

// Nodes of `ranks_per_node` consecutive ranks (0: SPB_RANKS_PER_NODE where set, else the launch's nodes). A value
// below 1, one that does not divide the world, or a simulated node whose ranks run on different hosts is a UsageError
// naming --ranks-per-node (or the variable), on every rank.
Topology resolve_topology(const Bootstrap& boot, int ranks_per_node = 0);
// The same for a launch whose rank r runs on the node whose lowest rank is node_first_rank[r], the errors naming
// `flag`; ranks_per_node 0: the launch's nodes.
Topology topology_of(const std::vector<int>& node_first_rank, int ranks_per_node, const std::string& flag);

struct Runtime {
  Bootstrap& boot;
  std::string backend;  // "cpu" or "gpu"
  std::unique_ptr<Device> dev;
  std::unique_ptr<GlaKernels> kern;
  std::unique_ptr<Communicator> comm;
  Timeline* timeline = nullptr;  // set while one iteration's spans are recorded (sp/timeline.h)
  Topology topo;                 // set by make_runtime
  std::unique_ptr<GdnKernels> gdn;  // Gated DeltaNet's stages (DESIGN §12); null where the backend has none

  int rank() const { return boot.rank(); }
  int world() const { return boot.size(); }
};

// "auto": "gpu" where this build and node have a GPU, else "cpu"; any other name is returned as it is.
std::string resolve_backend(const std::string& backend);

// Throws UsageError for a backend that does not exist or cannot run here (e.g. `gpu` with no GPU), and for a bad
// `ranks_per_node` (resolve_topology). nodes_over_network (gpu only; --nodes-over-network): every simulated node gets
// its own NCCL host id (make_nccl_communicator), so that NCCL carries the traffic between nodes over its network.
std::unique_ptr<Runtime> make_runtime(Bootstrap& boot, const std::string& backend, int ranks_per_node = 0,
                                      bool nodes_over_network = false);

}  // namespace spb
