#include "sim/sim_runtime.h"

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "runtime/collective_errors.h"
#include "runtime/error.h"

namespace spb {

const std::vector<SimCostKey>& sim_cost_keys() {
  static const std::vector<SimCostKey> keys = {{"nccl_p2p", &SimTransport::nccl_p2p},
                                               {"nccl_group", &SimTransport::nccl_group},
                                               {"nccl_allgather", &SimTransport::nccl_allgather},
                                               {"nccl_alltoall", &SimTransport::nccl_alltoall},
                                               {"nccl_allreduce", &SimTransport::nccl_allreduce}};
  return keys;
}

SimCalibration read_sim_calibration(const std::string& path) {
  std::ifstream in(path);
  SPB_USAGE(in.good(), "--sim-calibration " + path + ": cannot be read");
  std::map<std::string, std::string> kv;
  std::map<std::string, int> line_of;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    const size_t eq = line.find('=');
    std::string key = line.substr(0, eq), value = eq == std::string::npos ? "" : line.substr(eq + 1);
    auto trim = [](std::string& s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
    };
    trim(key), trim(value);
    if (key.empty() && value.empty() && eq == std::string::npos) continue;
    const std::string at = path + ":" + std::to_string(n) + ": ";
    SPB_USAGE(eq != std::string::npos && !key.empty() && !value.empty(),
              at + "expected `key = value`, got `" + line + "`");
    SPB_USAGE(!kv.count(key), at + "`" + key + "` given twice (first on line " + std::to_string(line_of[key]) + ")");
    kv[key] = value;
    line_of[key] = n;
  }
  std::set<std::string> known = {"gpu", "gpu_copy_bytes_per_s", "stage_offset_s", "device_call_s", "device_block_s"};
  for (const SimCostKey& t : sim_cost_keys())
    for (const char* part : {"_call_s", "_byte_s", "_split_bytes", "_above_call_s", "_above_byte_s"})
      known.insert(std::string(t.name) + part);
  for (const auto& [key, value] : kv)
    SPB_USAGE(known.count(key), path + ":" + std::to_string(line_of[key]) + ": unknown key `" + key + "`");
  // A number (>= 0 unless `any_sign`: stage_offset_s may take time off).
  auto number = [&](const std::string& key, bool any_sign = false) {
    auto it = kv.find(key);
    SPB_USAGE(it != kv.end(), path + ": no `" + key + "`");
    size_t end = 0;
    double v = 0;
    try {
      v = std::stod(it->second, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    SPB_USAGE(end == it->second.size() && std::isfinite(v) && (any_sign || v >= 0),
              path + ":" + std::to_string(line_of[key]) + ": `" + key + " = " + it->second + "` is not a number" +
                  (any_sign ? "" : " >= 0"));
    return v;
  };
  SimCalibration c;
  c.path = path;
  c.gpu.name = kv.count("gpu") ? kv["gpu"] : "simulated GPU";
  c.gpu.copy_Bps = number("gpu_copy_bytes_per_s");
  c.gpu.stage_offset_s = number("stage_offset_s", /*any_sign=*/true);
  for (const SimCostKey& t : sim_cost_keys()) {
    const std::string k = t.name;
    SimCost& cost = c.transport.*t.cost;
    cost.call_s = number(k + "_call_s");
    cost.byte_s = number(k + "_byte_s");
    const int second = int(kv.count(k + "_split_bytes")) + int(kv.count(k + "_above_call_s")) +
                       int(kv.count(k + "_above_byte_s"));
    SPB_USAGE(second == 0 || second == 3, path + ": `" + k + "`'s second line needs all of " + k + "_split_bytes, " +
                                              k + "_above_call_s and " + k + "_above_byte_s");
    if (!second) continue;
    cost.split_bytes = number(k + "_split_bytes");
    SPB_USAGE(cost.split_bytes > 0, path + ": " + k + "_split_bytes must be > 0");
    cost.above_call_s = number(k + "_above_call_s");
    cost.above_byte_s = number(k + "_above_byte_s");
  }
  c.transport.device_call_s = number("device_call_s");
  c.transport.device_block_s = number("device_block_s");
  SPB_USAGE(c.gpu.copy_Bps > 0, path + ": gpu_copy_bytes_per_s must be > 0");
  return c;
}

void sim_use_device_transport(Runtime& rt, bool on) {
  auto* dev = dynamic_cast<SimDevice*>(rt.dev.get());
  SPB_CHECK(dev, "sim_use_device_transport on a runtime that is not --backend sim");
  dev->set_device_transport(on);
}

std::string sim_platform_name(const SimSetup& setup) {
  if (!setup.platform.empty()) return setup.platform;
  std::string base = setup.calibration.substr(setup.calibration.find_last_of('/') + 1);
  return base.substr(0, base.find('.'));
}

Topology sim_topology(const Bootstrap& boot, int ranks_per_node) {
  Topology t;
  agree_on_usage_errors(boot, [&] {
    t = topology_of(std::vector<int>(size_t(boot.size()), 0), ranks_per_node ? ranks_per_node : boot.size(),
                    "--ranks-per-node");
  });
  return t;
}

std::unique_ptr<Runtime> make_sim_runtime(Bootstrap& boot, const SimSetup& setup, int ranks_per_node) {
  SimCalibration cal;
  std::unique_ptr<StageTable> table;
  std::unique_ptr<SimClock> clock;
  agree_on_usage_errors(boot, [&] {
    SPB_USAGE(!setup.stage_table.empty(), "--backend sim: needs --sim-stages (the GPU's stage times, "
                                          "results/<kind>_stages.csv)");
    SPB_USAGE(!setup.calibration.empty(), "--backend sim: needs --sim-calibration (sim/platforms/<platform>.calib)");
    cal = read_sim_calibration(setup.calibration);
    table = std::make_unique<StageTable>(setup.stage_table);
    clock = make_smpi_clock();
  });
  auto rt = std::unique_ptr<Runtime>(
      new Runtime{boot, "sim", nullptr, nullptr, nullptr, nullptr, sim_topology(boot, ranks_per_node)});
  auto dev = std::make_unique<SimDevice>(std::move(clock), cal.gpu);
  rt->gdn = make_sim_gdn_kernels(*dev, *table);  // a table without GDN rows fails at the first GDN call, naming it
  rt->kern = make_sim_kernels(*dev, std::move(*table));
  rt->comm = make_sim_communicator(boot, *dev, cal.transport, rt->topo.ranks_per_node);
  rt->dev = std::move(dev);
  return rt;
}

}  // namespace spb
