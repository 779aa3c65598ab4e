#include "sim/calibration.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <vector>

#include "runtime/csv.h"
#include "runtime/error.h"
#include "sim/sim_runtime.h"

namespace spb {
namespace {

using Row = std::map<std::string, std::string>;

std::string get(const Row& r, const char* c) {
  auto it = r.find(c);
  return it == r.end() ? std::string() : it->second;
}

// The P = 2, one-node rows of `method` / `backend` (pass `pass`, all-gather's and all-to-all's whole state, the
// All-Scan's blocks of 16384 elements), keyed by what tells sizes apart.
std::map<std::string, const Row*> rows_of(const std::vector<Row>& rows, const std::string& method,
                                          const std::string& backend, const std::string& pass) {
  std::map<std::string, const Row*> out;
  for (const Row& r : rows) {
    if (get(r, "world_size") != "2" || get(r, "method") != method || get(r, "backend") != backend) continue;
    if (get(r, "pass") != pass || get(r, "nodes") != "1") continue;
    if (pass == "comm" && (get(r, "timing") != "back_to_back" ||
                           (method == "allscan" && get(r, "block_elems") != "16384" && get(r, "blocks") != "1")))
      continue;
    out[get(r, "bytes") + "/" + get(r, "tokens_per_rank") + "/" + get(r, "heads")] = &r;
  }
  return out;
}

// The median over the sizes both files hold of (measured - simulated) / per, where per(row) is the calls or blocks
// the constant is paid for in that row; the sizes it used.
using PerRow = std::function<double(const Row&)>;

std::pair<double, int> median_gap(const std::map<std::string, const Row*>& measured,
                                  const std::map<std::string, const Row*>& simulated, const PerRow& per) {
  std::vector<double> gaps;
  for (const auto& [key, m] : measured) {
    auto it = simulated.find(key);
    if (it == simulated.end()) continue;
    const double gap = (std::stod(get(*m, "time_ms_median")) - std::stod(get(*it->second, "time_ms_median"))) * 1e-3;
    gaps.push_back(gap / per(*m));
  }
  if (gaps.empty()) return {0, 0};
  std::sort(gaps.begin(), gaps.end());
  const size_t n = gaps.size();
  return {n % 2 ? gaps[n / 2] : 0.5 * (gaps[n / 2 - 1] + gaps[n / 2]), int(n)};
}

double per_call(const Row&) { return 1; }
double per_block(const Row& r) { return std::max(1.0, std::stod(get(r, "blocks"))); }

}  // namespace

int run_sim_calibrate(const CalibrationOptions& o) {
  const SimCalibration cur = read_sim_calibration(o.calibration);
  const auto mc = read_csv(o.measured_collective), sc = read_csv(o.simulated_collective);
  const auto mo = read_csv(o.measured_operator), so = read_csv(o.simulated_operator);
  struct Fit {
    const char* key;
    double value;
    std::string source;
  };
  std::vector<Fit> fits;
  auto fit = [&](const char* key, double now, const std::vector<Row>& m, const std::vector<Row>& s, const char* method,
                 const char* mbackend, const char* sbackend, const char* pass, const PerRow& per, const char* what) {
    const auto [gap, n] = median_gap(rows_of(m, method, mbackend, pass), rows_of(s, method, sbackend, pass), per);
    SPB_USAGE(n > 0, std::string("sim-calibrate: no P = 2 row of ") + method + " (" + mbackend + ") in both the "
                         "measured and the simulated files");
    const double v = std::string(key) == "stage_offset_s" ? now + gap : std::max(0.0, now + gap);
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %+.3g s median gap over %d sizes at P = 2 (was %.4g s)", what, gap, n, now);
    fits.push_back({key, v, buf});
    return v;
  };
  const SimTransport& t = cur.transport;
  fit("nccl_p2p_call_s", t.nccl_p2p_s, mc, sc, "chain", "nccl", "nccl", "comm", per_call, "chain, per call");
  fit("nccl_group_call_s", t.nccl_group_s, mc, sc, "ring", "nccl", "nccl", "comm", per_call,
      "ring (a group of one send and one receive a step), per group");
  const double ag = fit("nccl_allgather_call_s", t.nccl_allgather_s, mc, sc, "allgather", "nccl", "nccl", "comm",
                        per_call, "allgather, per call");
  fit("nccl_alltoall_call_s", t.nccl_alltoall_s, mc, sc, "alltoall", "nccl", "nccl", "comm", per_call,
      "alltoall, per call");
  fits.push_back({"nccl_allreduce_call_s", ag, "no collective row measures an all-reduce alone: the all-gather's"});
  // The device All-Scan: its start from the one-block state (64 KiB), its blocks from the states of 32 blocks or more.
  const auto dm = rows_of(mc, "allscan", "device-ll16", "comm"), ds = rows_of(sc, "allscan", "device-ll16", "comm");
  auto with_blocks = [](const std::map<std::string, const Row*>& all, bool one) {
    std::map<std::string, const Row*> out;
    for (const auto& [k, r] : all)
      if ((std::stod(get(*r, "blocks")) <= 1) == one && (one || std::stod(get(*r, "blocks")) >= 32)) out[k] = r;
    return out;
  };
  auto fit_rows = [&](const char* key, double now, const std::map<std::string, const Row*>& m,
                      const std::map<std::string, const Row*>& s, const PerRow& per, const char* what) {
    const auto [gap, n] = median_gap(m, s, per);
    SPB_USAGE(n > 0, std::string("sim-calibrate: no P = 2 row for ") + key + " in both files");
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %+.3g s median gap over %d sizes at P = 2 (was %.4g s)", what, gap, n, now);
    fits.push_back({key, std::max(0.0, now + gap), buf});
  };
  fit_rows("device_call_s", t.device_call_s, with_blocks(dm, true), with_blocks(ds, true), per_call,
           "allscan device-ll16, one block (64 KiB), per call");
  fit_rows("device_block_s", t.device_block_s, with_blocks(dm, false), with_blocks(ds, false), per_block,
           "allscan device-ll16, 32 blocks of 16384 elements or more, per block");
  // dp's launch gaps: per stage call of its forward and backward (calls_per_iter of its stage rows at P = 2).
  const auto stages = read_csv(o.stages);
  const PerRow dp_calls = [&](const Row& op) {
    double calls = 0;
    for (const Row& r : stages)
      if (get(r, "level") == "stage" && get(r, "method") == "dp" && get(r, "world_size") == "2" &&
          get(r, "tokens_per_rank") == get(op, "tokens_per_rank") && get(r, "heads") == get(op, "heads"))
        calls += std::stod(get(r, "calls_per_iter"));
    return std::max(1.0, calls);
  };
  fit("stage_offset_s", cur.gpu.stage_offset_s, mo, so, "dp", "nccl", "nccl", "fwd_bwd", dp_calls,
      "dp fwd_bwd at the operator level, per stage call");

  std::ofstream out(o.out);
  SPB_USAGE(out.good(), "sim-calibrate: cannot write " + o.out);
  out << "# Per-call costs of the simulated platform, fitted at P = 2 by `spbench sim-calibrate` (sim/calibration.h)\n"
      << "# from " << o.measured_collective << " and " << o.measured_operator << ", against the simulated rows of "
      << o.simulated_collective << " and " << o.simulated_operator << " (constants of " << o.calibration << ").\n"
      << "# Generated: edit the sources, not this file.\n"
      << "gpu = " << cur.gpu.name << "\n"
      << "# the device-to-device copy rate, bytes read and written per second (a copy measured on an H200 of this\n"
      << "# workplace, 4.3 TB/s)\n"
      << "gpu_copy_bytes_per_s = " << cur.gpu.copy_Bps << "\n";
  for (const Fit& f : fits) {
    out << "# " << f.source << "\n" << f.key << " = " << f.value << "\n";
    std::printf("%-24s %.6g   # %s\n", f.key, f.value, f.source.c_str());
  }
  return 0;
}

}  // namespace spb
