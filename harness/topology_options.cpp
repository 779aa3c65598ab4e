#include "harness/topology_options.h"

namespace spb {

void add_topology_options(CLI::App& app, int& ranks_per_node, bool& nodes_over_network) {
  app.add_option("--ranks-per-node", ranks_per_node,
                 "treat every N consecutive ranks as one node (one host standing in for several; default: "
                 "SPB_RANKS_PER_NODE, else the launch's nodes)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("--nodes-over-network", nodes_over_network,
               "with --ranks-per-node on one host: each simulated node its own host to NCCL (NCCL_HOSTID), so that "
               "NCCL carries the traffic between nodes over its network transport (NCCL_NET, Socket unless set), "
               "as between real nodes; rows say so in backend/comm (nccl-socket)");
}

}  // namespace spb
