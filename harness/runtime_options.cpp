#include "harness/runtime_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "runtime/collective_errors.h"
#include "runtime/csv.h"
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

// The chain over the communicator (`host`) is NCCL's on GPUs, as a measured row names it.
std::string SimRows::backend(bool uses_scan) const { return uses_scan && scan != "host" ? scan : "nccl"; }

bool SimRows::device() const { return is_device_allscan(scan); }

void SimRows::mark(ResultRow& r) const { r.set("simulated", 1).set("platform", platform); }

std::vector<std::string> SimRows::columns(std::vector<std::string> extra) const {
  if (on) extra.insert(extra.end(), {"simulated", "platform"});
  return extra;
}

std::unique_ptr<Runtime> make_level_runtime(Bootstrap& boot, const std::string& backend, std::string& allscan,
                                            int ranks_per_node, bool nodes_over_network, const SimOptions& sim_opt,
                                            SimRows* sim) {
  if (backend != "sim") {
    SPB_USAGE(sim_opt.stages.empty() && sim_opt.calibration.empty() && sim_opt.platform.empty(),
              "--sim-stages, --sim-calibration and --sim-platform go with --backend sim");
    return make_runtime(boot, backend, ranks_per_node, nodes_over_network);
  }
  SPB_USAGE(!nodes_over_network, "--nodes-over-network: the simulation's network is its platform file's");
  const SimSetup setup{sim_opt.stages, sim_opt.calibration, sim_opt.platform};
  auto rt = make_sim_runtime(boot, setup, ranks_per_node);
  std::string scan;
  agree_on_usage_errors(boot, [&] { scan = resolve_allscan(allscan, /*gpu=*/true, rt->topo); });
  if (sim) *sim = SimRows{true, scan, sim_platform_name(setup)};
  if (is_device_allscan(scan)) allscan = "host";
  return rt;
}

}  // namespace spb
