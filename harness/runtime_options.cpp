#include "harness/runtime_options.h"

#include "zeco/all_scan.h"

namespace spb {

void add_runtime_options(CLI::App& app, std::string& backend, std::string& allscan, int& ranks_per_node,
                         bool& nodes_over_network) {
  app.add_option("--backend", backend, "cpu, gpu or auto")->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  app.add_option("--allscan", allscan,
                 "the All-Scan backend (zeco's and the allscan pattern's): host (the chain), host-hier, host-logdepth "
                 "(node-aware), device (= device-ll16), device-flag, device-ll, device-ll16 or auto")
      ->check(CLI::IsMember(allscan_names()));
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
