#include "sim/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <vector>

#include "runtime/csv.h"
#include "runtime/error.h"

namespace spb {

// --- the line fits ----------------------------------------------------------------------------------------------

SimCost fit_cost_line(const std::vector<CostPoint>& points) {
  SPB_USAGE(points.size() >= 2, "sim-calibrate: a line needs two sizes or more, got " + std::to_string(points.size()));
  // Weighted least squares, weight 1 / measured^2: sums of w, w x, w y, w x^2, w x y.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const CostPoint& p : points) {
    SPB_USAGE(p.measured_s > 0, "sim-calibrate: a measured time <= 0");
    const double w = 1 / (p.measured_s * p.measured_s);
    sw += w, sx += w * p.bytes, sy += w * p.target_s, sxx += w * p.bytes * p.bytes, sxy += w * p.bytes * p.target_s;
  }
  const double den = sw * sxx - sx * sx;
  SimCost c;
  c.byte_s = den > 0 ? (sw * sxy - sx * sy) / den : 0;
  c.call_s = (sy - c.byte_s * sx) / sw;
  if (c.byte_s < 0) c.byte_s = 0, c.call_s = sy / sw;  // a flat line: the weighted mean
  if (c.call_s < 0) c.call_s = 0, c.byte_s = sxx > 0 ? std::max(0.0, sxy / sxx) : 0;  // through zero
  return c;
}

CostResiduals cost_residuals(const SimCost& cost, const std::vector<CostPoint>& points) {
  CostResiduals r;
  double ss = 0;
  for (const CostPoint& p : points) {
    const double e = (cost.seconds(p.bytes) - p.target_s) / p.measured_s;
    ss += e * e;
    if (std::fabs(e) > std::fabs(r.worst)) r.worst = e, r.worst_bytes = p.bytes;
  }
  r.rms = points.empty() ? 0 : std::sqrt(ss / double(points.size()));
  return r;
}

SimCost fit_cost_two_lines(const std::vector<CostPoint>& points, double split_bytes) {
  std::vector<CostPoint> sorted = points;
  std::sort(sorted.begin(), sorted.end(), [](const CostPoint& a, const CostPoint& b) { return a.bytes < b.bytes; });
  auto fit_at = [&](double split) {
    std::vector<CostPoint> below, above;
    for (const CostPoint& p : sorted) (p.bytes < split ? below : above).push_back(p);
    SPB_USAGE(below.size() >= 2 && above.size() >= 2,
              "sim-calibrate: two lines split at " + std::to_string(split) + " bytes need two sizes or more a side");
    SimCost lo = fit_cost_line(below), hi = fit_cost_line(above), c = lo;
    c.split_bytes = split, c.above_call_s = hi.call_s, c.above_byte_s = hi.byte_s;
    return c;
  };
  if (split_bytes > 0) return fit_at(split_bytes);
  const size_t kSide = 3;
  SPB_USAGE(sorted.size() >= 2 * kSide, "sim-calibrate: choosing where two lines split needs " +
                                            std::to_string(2 * kSide) + " sizes or more, got " +
                                            std::to_string(sorted.size()));
  SimCost best;
  double best_rms = INFINITY;
  for (size_t i = kSide; i + kSide <= sorted.size(); ++i) {
    if (sorted[i].bytes == sorted[i - 1].bytes) continue;
    const SimCost c = fit_at(sorted[i].bytes);
    const double rms = cost_residuals(c, sorted).rms;
    if (rms < best_rms) best_rms = rms, best = c;
  }
  return best;
}

// --- the rows ---------------------------------------------------------------------------------------------------

namespace {

using Row = std::map<std::string, std::string>;
using Rows = std::map<std::string, const Row*>;

std::string get(const Row& r, const char* c) {
  auto it = r.find(c);
  return it == r.end() ? std::string() : it->second;
}
double num(const Row& r, const char* c) {
  const std::string v = get(r, c);
  return v.empty() ? 0 : std::stod(v);
}

// The P = 2, one-node rows of `method` / `backend` (pass `pass`, all-gather's and all-to-all's whole state, the
// All-Scan's blocks of 16384 elements), keyed by what tells sizes apart.
Rows rows_of(const std::vector<Row>& rows, const std::string& method, const std::string& backend,
             const std::string& pass) {
  Rows out;
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

// Seconds the row left, measured - simulated, over the sizes both files hold: (measured row, gap) pairs.
std::vector<std::pair<const Row*, double>> gaps(const Rows& measured, const Rows& simulated) {
  std::vector<std::pair<const Row*, double>> out;
  for (const auto& [key, m] : measured) {
    auto it = simulated.find(key);
    if (it == simulated.end()) continue;
    out.push_back({m, (num(*m, "time_ms_median") - num(*it->second, "time_ms_median")) * 1e-3});
  }
  return out;
}

// The median over the sizes of (measured - simulated) / per, where per(row) is the calls, blocks or stages the
// constant is paid for in that row; the sizes it used.
using PerRow = std::function<double(const Row&)>;
std::pair<double, int> median_gap(const Rows& measured, const Rows& simulated, const PerRow& per) {
  std::vector<double> g;
  for (const auto& [m, gap] : gaps(measured, simulated)) g.push_back(gap / per(*m));
  if (g.empty()) return {0, 0};
  std::sort(g.begin(), g.end());
  const size_t n = g.size();
  return {n % 2 ? g[n / 2] : 0.5 * (g[n / 2 - 1] + g[n / 2]), int(n)};
}

double per_call(const Row&) { return 1; }
double per_block(const Row& r) { return std::max(1.0, num(r, "blocks")); }

std::string size_words(double bytes) {
  char buf[32];
  if (bytes >= 1 << 20) std::snprintf(buf, sizeof buf, "%.4g MiB", bytes / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.4g KiB", bytes / 1024);
  return buf;
}

}  // namespace

int run_sim_calibrate(const CalibrationOptions& o) {
  const SimCalibration cur = read_sim_calibration(o.calibration);
  const auto mc = read_csv(o.measured_collective), sc = read_csv(o.simulated_collective);
  const auto mo = read_csv(o.measured_operator), so = read_csv(o.simulated_operator);
  struct Fit {
    std::string key;
    double value;
    std::string source;  // the comment above the key
  };
  std::vector<Fit> fits;
  char buf[512];

  // The NCCL transports: the cost each P = 2 row asks for, at the bytes of its call (one call a rank at P = 2), two
  // lines each. call_bytes: the pattern's call size from the row (baselines/pattern_*.cpp, zeco/pattern_allscan.cpp).
  SimTransport fitted = cur.transport;
  auto fit_nccl = [&](const char* name, SimCost SimTransport::*member, const char* method,
                      const std::function<double(const Row&)>& call_bytes, const char* what) {
    const SimCost& now = cur.transport.*member;
    std::vector<CostPoint> pts;
    for (const auto& [m, gap] : gaps(rows_of(mc, method, "nccl", "comm"), rows_of(sc, method, "nccl", "comm"))) {
      const double bytes = call_bytes(*m);
      pts.push_back({bytes, now.seconds(bytes) + gap, num(*m, "time_ms_median") * 1e-3});
    }
    SPB_USAGE(pts.size() >= 6, std::string("sim-calibrate: fewer than six sizes of ") + method +
                                   " (nccl) at P = 2 in both the measured and the simulated files");
    std::sort(pts.begin(), pts.end(), [](const CostPoint& a, const CostPoint& b) { return a.bytes < b.bytes; });
    const SimCost c = fit_cost_two_lines(pts, now.split_bytes);
    fitted.*member = c;
    const CostResiduals r = cost_residuals(c, pts);
    std::snprintf(buf, sizeof buf, "%s, %zu sizes at P = 2 (%s..%s): two lines split at %s (%s); their residuals "
                  "relative to the measured times: rms %.1f%%, largest %+.1f%% at %s", what, pts.size(),
                  size_words(pts.front().bytes).c_str(), size_words(pts.back().bytes).c_str(),
                  size_words(c.split_bytes).c_str(),
                  now.split_bytes > 0 ? "where the first pass put them" : "where they fit best",
                  100 * r.rms, 100 * r.worst, size_words(r.worst_bytes).c_str());
    const std::string n = name;
    fits.push_back({n + "_call_s", c.call_s, buf});
    fits.push_back({n + "_byte_s", c.byte_s, "its seconds per byte of the call"});
    fits.push_back({n + "_split_bytes", c.split_bytes, "the smallest size of the second line"});
    fits.push_back({n + "_above_call_s", c.above_call_s, "the second line's seconds per call"});
    fits.push_back({n + "_above_byte_s", c.above_byte_s, "its seconds per byte of the call"});
  };
  auto state = [](const Row& r) { return num(r, "bytes"); };
  fit_nccl("nccl_p2p", &SimTransport::nccl_p2p, "chain", state,
           "chain (NCCL send and receive of the whole state), per call");
  fit_nccl("nccl_group", &SimTransport::nccl_group, "ring", state,
           "ring (a step a group of one send and one receive of the state), per group");
  // The all-gather's piece: the state and its decay, a value per row of dv (baselines/pattern_allgather.cpp).
  fit_nccl("nccl_allgather", &SimTransport::nccl_allgather, "allgather",
           [](const Row& r) { return num(r, "bytes") * (1 + 1 / std::max(1.0, num(r, "dv"))); },
           "allgather (NCCL's ring all-gather of the state and its decay), per call");
  fit_nccl("nccl_alltoall", &SimTransport::nccl_alltoall, "alltoall",
           [](const Row& r) { return num(r, "bytes") / std::max(1.0, num(r, "world_size")); },
           "alltoall (NCCL's grouped sends and receives, a piece of the state per peer), per call");
  {
    const SimCost& ag = fitted.nccl_allgather;
    const char* why = "no collective row measures an all-reduce alone: the all-gather's";
    fits.push_back({"nccl_allreduce_call_s", ag.call_s, why});
    fits.push_back({"nccl_allreduce_byte_s", ag.byte_s, why});
    fits.push_back({"nccl_allreduce_split_bytes", ag.split_bytes, why});
    fits.push_back({"nccl_allreduce_above_call_s", ag.above_call_s, why});
    fits.push_back({"nccl_allreduce_above_byte_s", ag.above_byte_s, why});
  }

  // The device All-Scan: its start from the one-block state (64 KiB), its blocks from the states of 32 blocks or more.
  const SimTransport& t = cur.transport;
  const Rows dm = rows_of(mc, "allscan", "device-ll16", "comm"), ds = rows_of(sc, "allscan", "device-ll16", "comm");
  auto with_blocks = [](const Rows& all, bool one) {
    Rows out;
    for (const auto& [k, r] : all)
      if ((num(*r, "blocks") <= 1) == one && (one || num(*r, "blocks") >= 32)) out[k] = r;
    return out;
  };
  auto fit_median = [&](const char* key, double now, const Rows& m, const Rows& s, const PerRow& per, bool any_sign,
                        const char* what) {
    const auto [gap, n] = median_gap(m, s, per);
    SPB_USAGE(n > 0, std::string("sim-calibrate: no P = 2 row for ") + key + " in both files");
    std::snprintf(buf, sizeof buf, "%s: %+.3g s median gap over %d sizes at P = 2 (was %.4g s)", what, gap, n, now);
    fits.push_back({key, any_sign ? now + gap : std::max(0.0, now + gap), buf});
  };
  fit_median("device_call_s", t.device_call_s, with_blocks(dm, true), with_blocks(ds, true), per_call, false,
             "allscan device-ll16, one block (64 KiB), per call");
  fit_median("device_block_s", t.device_block_s, with_blocks(dm, false), with_blocks(ds, false), per_block, false,
             "allscan device-ll16, 32 blocks of 16384 elements or more, per block");
  // dp's launch gaps: per stage call of its forward and backward (calls_per_iter of its stage rows at P = 2).
  const auto stages = read_csv(o.stages);
  const PerRow dp_calls = [&](const Row& op) {
    double calls = 0;
    for (const Row& r : stages)
      if (get(r, "level") == "stage" && get(r, "method") == "dp" && get(r, "world_size") == "2" &&
          get(r, "tokens_per_rank") == get(op, "tokens_per_rank") && get(r, "heads") == get(op, "heads"))
        calls += num(r, "calls_per_iter");
    return std::max(1.0, calls);
  };
  fit_median("stage_offset_s", cur.gpu.stage_offset_s, rows_of(mo, "dp", "nccl", "fwd_bwd"),
             rows_of(so, "dp", "nccl", "fwd_bwd"), dp_calls, true, "dp fwd_bwd at the operator level, per stage call");

  std::ofstream out(o.out);
  SPB_USAGE(out.good(), "sim-calibrate: cannot write " + o.out);
  out << "# Costs of the simulated platform's transports, per call and per byte, fitted at P = 2 by `spbench\n"
      << "# sim-calibrate` (sim/calibration.h) from " << o.measured_collective << " and " << o.measured_operator
      << ", against " << o.simulated_collective << " and " << o.simulated_operator << " (simulated with "
      << o.calibration << ").\n"
      << "# Generated: edit the sources, not this file.\n"
      << "gpu = " << cur.gpu.name << "\n"
      << "# the device-to-device copy rate, bytes read and written per second (a copy measured on an H200 of this\n"
      << "# workplace, 4.3 TB/s)\n"
      << "gpu_copy_bytes_per_s = " << cur.gpu.copy_Bps << "\n";
  for (const Fit& f : fits) {
    // A split is a size in bytes, written whole: a size of the sweep must stay on its side of it.
    const bool bytes = f.key.size() > 12 && f.key.compare(f.key.size() - 12, 12, "_split_bytes") == 0;
    std::snprintf(buf, sizeof buf, bytes ? "%.0f" : "%.6g", f.value);
    out << "# " << f.source << "\n" << f.key << " = " << buf << "\n";
    std::printf("%-28s %-12s # %s\n", f.key.c_str(), buf, f.source.c_str());
  }
  SPB_USAGE(out.good(), "sim-calibrate: cannot write " + o.out);
  return 0;
}

}  // namespace spb
