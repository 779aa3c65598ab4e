// spbench report: beyond the lent machines, the simulation (SimGrid SMPI, sim/). Its rows (results/sim/*.csv,
// `simulated` = 1, each with its `platform`) against the measured rows of the same configuration on the lent kind's
// platforms (the hold-out), the paper's Tables 2 to 6 predicted on the DGX H100 platform (a verdict on a ratio against
// the paper only where the hold-out of the rows it is made of held), the calibration constants (sim/platforms/*.calib)
// and the plots.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <libfccp/csv.h>

#include "report/src/report_common.h"
#include "runtime/error.h"

namespace spb {
namespace report_detail {

namespace fs = std::filesystem;

namespace {

double median_ms(const Row& r) { return num(r, "time_ms_median"); }
int nodes_of(const Row& r) { return std::max(1, inum(r, "nodes")); }
int ranks_per_node_of(const Row& r) {
  const int rpn = inum(r, "ranks_per_node");
  return rpn > 0 ? rpn : std::max(1, inum(r, "world_size") / nodes_of(r));
}
std::string pct(double e) { return std::isfinite(e) ? fmt("%+.1f%%", 100 * e) : "—"; }
std::string abs_pct(double e) { return std::isfinite(e) ? fmt("%.1f%%", 100 * e) : "—"; }

// A configuration of `level` as the hold-out joins it, the backend given (for the nccl / nccl-socket match).
std::string config_key(const std::string& level, const Row& r, const std::string& backend) {
  std::string k = col(r, "method") + "|" + backend + "|" + std::to_string(inum(r, "world_size")) + "|" +
                  std::to_string(nodes_of(r)) + "|" + std::to_string(ranks_per_node_of(r));
  if (level == "collective") return k + "|" + std::to_string(lnum(r, "bytes")) + "|" +
                                    std::to_string(lnum(r, "block_elems")) + "|" + timing_of(r);
  // The operator: its shape and pass, and the schedule (a row of --overlap or --head-groups is another run); the
  // model: its configuration too (hidden, layers, recompute, ...).
  for (const char* c : {"batch", "heads", "dk", "dv", "tokens_per_rank"}) k += "|" + std::to_string(lnum(r, c));
  k += "|" + col(r, "dtype") + "|" + col(r, "pass") + "|" + schedule_of(r);
  return level == "model" ? k + "|" + model_config_key(r) : k;
}

bool level_row(const std::string& level, const Row& r) {
  if (col(r, "level") != level || !(median_ms(r) > 0)) return false;
  if (level == "collective")
    return col(r, "pass") == "comm" && (timing_of(r) == kLatency || timing_of(r) == kBackToBack);
  return true;
}

std::string size_cell(const std::string& level, const Row& r) {
  if (level == "operator") return int_str(num(r, "tokens_per_rank")) + " tokens/rank";
  if (level == "model") return int_str(num(r, "tokens_per_rank")) + " tokens/rank, H=" + col(r, "heads");
  return bytes_str(num(r, "bytes")) + (lnum(r, "block_elems") > 0 ? ", blocks " + col(r, "block_elems") : "") + ", " +
         timing_words(timing_of(r));
}

// The kind a results/sim file is of: "sim/KIND_LEVEL.csv" -> KIND ("" where the name is not of that form).
std::string sim_file_kind(const std::string& file, const std::string& level) {
  const std::string tail = "_" + level + ".csv";
  if (file.rfind("sim/", 0) != 0 || file.size() <= 4 + tail.size() ||
      file.compare(file.size() - tail.size(), tail.size(), tail) != 0)
    return "";
  return file.substr(4, file.size() - 4 - tail.size());
}

// The repository (--repo, else the folder above --results).
fs::path repo_root(const Context& c) { return c.o.repo.empty() ? fs::path(c.o.results) / ".." : fs::path(c.o.repo); }
// The folder of the platform files: sim/platforms.
std::string platforms_dir(const Context& c) { return (repo_root(c) / "sim" / "platforms").lexically_normal().string(); }

}  // namespace

std::map<MissKey, std::string> read_holdout_causes(const std::string& path) {
  std::map<MissKey, std::string> causes;
  if (!fs::exists(path)) return causes;
  try {
    io::CSVReader<6, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in(path);
    in.read_header(io::ignore_extra_column, "level", "method", "backend", "world_size", "nodes", "cause");
    std::string level, method, backend, cause;
    int P = 0, nodes = 0;
    while (in.read_row(level, method, backend, P, nodes, cause)) causes[{level, method, backend, P, nodes}] = cause;
  } catch (const io::error::base& e) {
    throw UsageError(path + ": " + e.what());
  }
  return causes;
}

std::string SimHoldOut::summary() const {
  if (holdout == 0) return "no hold-out rows (no simulated row of a lent platform beyond P = 2 on one node has a "
                           "measured row of its configuration)";
  std::string s = "hold-out rows within " + fmt("%.0f%%", 100 * kSimWithin) + ": " + std::to_string(within) +
                  " of " + std::to_string(holdout) + ", median |error| " + abs_pct(median_abs) + ": ";
  if (held) return s + "**held**";
  std::vector<std::string> why;
  const int outside = holdout - within;
  if (outside) why.push_back(std::to_string(outside) + (outside == 1 ? " row" : " rows") + " outside " +
                             fmt("%.0f%%", 100 * kSimWithin));
  if (!(median_abs <= kSimMedian)) why.push_back("median |error| above " + fmt("%.0f%%", 100 * kSimMedian));
  return s + "**missed** (" + join(why, "; ") + ")";
}

std::string SimHoldOut::gate() const {
  if (held) return "";
  return holdout ? "no verdict: the " + level + " hold-out missed" : "no verdict: no " + level + " hold-out rows";
}

SimHoldOut sim_holdout(const std::string& level, const std::vector<const Row*>& measured,
                       const std::vector<const Row*>& simulated) {
  SimHoldOut h;
  h.level = level;
  // The newest row per configuration on each side (a later row wins a tie).
  std::map<std::string, const Row*> meas, sim;
  auto newest = [](std::map<std::string, const Row*>& m, const std::string& k, const Row* r) {
    const Row*& slot = m[k];
    if (!slot || col(*slot, "date") <= col(*r, "date")) slot = r;
  };
  for (const Row* r : measured)
    if (!is_simulated(*r) && level_row(level, *r)) newest(meas, config_key(level, *r, col(*r, "backend")), r);
  for (const Row* r : simulated)
    if (is_simulated(*r) && col(*r, "platform") != kSimPredictPlatform && level_row(level, *r))
      newest(sim, config_key(level, *r, col(*r, "backend")), r);
  for (const auto& [k, s] : sim) {
    auto m = meas.find(k);
    // The network between nodes is the platform's: simulated nccl over nodes stands for the measured nccl-socket.
    if (m == meas.end() && col(*s, "backend") == "nccl" && nodes_of(*s) > 1)
      m = meas.find(config_key(level, *s, "nccl-socket"));
    if (m == meas.end()) {
      h.unmatched.push_back(s);
      continue;
    }
    SimPair p;
    p.sim = s, p.meas = m->second;
    p.sim_ms = median_ms(*s), p.meas_ms = median_ms(*m->second);
    p.err = (p.sim_ms - p.meas_ms) / p.meas_ms;
    p.calibration = inum(*s, "world_size") == 2 && nodes_of(*s) == 1;
    p.within = std::fabs(p.err) <= kSimWithin;
    h.pairs.push_back(p);
  }
  auto order = [&](const SimPair& p) {
    const Row& r = *p.sim;
    return std::make_tuple(!p.calibration, inum(r, "world_size"), nodes_of(r), col(r, "method"), col(r, "backend"),
                           num(r, level == "collective" ? "bytes" : "tokens_per_rank"), num(r, "block_elems"),
                           col(r, "pass"));
  };
  std::stable_sort(h.pairs.begin(), h.pairs.end(),
                   [&](const SimPair& a, const SimPair& b) { return order(a) < order(b); });
  std::vector<double> errs;
  std::map<std::tuple<std::string, std::string, int, int>, SimHoldOut::Miss> misses;
  for (const SimPair& p : h.pairs) {
    if (p.calibration) continue;
    ++h.holdout;
    errs.push_back(std::fabs(p.err));
    if (p.within) {
      ++h.within;
      continue;
    }
    const Row& r = *p.sim;
    auto& m = misses[{col(r, "method"), col(r, "backend"), inum(r, "world_size"), nodes_of(r)}];
    m.method = col(r, "method"), m.backend = col(r, "backend"), m.P = inum(r, "world_size"), m.nodes = nodes_of(r);
    ++m.rows;
    if (!(std::fabs(m.worst) >= std::fabs(p.err))) m.worst = p.err;
  }
  if (!errs.empty()) {
    std::sort(errs.begin(), errs.end());
    const size_t n = errs.size();
    h.median_abs = n % 2 ? errs[n / 2] : (errs[n / 2 - 1] + errs[n / 2]) / 2;
  }
  h.held = h.holdout > 0 && h.within == h.holdout && h.median_abs <= kSimMedian;
  for (auto& [k, m] : misses) h.misses.push_back(m);
  return h;
}

std::string RatioHoldOut::what() const {
  std::vector<std::string> p;
  for (const auto& [m, b] : parts) p.push_back(m + " (" + b + ")");
  return join(p, " and ") + (timing.empty() ? "" : ", " + timing_words(timing));
}

std::string RatioHoldOut::summary() const {
  return what() + ": " + std::to_string(within) + " of " + std::to_string(rows) + " rows within " +
         fmt("%.0f%%", 100 * kSimWithin) + (missing.empty() ? "" : " (none of " + join(missing, " or ") + ")");
}

std::string RatioHoldOut::gate() const {
  if (held) return "";
  if (!missing.empty()) return "no verdict: no hold-out row of " + join(missing, " or ");
  const int outside = rows - within;
  return "no verdict: " + std::to_string(outside) + " of its " + std::to_string(rows) + " hold-out rows outside " +
         fmt("%.0f%%", 100 * kSimWithin);
}

RatioHoldOut ratio_holdout(const SimHoldOut& h, const std::vector<std::pair<std::string, std::string>>& parts,
                           const std::string& timing) {
  RatioHoldOut out;
  out.timing = timing;
  for (const auto& part : parts)
    if (std::find(out.parts.begin(), out.parts.end(), part) == out.parts.end()) out.parts.push_back(part);
  for (const auto& [method, backend] : out.parts) {
    int n = 0;
    for (const SimPair& p : h.pairs) {
      if (p.calibration || col(*p.sim, "method") != method || col(*p.sim, "backend") != backend ||
          timing_of(*p.sim) != timing)
        continue;
      ++n, ++out.rows;
      out.within += p.within;
    }
    if (!n) out.missing.push_back(method + " (" + backend + ")");
  }
  out.held = out.missing.empty() && out.rows > 0 && out.within == out.rows;
  return out;
}

namespace {

// The hold-out of `level` over every kind that has both a simulated file (results/sim/KIND_LEVEL.csv) and a measured
// one (results/KIND_LEVEL.csv): its simulated rows of the lent platforms joined to that kind's measured rows.
SimHoldOut holdout_of(const Context& c, const std::string& level, std::set<std::string>* kinds = nullptr) {
  std::vector<const Row*> measured, simulated;
  std::set<std::string> sim_kinds;
  for (size_t i = 0; i < c.res.sim_rows.size(); ++i) {
    const std::string kind = sim_file_kind(c.res.sim_row_file[i], level);
    if (kind.empty()) continue;
    sim_kinds.insert(kind);
    simulated.push_back(&c.res.sim_rows[i]);
  }
  // A simulated row is joined only to the measured rows of its own kind's file.
  for (const std::string& kind : sim_kinds) {
    const std::string file = kind + "_" + level + ".csv";
    bool any = false;
    for (auto [v, f] : {std::pair{&c.res.rows, &c.res.row_file}, {&c.res.node_rows, &c.res.node_row_file}})
      for (size_t i = 0; i < v->size(); ++i)
        if ((*f)[i] == file) measured.push_back(&(*v)[i]), any = true;
    if (any && kinds) kinds->insert(kind);
  }
  return sim_holdout(level, measured, simulated);
}

// `causes`: read_holdout_causes's, once for the three levels.
std::string holdout_md(const Context& c, const SimHoldOut& h, const std::map<MissKey, std::string>& causes) {
  const std::string& level = h.level;
  std::ostringstream s, csv;
  s << "### Hold-out, " << level << " level: simulated against measured\n\n";
  csv << "role,platform,gpus,nodes,ranks_per_node,method,backend,measured_backend,"
      << (level == "collective" ? "bytes,block_elems,timing" : "tokens_per_rank,batch,heads,dk,dv")
      << ",pass,measured_ms,"
      << "simulated_ms,error_pct,within_15pct,measured_date,measured_git_sha,measured_code_state,simulated_date,"
      << "simulated_git_sha,simulated_code_state\n";
  if (h.pairs.empty()) {
    s << "No simulated " << level << " row of a lent platform has a measured row of its configuration"
      << (h.unmatched.empty() ? "" : " (" + std::to_string(h.unmatched.size()) + " simulated rows without one)")
      << ".\n\n";
    std::ofstream(c.tables_dir + "/sim_holdout_" + level + ".csv") << csv.str();
    return s.str();
  }
  std::vector<std::vector<std::string>> rows;
  int calibration = 0;
  for (const SimPair& p : h.pairs) {
    const Row &r = *p.sim, &m = *p.meas;
    calibration += p.calibration;
    const std::string role = p.calibration ? "calibration" : "hold-out";
    const std::string within = p.within ? "yes" : "**no**";
    const std::string be = col(r, "backend") == col(m, "backend")
                               ? col(r, "backend")
                               : col(r, "backend") + " (measured: " + col(m, "backend") + ")";
    rows.push_back({role, int_str(num(r, "world_size")),
                    std::to_string(nodes_of(r)) + " x " + std::to_string(ranks_per_node_of(r)), col(r, "method"), be,
                    size_cell(level, r), col(r, "pass"), num_cell(p.meas_ms) + stale_mark(m), num_cell(p.sim_ms),
                    pct(p.err), p.calibration ? "(" + within + ")" : within});
    csv << role << "," << col(r, "platform") << "," << col(r, "world_size") << "," << nodes_of(r) << ","
        << ranks_per_node_of(r) << "," << col(r, "method") << "," << col(r, "backend") << "," << col(m, "backend")
        << ",";
    if (level == "collective") csv << col(r, "bytes") << "," << col(r, "block_elems") << "," << timing_of(r);
    else csv << col(r, "tokens_per_rank") << "," << col(r, "batch") << "," << col(r, "heads") << "," << col(r, "dk")
             << "," << col(r, "dv");
    csv << "," << col(r, "pass") << "," << fmt("%.6g", p.meas_ms) << "," << fmt("%.6g", p.sim_ms) << ","
        << fmt("%.2f", 100 * p.err) << "," << (p.within ? "yes" : "no") << "," << col(m, "date") << ","
        << col(m, "git_sha") << "," << col(m, kCodeStateCol) << "," << col(r, "date") << "," << col(r, "git_sha")
        << "," << col(r, kCodeStateCol) << "\n";
  }
  std::ofstream(c.tables_dir + "/sim_holdout_" + level + ".csv") << csv.str();
  s << "Every simulated " << level << " row of a lent platform joined to the measured row of its configuration ("
    << (level == "collective" ? "method, backend, P, state bytes, block, nodes and ranks per node, and the timing: "
                                "latency or back-to-back rows each against the measured rows of their own; pass comm"
        : level == "model"    ? "method, backend, P, batch, heads, dk, dv, tokens per rank, the model's configuration, "
                                "nodes and ranks per node; the schedule; a step's time"
                              : "method, backend, P, batch, heads, dk, dv, tokens per rank, pass, nodes and ranks "
                                "per node; the default schedule")
    << "), the newest of each; a simulated `nccl` row over several nodes against the measured `nccl-socket` one (the "
       "network transport is the platform's). Times are each row's `time_ms_median`; error = (simulated - measured) "
       "÷ measured. The rows at P = 2 on one node are the **calibration** (the platform's transport constants were "
       "fitted there), not part of the hold-out.\n\n"
    << "The hold-out holds only where every hold-out row is within " << fmt("%.0f%%", 100 * kSimWithin)
    << " and the median |error| is at most " << fmt("%.0f%%", 100 * kSimMedian) << ". Here: " << h.summary()
    << "; " << calibration << (calibration == 1 ? " calibration row" : " calibration rows") << " beside them.\n\n";
  if (!h.unmatched.empty()) {
    // Which simulated rows found no measured row, by method, backend, P and nodes.
    std::map<std::tuple<std::string, std::string, int, int>, int> left;
    for (const Row* r : h.unmatched)
      left[{col(*r, "method"), col(*r, "backend"), inum(*r, "world_size"), nodes_of(*r)}]++;
    std::vector<std::string> q;
    for (auto& [k, n] : left)
      q.push_back(std::get<0>(k) + " (" + std::get<1>(k) + ") at P = " + std::to_string(std::get<2>(k)) + " on " +
                  std::to_string(std::get<3>(k)) + (std::get<3>(k) == 1 ? " node" : " nodes") + ": " +
                  std::to_string(n));
    s << h.unmatched.size() << (h.unmatched.size() == 1 ? " simulated row has" : " simulated rows have")
      << " no measured row of their configuration (backend names must "
      << "match as above) and are left out: " << join(q, "; ") << ".\n\n";
  }
  if (!h.misses.empty()) {
    std::vector<std::vector<std::string>> miss;
    for (const auto& m : h.misses) {
      const auto why = causes.find({level, m.method, m.backend, m.P, m.nodes});
      miss.push_back({m.method, m.backend, std::to_string(m.P), std::to_string(m.nodes), std::to_string(m.rows),
                      pct(m.worst), why == causes.end() ? std::string(kMissNotExplained) : why->second});
    }
    s << "The misses, by method, backend, P and nodes, each with its cause (`report/src/holdout_causes.csv`; "
         "sim/NOTES.md, \"Hold-out, and what misses\", has the rows behind each):\n\n"
      << md_table({"method", "backend", "P", "nodes", "rows outside " + fmt("%.0f%%", 100 * kSimWithin),
                   "worst error", "why"},
                  miss, "llrrrrl")
      << "\n";
  }
  s << "<details><summary>Every row (" << h.pairs.size() << "; tables/sim_holdout_" << level
    << ".csv)</summary>\n\n"
    << md_table({"role", "P", "nodes x ranks", "method", "backend", "size", "pass", "measured (ms)", "simulated (ms)",
                 "error", "within " + fmt("%.0f%%", 100 * kSimWithin)},
                rows, "lrlllllrrrl")
    << "\n</details>\n\n";
  return s.str();
}

// The paper's Table 2 (collective, in one `timing`), Tables 3 and 4 (operator at `tokens` per GPU) or Tables 5 and 6
// (model) on the prediction platform.
struct PredictDef {
  std::string level, id, heading, ref, setting;
  long long paper_seq;
  std::vector<std::string> first;  // the methods' order
  std::function<bool(const Row&)> keep;
  bool throughput = false;  // the model: tokens/s/GPU (the paper's metric), higher is better; else a time in ms
  std::string timing;       // the collective level: kLatency (the paper's) or kBackToBack (a throughput); else ""
};

PredictDef predict_def(const Context& c, const std::string& level, long long tokens = 16384,
                       const std::string& timing = kLatency) {
  if (level == "model") {
    const std::string table = tokens == 16384 ? "5" : "6";
    PredictDef d{level, "sim_table" + table,
                 "Table " + table + " predicted: GLA-1B training on " + std::string(kSimPredictPlatform), "dp",
                 "GLA-1B (H=32, 20 layers, hidden 2048), B=1, " + int_str(tokens) +
                     " tokens per GPU, bf16, one training step (forward, backward, gradient all-reduce beside it, "
                     "AdamW); tokens/s/GPU (`tokens_per_s_per_gpu`, of the steps' mean)",
                 tokens, {"dp", "zeco", "lasp2", "lasp1", "ring", "ulysses"}, [tokens](const Row& r) {
                   return is(r, "tokens_per_rank", tokens) && is(r, "batch", 1) && paper_model_config(r) &&
                          default_order(r);
                 }};
    d.throughput = true;
    return d;
  }
  if (level == "collective") {
    const bool latency = timing == kLatency;
    PredictDef d{level, latency ? "sim_table2" : "sim_table2_back_to_back",
                 "Table 2 predicted: the collective call on " + std::string(kSimPredictPlatform) +
                     (latency ? ", latency (the paper's timing)" : ", back-to-back calls (a throughput)"),
                 "allscan",
                 "Per-rank state " + bytes_str(kTable2Bytes) + " (32 heads x 128 x 128 fp32), All-Scan blocks of " +
                     int_str(kPaperBlockElems) + " elements; " +
                     (latency ? "the latency of one call (`--timing latency`: a barrier, the call alone, the slowest "
                                "rank's time), the mean over the iterations (ms, `time_ms_mean`)"
                              : "back-to-back calls (`--timing back-to-back`: a call's time from the event after the "
                                "one before, so a chain's calls overlap: a throughput, not the paper's timing), the "
                                "mean over the iterations (ms, `time_ms_mean`)"),
                 kTable2Seq, {"allscan", "allgather", "chain", "ring", "alltoall"}, [timing](const Row& r) {
                   return num(r, "bytes") == kTable2Bytes && col(r, "pass") == "comm" && timing_of(r) == timing &&
                          (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems));
                 }};
    d.timing = timing;
    return d;
  }
  const std::string table = tokens == 16384 ? "3" : "4";
  return {level, "sim_table" + table,
          "Table " + table + " predicted: operator forward+backward on " + std::string(kSimPredictPlatform), "dp",
          "GLA attention, B=1, H=16, dk=dv=128, " + int_str(tokens) +
              " tokens per GPU, bf16, one forward and one backward (ms, `time_ms_mean`: the mean over the iterations)",
          tokens, operator_methods(c), [tokens](const Row& r) {
            return col(r, "pass") == "fwd_bwd" && is(r, "tokens_per_rank", tokens) && is(r, "batch", 1) &&
                   is(r, "heads", 16) && is(r, "dk", 128) && is(r, "dv", 128) && default_order(r);
          }};
}

// What a prediction table shows of a row: its time (ms, the mean over the iterations, as the measured tables show
// it), or the model's throughput (tokens/s/GPU, of the steps' mean).
double predict_value(const PredictDef& d, const Row& r) { return d.throughput ? tokens_per_s(r) : ms(r); }

// Per (GPUs, method) the simulated row of the prediction platform (the fastest backend where several).
std::map<std::pair<int, std::string>, const Row*> predicted_rows(const Context& c, const PredictDef& d) {
  std::map<std::pair<int, std::string>, const Row*> out;
  auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "world_size") + "|" + col(r, "backend"); };
  auto keep = [&](const Row& r) {
    return col(r, "platform") == kSimPredictPlatform && col(r, "level") == d.level && ms(r) > 0 && d.keep(r);
  };
  for (auto& [k, r] : newest_by(c.res.sim_rows, keep, key)) {
    const Row*& slot = out[{inum(*r, "world_size"), col(*r, "method")}];
    if (!slot || ms(*r) < ms(*slot)) slot = r;
  }
  return out;
}

// One line of a prediction table, and its verdict against the paper.
struct PredictLine {
  int gpus = 0;
  std::string method;
  const Row* row = nullptr;
  double sim = NAN, paper = NAN, r_sim = NAN, r_paper = NAN, q = NAN;
  Claim::Kind kind = Claim::none;
  std::string verdict, holdout;  // the verdict cell; the ratio's hold-out ("" where there is no ratio)
  RatioHoldOut rh;
};

std::vector<PredictLine> predict_lines(const Context& c, const PredictDef& d, const SimHoldOut& h) {
  const auto pred = predicted_rows(c, d);
  std::set<int> gpus;
  std::set<std::string> names;
  for (auto& [k, r] : pred) gpus.insert(k.first), names.insert(k.second);
  for (const auto& v : c.paper)
    if (v.level == d.level && v.seq_per_gpu == d.paper_seq &&
        (d.throughput ? v.metric == "throughput" : v.metric == "time" || v.metric == "time_fwd_bwd"))
      gpus.insert(v.gpus), names.insert(v.method);
  std::vector<PredictLine> out;
  if (pred.empty()) return out;
  for (int P : gpus)
    for (const std::string& m : ordered(names, d.first)) {
      const auto it = pred.find({P, m});
      PredictLine l;
      l.gpus = P, l.method = m, l.row = it == pred.end() ? nullptr : it->second;
      l.paper = paper_value(c.paper, d.level, P, d.paper_seq, m);
      if (!l.row && !std::isfinite(l.paper)) continue;
      const auto ref_it = pred.find({P, d.ref});
      const Row* ref = ref_it == pred.end() ? nullptr : ref_it->second;
      l.sim = l.row ? predict_value(d, *l.row) : NAN;
      l.r_sim = l.sim / (ref ? predict_value(d, *ref) : NAN);
      l.r_paper = l.paper / paper_value(c.paper, d.level, P, d.paper_seq, d.ref);
      l.q = l.r_sim / l.r_paper;
      l.verdict = "—";
      if (m == d.ref) {
        l.verdict = "reference";
      } else if (l.row && ref) {
        // The ratio's verdict rests on the hold-out of the rows it is made of (DESIGN §10).
        const RatioHoldOut rh = ratio_holdout(h, {{m, col(*l.row, "backend")}, {d.ref, col(*ref, "backend")}},
                                              d.timing);
        l.holdout = rh.summary(), l.rh = rh;
        if (std::isfinite(l.q)) {
          if (d.timing == kBackToBack) {
            l.kind = Claim::not_compared;
            l.verdict = "not compared: back-to-back calls are a throughput, the paper's Table 2 a latency";
          } else if (!rh.held) {
            l.kind = Claim::no_verdict;
            l.verdict = rh.gate();
          } else {
            const bool agrees = l.q >= 0.80 && l.q <= 1.25;
            l.kind = agrees ? Claim::agrees : Claim::disagrees;
            l.verdict = std::string(agrees ? "agrees" : "disagrees") + " (quotient " + fmt("%.2f", l.q) + ")";
          }
        }
      }
      out.push_back(l);
    }
  return out;
}

std::string predict_md(const Context& c, const PredictDef& d, const SimHoldOut& h) {
  const auto lines = predict_lines(c, d, h);
  const std::string unit = d.throughput ? "tokens/s/GPU" : "ms";
  std::ostringstream s, csv;
  s << "### " << d.heading << "\n\n" << d.setting << ". The simulated column is spbench's own code run under SMPI on "
    << "the `" << kSimPredictPlatform << "` platform (`sim/platforms/" << kSimPredictPlatform << ".xml`); the paper's "
    << "numbers are its H100 cluster's. Ratios are method ÷ " << d.ref << " at the same GPU count; a verdict compares "
    << "our ratio with the paper's (quotient within 0.80-1.25: agrees), and only where the hold-out of the rows that "
    << "ratio is made of held: the hold-out rows of its two methods with their backends"
    << (d.timing.empty() ? "" : " and this timing") << ", every one within " << fmt("%.0f%%", 100 * kSimWithin)
    << " (the last column; the hold-out compares each row's `time_ms_median`).\n\n"
    << "The whole " << d.level << " hold-out (above): " << h.summary() << ".\n\n";
  csv << "gpus,method,backend," << (d.throughput ? "simulated_tokens_per_s_per_gpu,paper_tokens_per_s_per_gpu"
                                                 : "simulated_ms,paper_ms")
      << ",ratio_simulated,ratio_paper,quotient,verdict,ratio_holdout,timing,platform,nodes,ranks_per_node,date,"
      << "git_sha,code_state\n";
  if (lines.empty()) {
    s << "No simulated row of `" << kSimPredictPlatform << "` at this setting (results/sim/" << kSimPredictPlatform
      << "_" << d.level << ".csv" << (d.timing.empty() ? "" : ", `timing` " + d.timing) << ").\n\n";
    std::ofstream(c.tables_dir + "/" + d.id + ".csv") << csv.str();
    return s.str();
  }
  std::vector<std::vector<std::string>> rows;
  auto n = [](double v) { return std::isfinite(v) ? fmt("%.6g", v) : std::string(); };
  for (const PredictLine& l : lines) {
    const Row* r = l.row;
    rows.push_back({std::to_string(l.gpus), l.method, r ? col(*r, "backend") : "—",
                    r ? num_cell(l.sim) : "not simulated", std::isfinite(l.paper) ? num_cell(l.paper) : kNotPublished,
                    ratio_cell(l.r_sim), ratio_cell(l.r_paper), l.verdict, l.holdout.empty() ? "—" : l.holdout});
    csv << l.gpus << "," << l.method << "," << (r ? col(*r, "backend") : "") << "," << n(l.sim) << "," << n(l.paper)
        << "," << n(l.r_sim) << "," << n(l.r_paper) << "," << n(l.q) << "," << csv_field(l.verdict) << ","
        << csv_field(l.holdout) << "," << d.timing << "," << kSimPredictPlatform << ","
        << (r ? std::to_string(nodes_of(*r)) : "") << "," << (r ? std::to_string(ranks_per_node_of(*r)) : "") << ","
        << (r ? col(*r, "date") : "") << "," << (r ? col(*r, "git_sha") : "") << ","
        << (r ? col(*r, kCodeStateCol) : "") << "\n";
  }
  std::ofstream(c.tables_dir + "/" + d.id + ".csv") << csv.str();
  s << md_table({"GPUs", "method", "backend", "simulated, " + std::string(kSimPredictPlatform) + " (" + unit + ")",
                 "paper (" + unit + ")", "÷ " + d.ref + ", simulated", "÷ " + d.ref + ", paper", "verdict",
                 "hold-out of the ratio's rows"},
                rows, "rllrrrrll")
    << "\n";
  return s.str();
}

}  // namespace

std::string calib_md(const std::string& dir, const std::string& name) {
  std::ifstream f(dir + "/" + name);
  struct Key {
    std::string key, value, comment;  // the comment lines right above it
  };
  std::vector<std::string> header, pending;
  std::vector<Key> keys;
  for (std::string line; std::getline(f, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      const size_t at = line.find_first_not_of("# ");
      pending.push_back(at == std::string::npos ? "" : line.substr(at));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    auto trim = [](std::string v) {
      const size_t a = v.find_first_not_of(' '), b = v.find_last_not_of(' ');
      return a == std::string::npos ? std::string() : v.substr(a, b - a + 1);
    };
    if (keys.empty() && header.empty()) header.swap(pending);
    keys.push_back({trim(line.substr(0, eq)), trim(line.substr(eq + 1)), join(pending, " ")});
    pending.clear();
  }
  auto find = [&](const std::string& k) -> const Key* {
    for (const Key& x : keys)
      if (x.key == k) return &x;
    return nullptr;
  };
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  // A transport: a prefix with <prefix>_call_s and <prefix>_byte_s, maybe a second line (sim/sim_runtime.h).
  const std::vector<std::string> parts = {"_call_s", "_byte_s", "_split_bytes", "_above_call_s", "_above_byte_s"};
  std::vector<std::vector<std::string>> transports, others;
  std::set<std::string> shown;
  for (const Key& k : keys) {
    if (!ends_with(k.key, "_call_s") || ends_with(k.key, "_above_call_s")) continue;
    const std::string t = k.key.substr(0, k.key.size() - 7);
    if (!find(t + "_byte_s")) continue;
    auto value = [&](const std::string& part, double scale, const char* f) {
      const Key* x = find(t + part);
      if (!x) return std::string("—");
      const double v = std::atof(x->value.c_str());
      return scale ? fmt(f, v * scale) : bytes_str(v);
    };
    for (const std::string& part : parts)
      if (const Key* x = find(t + part)) shown.insert(x->key);
    // The fit's own comment stands above <transport>_call_s (sim/calibration.cpp).
    transports.push_back({"`" + t + "`", value("_call_s", 1e6, "%.2f"), value("_byte_s", 1e12, "%.3g"),
                          value("_split_bytes", 0, ""), value("_above_call_s", 1e6, "%.2f"),
                          value("_above_byte_s", 1e12, "%.3g"), k.comment});
  }
  for (const Key& k : keys)
    if (!shown.count(k.key)) others.push_back({"`" + k.key + "`", k.value, k.comment});
  std::ostringstream s;
  s << "`sim/platforms/" << name << "`" << (header.empty() ? "" : ": " + join(header, " ")) << "\n\n";
  if (!transports.empty())
    s << "Each transport's cost of a call before its bytes move, per call and per byte of the call: one line below the "
         "split, the other from it on.\n\n"
      << md_table({"transport", "per call (µs)", "per byte (ps)", "split", "from the split: per call (µs)",
                   "per byte (ps)", "its fit (the file's comment)"},
                  transports, "lrrrrrl")
      << "\n";
  if (!others.empty()) s << md_table({"key", "value", "its fit (the file's comment)"}, others) << "\n";
  return s.str();
}

namespace {

// The first sentence of a platform file's first comment.
std::string platform_brief(const std::string& path) {
  std::ifstream f(path);
  std::stringstream all;
  all << f.rdbuf();
  const std::string t = all.str();
  const size_t a = t.find("<!--");
  if (a == std::string::npos) return "";
  std::string text = t.substr(a + 4, t.find("-->", a) - a - 4);
  std::string flat;
  for (char ch : text) {
    if (ch == '\n') ch = ' ';
    if (ch == ' ' && (flat.empty() || flat.back() == ' ')) continue;
    flat += ch;
  }
  const size_t end = flat.find(". ");
  return end == std::string::npos ? flat : flat.substr(0, end + 1);
}

// The styles of the simulation's plots (tests/report/check_report_plots.sh knows them): the lent platform's simulated
// rows as large open circles without a line, the prediction platform's as a dashed line of open squares, and the
// paper's numbers as large stars.
const std::string kSimPointStyle = "with points lw 1.5 pt 6 ps 2.0 ";
const std::string kSimLineStyle = "with linespoints lw 1.5 dt 2 pt 4 ps 1.1 ";
const std::string kPaperStarStyle = "with points pt 3 ps 2.6 lw 2 ";

// Time against GPUs per method: measured rows of the lent kind (filled), its simulated rows (open), the prediction
// platform's (dashed, open) and the paper's (stars).
Figure plot_sim_vs_gpus(Context& c, const PredictDef& d, const std::set<std::string>& kinds) {
  PlotSpec p;
  p.name = "sim_" + d.level + "_vs_gpus";
  p.title = d.level == "collective"
                ? "Collective call (" + timing_words(d.timing) + "), " + bytes_str(kTable2Bytes) +
                      " state: measured, simulated, paper"
                : "Operator fwd+bwd, 16384 tokens/GPU: measured, simulated, paper";
  p.xlabel = "number of GPUs";
  p.ylabel = d.level == "collective" ? "time per call (ms)" : "forward+backward time (ms)";
  p.xscale = Scale::log, p.yscale = Scale::log, p.logx_base = 2;
  p.extra = "set xrange [1.7:300]\nset xtics (2, 3, 4, 8, 16, 32, 64, 128, 256)\n";
  p.width = 1400, p.height = 760;  // the key's three columns hold entries such as "zeco (rail-logdepth) simulated, ..."
  const auto pred = predicted_rows(c, d);
  std::set<std::string> names;
  for (auto& [k, r] : pred) names.insert(k.second);
  // Per method the backend shown on the lent machine: the prediction's at its fewest GPUs (one node), else the
  // one with the most rows.
  std::map<std::string, std::string> backend;
  for (auto& [k, r] : pred)
    if (!backend.count(k.second)) backend[k.second] = col(*r, "backend");
  const std::string file_level = "_" + d.level + ".csv";
  auto lent = [&](const Row& r, const std::string& file, bool sim) {
    const std::string kind = sim ? sim_file_kind(file, d.level)
                                 : file.size() > file_level.size() ? file.substr(0, file.size() - file_level.size())
                                                                   : "";
    return kinds.count(kind) && col(r, "level") == d.level && nodes_of(r) == 1 && inum(r, "world_size") >= 2 &&
           ms(r) > 0 && d.keep(r) &&
           (!sim || col(r, "platform") != kSimPredictPlatform);
  };
  std::map<std::string, std::map<std::string, int>> count;  // method -> backend -> rows
  for (size_t i = 0; i < c.res.rows.size(); ++i)
    if (lent(c.res.rows[i], c.res.row_file[i], false)) {
      count[col(c.res.rows[i], "method")][col(c.res.rows[i], "backend")]++;
      names.insert(col(c.res.rows[i], "method"));
    }
  for (auto& [m, by] : count)
    if (!backend.count(m) || !by.count(backend[m]))
      backend[m] = std::max_element(by.begin(), by.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  const std::vector<std::string> methods = ordered(names, d.first);
  for (const std::string& m : methods) {
    const int colour = method_colour(m);
    // Measured: the backend's line and filled point, as in every plot; marked where a row's code changed since.
    std::map<int, const Row*> mrow, srow;
    for (size_t i = 0; i < c.res.rows.size(); ++i) {
      const Row& r = c.res.rows[i];
      if (!lent(r, c.res.row_file[i], false) || col(r, "method") != m || col(r, "backend") != backend[m]) continue;
      const Row*& slot = mrow[inum(r, "world_size")];
      if (!slot || col(*slot, "date") <= col(r, "date")) slot = &r;
    }
    PlotSeries meas = measured_series(m, backend[m], join({kinds.begin(), kinds.end()}, ", "));
    for (auto& [P, r] : mrow) {
      meas.rows.push_back({double(P), ms(*r)});
      if (code_changed(*r)) meas.labels.push_back({double(P), ms(*r), kOlderCodeMark});
    }
    if (!meas.labels.empty()) meas.title += std::string(", ") + kOlderCodeMark;
    // Simulated on the lent platform: large open circles, no line (a measured point sits inside its ring).
    PlotSeries sim;
    sim.kind = SeriesKind::simulated;
    sim.style = kSimPointStyle + colour_spec(colour);
    sim.title = m + " (" + backend[m] + ") simulated, " + join({kinds.begin(), kinds.end()}, ", ");
    for (size_t i = 0; i < c.res.sim_rows.size(); ++i) {
      const Row& r = c.res.sim_rows[i];
      if (!lent(r, c.res.sim_row_file[i], true) || col(r, "method") != m || col(r, "backend") != backend[m]) continue;
      const Row*& slot = srow[inum(r, "world_size")];
      if (!slot || col(*slot, "date") <= col(r, "date")) slot = &r;
    }
    for (auto& [P, r] : srow) sim.rows.push_back({double(P), ms(*r)});
    // The prediction platform: a dashed line with open squares.
    PlotSeries dgx = predicted_series(m);
    std::string last_backend;
    for (auto& [k, r] : pred) {
      if (k.second != m) continue;
      dgx.rows.push_back({double(k.first), ms(*r)});
      label_backend_change(dgx, last_backend, *r, ms(*r));
    }
    PlotSeries paper = paper_series(m, "H100");
    paper.style = kPaperStarStyle + colour_spec(colour);
    for (int P : kPaperGpus) {
      const double v = paper_value(c.paper, d.level, P, d.paper_seq, m);
      if (std::isfinite(v)) paper.rows.push_back({double(P), v});
    }
    for (PlotSeries* s : {&meas, &sim, &dgx, &paper})
      if (!s->rows.empty()) p.series.push_back(*s);
  }
  // The legend below the plot in three columns, filled down (a method's entries together); its blank title keeps it
  // off the x axis' label.
  size_t entries = 0;
  for (const auto& s : p.series) entries += !s.rows.empty();
  p.key = "below center vertical Left reverse maxrows " + std::to_string(std::max<size_t>(1, (entries + 2) / 3)) +
          " width -1 samplen 3 title \" \"";
  return draw(c, p,
              std::string(d.level == "collective" ? "Collective call at " + bytes_str(kTable2Bytes) +
                                                        " per rank (All-Scan blocks of " + int_str(kPaperBlockElems) +
                                                        " elements), timed " +
                                                        (d.timing == kLatency ? "as the paper does (latency: one call "
                                                                                "after a barrier)"
                                                                              : "back to back (a throughput, not the "
                                                                                "paper's timing)") + ","
                                                  : "Operator forward+backward at 16384 tokens per GPU") +
                  " against GPUs: measured on the lent machine (filled points, the backend's line), simulated on its "
                  "one-node platform (open circles), simulated on " + kSimPredictPlatform +
                  " (dashed lines, open squares) and the paper's (stars). The lent machine's points are at one node; "
                  "its two-node rows are in the hold-out table.",
              "no measured or simulated " + d.level + " rows at this setting");
}

}  // namespace

std::string section_simulation(Context& c) {
  std::ostringstream s;
  s << "## Beyond the lent machines: simulation (SimGrid SMPI)\n\n";
  if (c.res.sim_rows.empty()) {
    s << "No simulated rows yet (`results/sim/*.csv`, written by spbench's simulated build, `-DSPB_SIM=ON`).\n\n";
    return s.str();
  }
  std::set<std::string> platforms;
  for (const Row& r : c.res.sim_rows) platforms.insert(col(r, "platform"));
  s << "Numbers beyond the lent GPUs come from a simulation of spbench's own code: the same method code (zeco, the "
       "baselines, their collectives) runs under SimGrid's SMPI, one simulated process per GPU, on a platform file "
       "that describes the machine's links. Compute is not simulated but replayed: each GPU stage takes the time "
       "recorded for it on the real GPU (`results/<kind>_stages.csv`, level `stage`). Communication is MPI on the "
       "platform's links, each call after its transport's cost per call and per byte (the constants below, fitted on "
       "the measured rows at P = 2). The simulated rows (`results/sim/*.csv`, `simulated` = 1, platforms "
    << "`" << join({platforms.begin(), platforms.end()}, "`, `") << "`"
    << ") are checked against the measured rows of the lent machine at every other P and node split (the hold-out "
       "below) before their predictions for the paper's cluster are compared with the paper.\n\n";
  s << "### Calibration constants and platforms\n\n";
  const std::string dir = platforms_dir(c);
  std::vector<std::string> calibs, xmls;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      const std::string n = e.path().filename().string();
      if (e.path().extension() == ".calib") calibs.push_back(n);
      if (e.path().extension() == ".xml") xmls.push_back(n);
    }
  std::sort(calibs.begin(), calibs.end()), std::sort(xmls.begin(), xmls.end());
  if (calibs.empty()) s << "No calibration file (`sim/platforms/*.calib`) found.\n\n";
  for (const auto& n : calibs) s << calib_md(dir, n);
  if (!xmls.empty()) {
    s << "The platform files (their comments give each constant's source):\n\n";
    for (const auto& n : xmls) {
      const std::string brief = platform_brief(dir + "/" + n);
      s << "- `sim/platforms/" << n << "`" << (brief.empty() ? "" : ": " + brief) << "\n";
    }
    s << "\n";
  }
  std::set<std::string> kinds;
  const SimHoldOut coll = holdout_of(c, "collective", &kinds), op = holdout_of(c, "operator", &kinds),
                   model = holdout_of(c, "model", &kinds);
  const auto causes =
      read_holdout_causes((repo_root(c) / "report" / "src" / "holdout_causes.csv").lexically_normal().string());
  s << holdout_md(c, coll, causes) << holdout_md(c, op, causes) << holdout_md(c, model, causes);
  s << "### The paper's Tables 2, 3 and 4 on the `" << kSimPredictPlatform << "` platform (simulated)\n\n"
    << "`" << kSimPredictPlatform << "`: " << platform_brief(dir + "/" + kSimPredictPlatform + ".xml")
    << " The stage times the simulation replays are the H200's (no H100 stage table exists yet), so the absolute "
       "operator times stand for H200s on that network, not for the paper's H100s; the ratios between methods are "
       "what compares with the paper.\n\n";
  // Table 2 in the paper's timing (latency), then back to back where simulated; the plot shows the latency rows
  // where there are any.
  const PredictDef t2 = predict_def(c, "collective", 16384, kLatency),
                   t2b = predict_def(c, "collective", 16384, kBackToBack), t3 = predict_def(c, "operator"),
                   t4 = predict_def(c, "operator", 32768);
  const bool t2_latency = !predicted_rows(c, t2).empty(), t2_back = !predicted_rows(c, t2b).empty();
  s << predict_md(c, t2, coll);
  if (t2_back) s << predict_md(c, t2b, coll);
  s << figure_md(plot_sim_vs_gpus(c, t2_latency || !t2_back ? t2 : t2b, kinds));
  s << predict_md(c, t3, op) << figure_md(plot_sim_vs_gpus(c, t3, kinds));
  s << predict_md(c, t4, op);
  s << "### The paper's Tables 5 and 6 on the `" << kSimPredictPlatform << "` platform (simulated)\n\n"
    << "The GLA-1B step replays the model's kernel times and its GLA stages recorded on 4 H200s "
       "(`results/<kind>_model_stages.csv`, `spbench model --stage-times`); the gradient all-reduce, zeco's All-Scan "
       "and lasp2's all-gather run on the platform's network as above.\n\n";
  s << predict_md(c, predict_def(c, "model"), model) << predict_md(c, predict_def(c, "model", 32768), model);
  return s.str();
}

std::map<std::pair<int, std::string>, const Row*> simulated_predictions(const Context& c, const std::string& level,
                                                                        long long tokens) {
  return predicted_rows(c, predict_def(c, level, tokens));
}

std::vector<Claim> simulated_claims(const Context& c, const std::string& level, long long tokens,
                                    const std::string& timing, const std::string& ref) {
  const SimHoldOut h = holdout_of(c, level);
  PredictDef d = predict_def(c, level, tokens, timing);
  if (!ref.empty()) d.ref = ref;
  std::vector<Claim> out;
  for (const PredictLine& l : predict_lines(c, d, h)) {
    if (l.kind == Claim::none) continue;
    Claim k;
    k.kind = l.kind, k.gpus = l.gpus, k.method = l.method, k.quotient = l.q, k.holdout = l.rh;
    k.ratio = l.r_sim, k.paper_ratio = l.r_paper;
    out.push_back(k);
  }
  return out;
}

void label_backend_change(PlotSeries& s, std::string& last_backend, const Row& r, double y) {
  const std::string& backend = col(r, "backend");
  if (!last_backend.empty() && backend != last_backend)
    s.labels.push_back({num(r, "world_size"), y, col(r, "method") + ": " + backend + " from here"});
  last_backend = backend;
}

PlotSeries predicted_series(const std::string& method) {
  PlotSeries s;
  s.kind = SeriesKind::simulated;
  s.style = kSimLineStyle + colour_spec(method_colour(method));
  s.title = method + " simulated, " + kSimPredictPlatform;
  return s;
}

}  // namespace report_detail
}  // namespace spb
