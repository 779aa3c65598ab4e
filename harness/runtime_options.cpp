#include "harness/runtime_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "zeco/all_scan.h"

namespace spb {

CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        const std::string want = "must be an integer >= " + std::to_string(lo) + " (got " + s + ")";
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end || errno == ERANGE || v < lo) return want;
        return "";
      },
      "INT>=" + std::to_string(lo));
}

CLI::Validator finite_positive(bool zero_ok) {
  return CLI::Validator(
      [zero_ok](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end || !std::isfinite(v) || v < 0 || (v == 0 && !zero_ok))
          return std::string("must be a finite number ") + (zero_ok ? ">= 0" : "> 0") + " (got " + s + ")";
        return "";
      },
      zero_ok ? "REAL>=0" : "REAL>0");
}

void add_runtime_options(CLI::App& app, std::string& backend, std::string& allscan, int& ranks_per_node,
                         bool& nodes_over_network) {
  app.add_option("--backend", backend,
                 "cpu, gpu, auto, or sim (the simulated build under smpirun: GPU stage times on a platform's network, "
                 "scripts/sim.sh)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto", "sim"}));
  app.add_option("--allscan", allscan,
                 "the All-Scan backend (zeco's and the allscan pattern's): host (the chain), rail, rail-logdepth (across "
                 "nodes: the device All-Scan in each node, each GPU's share of the rows between the nodes over its own "
                 "NIC), host-hier, host-logdepth (node-aware host chains), device (= device-ll16), device-flag, "
                 "device-ll, device-ll16 or auto (rail-logdepth across nodes, device on one node of GPUs, host on CPUs)")
      ->check(CLI::IsMember(allscan_names()));
  app.add_option("--ranks-per-node", ranks_per_node,
                 "treat every N consecutive ranks as one node (one host standing in for several; default: "
                 "SPB_RANKS_PER_NODE, else the launch's nodes)")
      ->check(CLI::Range(1, 1 << 20));  // integer bounds: printed as integers
  app.add_flag("--nodes-over-network", nodes_over_network,
               "with --ranks-per-node on one host: each simulated node its own host to NCCL (NCCL_HOSTID), so that "
               "NCCL carries the traffic between nodes over its network transport (NCCL_NET, Socket unless set), "
               "as between real nodes; rows say so in backend/comm (nccl-socket)");
}

void add_sim_options(CLI::App& app, SimOptions& o) {
  app.add_option("--sim-stages", o.stages, "--backend sim: the GPU's stage times (results/<kind>_stages.csv)");
  app.add_option("--sim-calibration", o.calibration,
                 "--backend sim: the platform's per-call costs (sim/platforms/<platform>.calib)");
  app.add_option("--sim-platform", o.platform,
                 "--backend sim: the name rows carry in `platform` (default: the calibration file's)");
}

}  // namespace spb
