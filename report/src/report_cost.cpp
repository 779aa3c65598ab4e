// spbench report: the cost model's section (its fits and their hold-out by world size), the network's constants, and
// the All-Scan variants beyond one node.
#include "report/src/report_common.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include "runtime/error.h"
#include "zeco/all_scan.h"

namespace spb {
namespace report_detail {

std::string fits_table(const MachineFit& f) {
  std::vector<std::vector<std::string>> rows;
  for (auto& p : f.patterns)
    rows.push_back({p.pattern, p.backend, std::to_string(p.fit.points),
                    p.fit.ok ? fmt("%.3g", p.fit.link.alpha_s * 1e6) : "—",
                    p.fit.ok && std::isfinite(p.fit.link.beta_Bps)
                        ? fmt("%.4g", p.fit.link.beta_Bps / 1e9) + (p.beta_from.empty() ? "" : " (from " + p.beta_from + ")")
                        : "—",
                    p.fit.ok ? fmt("%.1f%%", 100 * p.fit.rms_rel_residual) : "too few points"});
  return md_table({"pattern", "backend", "points", "alpha (us)", "beta (GB/s)", "RMS residual of the fit"}, rows,
                  "llrrrr");
}

namespace {

// --- the hold-out by world size (cost_model.h: hold_out_by_world) -----------------------------------------------------
// The hold-out of the fit a machine's predictions come from: the reference GPU's or the CPU ranks' (nullptr: none).
const HoldOut* holdout_of(const Context& c, const std::string& gpu) {
  if (gpu == "cpu") return c.cpu_holdout ? &*c.cpu_holdout : nullptr;
  return c.gpu_holdout && gpu == c.ref_gpu ? &*c.gpu_holdout : nullptr;
}

std::string signed_pct(double e) { return fmt(std::fabs(e) < 0.095 ? "%+.1f%%" : "%+.0f%%", 100 * e); }
std::string abs_pct(double e) { return fmt(e < 0.095 ? "%.1f%%" : "%.0f%%", 100 * e); }

// What a held-out point is: the state (and All-Scan block) of a collective, the length and shape of an operator call.
std::string config_of(const HeldOutPoint& p) {
  if (p.level == "collective") {
    const bool blocks = p.method == "allscan" && p.block_bytes > 0 && p.block_bytes < p.bytes;
    return bytes_str(p.bytes) + (blocks ? ", block " + bytes_str(p.block_bytes) : "");
  }
  if (p.level == "model")
    return std::to_string(p.tokens_per_rank) + " tokens per rank, " + p.config +
           (p.method == "zeco" && p.block_bytes > 0 ? ", block " + bytes_str(p.block_bytes) : "");
  return std::to_string(p.tokens_per_rank) + " tokens, B=" + std::to_string(p.batch) + " H=" + std::to_string(p.heads) +
         " dk=" + std::to_string(p.dk) + " dv=" + std::to_string(p.dv) + " " + p.dtype +
         (p.method == "zeco" && p.block_bytes > 0 ? ", block " + bytes_str(p.block_bytes) : "");
}

std::string machine_tag(const std::string& gpu) {
  std::string t;
  for (char ch : gpu) t += std::isalnum((unsigned char)ch) ? char(std::tolower((unsigned char)ch)) : '_';
  return t;
}

// Per method (and, at the collective level, backend): how far the P <= 2 fit misses P = 4, and what that means for
// the method's predictions beyond the measured P.
std::string holdout_summary(const HoldOut& h) {
  std::vector<std::vector<std::string>> rows;
  for (const HoldOutError& e : h.errors) {
    std::string uses = "—";
    if (e.level == "collective") {
      auto it = h.link_backend.find(e.method);
      uses = it != h.link_backend.end() && it->second == e.backend ? "yes" : "no";
    }
    rows.push_back({e.level, e.method, e.backend.empty() ? "all" : e.backend, uses, std::to_string(e.points) +
                        (e.unpredicted ? " (+" + std::to_string(e.unpredicted) + " not predicted)" : ""),
                    e.points ? abs_pct(e.median_abs) : "—", e.points ? abs_pct(e.max_abs) : "—",
                    e.points == 0 ? "nothing predicted"
                    : e.exceeds() ? "**exceeds " + abs_pct(kHoldOutWarn) + "**: its predictions beyond P = " +
                                        std::to_string(h.fit_max_world) + " are not reliable"
                                  : "within " + abs_pct(kHoldOutWarn)});
  }
  return md_table({"level", "method", "backend", "its link makes the predictions", "held-out points",
                   "median |error|", "max |error| (the method's hold-out error)", "verdict"},
                  rows, "lllllrrl");
}

// A held-out point's measured time as the tables print it, marked as its row's code state is (code_state_mark).
std::string measured_cell(const HeldOutPoint& p) {
  return num_cell(p.measured_s * 1e3) + code_state_mark(p.code_state);
}

// "beyond 30%" where a point's error is, as printed.
std::string beyond(const HeldOutPoint& p) {
  return p.predicted() && std::round(100 * std::fabs(p.rel_error())) > std::round(100 * kHoldOutWarn)
             ? "beyond " + abs_pct(kHoldOutWarn)
             : "";
}

std::string holdout_points_table(const HoldOut& h) {
  std::vector<std::vector<std::string>> rows;
  for (const HeldOutPoint& p : h.points)
    rows.push_back({p.level, p.method, p.backend, std::to_string(p.world), config_of(p), measured_cell(p),
                    p.predicted() ? num_cell(p.predicted_s * 1e3) : "— (" + p.why + ")",
                    p.predicted() ? signed_pct(p.rel_error()) : "—", beyond(p)});
  return md_table({"level", "method", "backend", "P", "configuration", "measured (ms)", "predicted (ms)", "error", ""},
                  rows, "lllrlrrrl");
}

void write_holdout_csv(const Context& c, const HoldOut& h, const std::string& path) {
  std::ostringstream csv;
  csv << "machine,level,method,backend,world_size,fit_max_world,bytes,block_bytes,tokens_per_rank,batch,heads,dk,dv,"
         "dtype,measured_ms,predicted_ms,rel_error,why,git_sha,code_state\n";
  auto n = [](double v) { return std::isfinite(v) ? fmt("%.6g", v) : std::string(); };
  for (const HeldOutPoint& p : h.points)
    csv << csv_field(h.machine) << "," << p.level << "," << p.method << "," << p.backend << "," << p.world << ","
        << h.fit_max_world << "," << n(p.bytes) << "," << n(p.block_bytes) << "," << p.tokens_per_rank << ","
        << p.batch << "," << p.heads << "," << p.dk << "," << p.dv << "," << p.dtype << "," << n(p.measured_s * 1e3)
        << "," << n(p.predicted_s * 1e3) << "," << n(p.rel_error()) << "," << csv_field(p.why) << "," << p.git_sha
        << "," << p.code_state << "\n";
  std::ofstream(c.tables_dir + "/" + path) << csv.str();
}

// One machine's hold-out: what was held out, the summary, every point, and the CSV; and, plainly, where the model level
// has nothing held out.
std::string holdout_section(const Context& c, const std::string& gpu, const std::string& what) {
  const HoldOut* h = holdout_of(c, gpu);
  std::ostringstream s;
  s << "#### " << what << "\n\n";
  if (!h || h->points.empty()) {
    s << "Nothing to hold out: no rows of " << gpu << " above P = " << kHoldOutFitMaxWorld << ".\n\n";
    return s.str();
  }
  const std::string csv = "holdout_" + machine_tag(gpu) + ".csv";
  write_holdout_csv(c, *h, csv);
  s << holdout_summary(*h) << "\nEvery held-out point (`tables/" << csv << "` has the same with more digits):\n\n"
    << holdout_points_table(*h) << "\n";
  const bool model_level = std::any_of(h->points.begin(), h->points.end(),
                                       [](const HeldOutPoint& p) { return p.level == "model"; });
  if (!model_level) {
    std::set<int> worlds;
    for (const Row& r : c.res.rows)
      if (col(r, "level") == "model" && col(r, "gpu") == gpu) worlds.insert(inum(r, "world_size"));
    std::vector<std::string> w;
    for (int P : worlds) w.push_back(std::to_string(P));
    s << "Model level: **no hold-out**, no model rows of " << gpu << " above P = " << h->fit_max_world
      << (w.empty() ? " (none at all)" : " (its model rows are at P = " + join(w, ", ") + ")")
      << ": its model-level predictions are not checked against a measured training step.\n\n";
  }
  return s.str();
}

}  // namespace

std::string section_cost_model(const Context& c) {
  std::ostringstream s;
  const ModelParams& p = c.params;
  s << "## The cost model\n\n"
    << "An alpha-beta model (`report/src/cost_model.h`): a hop of b bytes takes alpha + b / beta. Inside a node of "
    << p.gpus_per_node << " GPUs the link is NVLink with alpha and beta fitted by least squares (on relative error) to "
    << "the measured collective rows of P <= " << kHoldOutFitMaxWorld << ", one fit per pattern and backend; between "
    << "nodes it is the network, " << network_str(c) << ". The operator level adds the local dp time per token, "
    << "fitted to the dp rows of P <= " << kHoldOutFitMaxWorld << ". **Every prediction in this report (the tables' "
    << "model columns, the modelled series of the plots, the figures' modelled points) comes from this fit on each "
    << "machine's rows of P <= " << kHoldOutFitMaxWorld << "**, the fit whose error on the rows of larger P (held out, "
    << "below) is printed beside its predictions. The formulas (P ranks, state S, K blocks of b bytes):\n\n"
    << "- All-Scan: (P-1) hops of one block + the rest of the state through the slowest link: "
       "sum_h hop_h(b) + (K-1) max_h hop_h(b)\n"
    << "- chain (LASP-1's schedule): a serial chain of P-1 hops, each carrying one state: (P-1) x hop(S)\n"
    << "- all-gather (LASP-2's): every rank gathers the P states, each with its decay row (records of S (1 + 1/dv)); a "
       "ring all-gather: (P-1) steps through the slowest link\n"
    << "- ring: (P-1) rotation steps of S; all-to-all: S/P to each of the P-1 others\n"
    << "- operator: dp = t0 + t_token L; every other method's local compute = dp x (1 + its local overhead, its "
       "one-rank time over dp's, measured); lasp1 = P x dp + 2 chains (its published schedule, DESIGN §3, as the "
       "official code: a rank receives the state, computes, then sends, so the P computes add up; a chain per pass); "
       "lasp2 = local + per pass an all-gather of the P states and their fold, less what the overlap hides; zeco = "
       "local + per pass the All-Scan, less what it hides; each hides " << fmt("%g", 100 * p.overlap_fraction)
    << "% of the pass's compute; ring = local + per pass (P-1) x max(step transfer, " << fmt("%g", 100 * p.ring_step_fraction)
    << "% of the pass's compute); ulysses = local + the all-to-alls of q,k,v,g,o and their gradients (H must divide by P)\n\n";
  if (c.gpu_fit && c.gpu_fit->rows.empty()) {
    s << "**No rows of " << c.ref_gpu << " at P <= " << c.gpu_fit->fit_max_world << ": nothing to fit, so the GPU "
      << "tables carry no model predictions.** ";
  } else if (c.gpu_fit) {
    s << "GPU predictions are fitted on **" << c.ref_gpu << "**'s rows of P <= " << c.gpu_fit->fit_max_world
      << " (one node):\n\n" << fits_table(*c.gpu_fit) << "\n";
    const CostModel cm = c.gpu_fit->model_for(1, 16, 128, 128, "bf16");
    if (cm.fwd_bwd.ok)
      s << "dp kernel (H=16, dk=dv=128, bf16), forward+backward: " << fmt("%.4g", cm.fwd_bwd.t0_s * 1e3) << " ms + "
        << fmt("%.4g", cm.fwd_bwd.per_token_s * 1e9) << " ns per token (" << cm.fwd_bwd.points << " points).\n\n";
    if (cm.fwd_bwd.ok && !cm.local_overhead.empty()) {
      s << "Local overhead over dp, each method on one GPU (its extra passes, no communication):";
      for (auto& [m, ov] : cm.local_overhead) s << " " << m << " " << fmt("%+.0f%%", 100 * ov) << ";";
      s << "\n\n";
    }
    if (!cm.fwd_bwd.ok)
      s << "No dp operator rows at H=16, dk=dv=128, bf16 of P <= " << c.gpu_fit->fit_max_world
        << " on this machine: no operator predictions.\n\n";
  } else {
    s << "**No GPU rows yet: nothing to fit, so the GPU tables carry no model predictions.** ";
  }
  if (c.cpu_fit) {
    s << "For the CPU-rank section the same model is fitted to the CPU rows of P <= " << c.cpu_fit->fit_max_world
      << " (where more ranks run than the machine has cores they time-share the cores, which no alpha-beta link "
         "describes: the hold-out below shows what that costs above P = 2):\n\n"
      << fits_table(*c.cpu_fit) << "\n";
  }
  s << "A beta marked \"from\" another pattern: this pattern was measured at one block size only, which fixes "
       "alpha + block / beta but not the two apart, so beta is taken from that pattern on the same machine and only "
       "alpha is fitted.\n\n";
  s << "### Hold-out: fitted on P <= " << kHoldOutFitMaxWorld << ", checked on every larger P measured\n\n"
    << "The model behind every prediction is fitted on each machine's rows of P <= " << kHoldOutFitMaxWorld
    << " alone (the links on the 2-rank collective rows, the dp kernel and the methods' local overheads on the 1- and "
       "2-rank operator rows, the model level's T_compute on dp's 1- and 2-rank model rows), so every row of that "
       "machine on more ranks is one it never saw; each is predicted and compared: each collective configuration with "
       "its own pattern's and backend's link, each operator configuration with the formulas above, each model-level "
       "training step with the model level's formula (Tables 5 and 6) (`hold_out_by_world`, "
       "`report/src/cost_model.h`). The error of a point is (predicted - measured) / measured of its time; a method's "
       "hold-out error is the largest |error| of its points. Where it exceeds " << abs_pct(kHoldOutWarn)
    << ", the method's predictions for more GPUs than were fitted are not reliable, and the words beside them say so. "
       "The tables' predictions are this fit's, so the error printed beside one is that of the model that made it. It "
       "is the error of an extrapolation by a factor of two in P; extrapolating further (to " << kPredictGpus.back()
    << " GPUs) can miss by more. An operator-level error "
       "holds at the P it was checked on, where communication is a small share of most methods' time; the share grows "
       "with P, and with it the weight of the error of the collective the method uses (the collective rows above). "
       "Rows over several nodes are left out: the network's constants are not validated here.\n\n";
  if (!c.ref_gpu.empty()) s << holdout_section(c, c.ref_gpu, c.ref_gpu + " (the GPU predictions' machine)");
  if (c.cpu_fit)
    s << holdout_section(c, "cpu", "CPU ranks (the CPU section's fit; where more ranks run than the machine has "
                                   "cores they time-share the cores, which no link fitted on fewer ranks foresees)");
  s << "The test `tests/report/test_cost_model.cpp` checks every formula against hand-computed values (LASP-1's and "
       "LASP-2's schedules inside and across nodes among them), recovers a known alpha and beta exactly from synthetic "
       "times, predicts P = 4 of a machine that follows the model exactly from its P <= 2 rows (the model level "
       "among them), checks that rows of P = 4 planted with absurd times change neither the fit nor a prediction, and "
       "on a committed copy of the 4-GPU H200 rows checks that the hold-out uses nothing above P = 2 and flags every "
       "error beyond " << abs_pct(kHoldOutWarn) << ".\n\n";
  return s.str();
}

std::string prediction_note(const Context& c, const std::string& level, const std::string& method, int P,
                            bool cpu) {
  const HoldOut* h = holdout_of(c, cpu ? "cpu" : c.ref_gpu);
  if (!h || P <= h->fit_max_world) return "";
  std::string s = h->brief(level, method);
  if (!cpu && P > c.params.gpus_per_node)
    s += "; network " + link_str(c.params.network) + ", " +
         c.net_brief;
  return s;
}

std::string verdict_gate(const Context& c, const std::string& level, const std::string& method, const std::string& ref,
                         bool cpu) {
  const HoldOut* h = holdout_of(c, cpu ? "cpu" : c.ref_gpu);
  static const std::map<std::string, std::string> pattern = {
      {"zeco", "allscan"}, {"lasp2", "allgather"}, {"lasp1", "chain"}, {"ring", "ring"}, {"ulysses", "alltoall"}};
  struct Use {
    std::string level, method, name;
  };
  std::vector<Use> uses;
  auto add = [&](const std::string& l, const std::string& m, const std::string& name) {
    for (const Use& u : uses)
      if (u.level == l && u.method == m) return;
    uses.push_back({l, m, name});
  };
  for (const std::string& m : {method, ref}) {
    if (level == "collective") {
      add("collective", m, m + " link");
      continue;
    }
    if (auto it = pattern.find(m); it != pattern.end()) add("collective", it->second, it->second + " link");
    if (level == "model" && m != "dp") add("collective", "allgather", "all-reduce's link (the allgather's)");
    add(level, m, m + " " + level + "-level prediction");
  }
  std::vector<std::string> failed;
  for (const Use& u : uses) {
    const auto a = h ? h->at_largest(u.level, u.method) : std::nullopt;
    if (!a)
      failed.push_back(u.name + " has no hold-out (nothing of it measured above P = " +
                       std::to_string(h ? h->fit_max_world : kHoldOutFitMaxWorld) + ")");
    else if (!a->held())
      failed.push_back(u.name + " missed by " + signed_pct(a->error) + " at P = " + std::to_string(a->world));
  }
  if (failed.empty()) return "";
  return "no verdict: the model's " + join(failed, "; the model's ");
}

std::string model_holdout_table(const HoldOut& h, long long L, const std::string& config) {
  std::vector<std::vector<std::string>> rows;
  for (const HeldOutPoint& p : h.points) {
    if (p.level != "model" || p.tokens_per_rank != L || (!config.empty() && p.config != config)) continue;
    std::vector<std::string> row = {p.method, p.backend, std::to_string(p.world)};
    if (config.empty()) row.push_back(p.config);
    row.insert(row.end(), {measured_cell(p),
                           p.predicted() ? num_cell(p.predicted_s * 1e3) : "— (" + p.why + ")",
                           p.predicted() ? signed_pct(p.rel_error()) : "—",
                           beyond(p).empty() ? "" : beyond(p) + ": not reliable"});
    rows.push_back(row);
  }
  if (rows.empty()) return "";
  std::vector<std::string> head = {"method", "backend", "P"};
  if (config.empty()) head.push_back("configuration");
  head.insert(head.end(), {"measured step (ms)", "predicted step (ms)", "error", ""});
  return md_table(head, rows, config.empty() ? "llrlrrrl" : "llrrrrl");
}

std::string network_str(const Context& c) {
  return link_str(c.params.network) + " (" + fmt("%g", c.params.network.beta_Bps * 8 / 1e9) + " Gb/s), " +
         c.net_source;
}

// --- the network, and the All-Scans beyond one node -----------------------------------------------------------------
// The network's constants, first found: --constants, --net-gbps/--net-latency-us, a fit to the reference GPU's
// collective rows over several nodes of one rank each, the default (an assumption).
void resolve_network(Context& c) {
  const std::string flags = fmt("%g", c.o.net_gbps) + " Gb/s, " + fmt("%g", c.o.net_latency_us) + " us";
  if (!c.o.constants.empty()) {
    const LinkConstants k = read_link_constants(c.o.constants);
    SPB_USAGE(!(k.network && c.o.net_given), "--constants " + c.o.constants +
                                                 ": gives the network, and so do --net-gbps/--net-latency-us; give one");
    c.user_intra = k.intra;
    if (k.network) {
      c.params.network = *k.network;
      c.net_source = "the user's constants (--constants " + c.o.constants + "), not measured here";
      c.net_brief = "given (--constants)";
      return;
    }
  }
  if (c.o.net_given) {
    c.net_source = "given (--net-gbps/--net-latency-us: " + flags + "), not measured here";
    c.net_brief = "given (--net-gbps/--net-latency-us)";
    return;
  }
  if (!c.ref_gpu.empty()) {
    const auto pts = network_points(c.res.node_rows, c.ref_gpu);
    const LinkFit f = fit_network_link(pts);
    if (f.ok && std::isfinite(f.link.beta_Bps)) {
      std::set<std::string> files;  // the results files of those rows (network_points' selection)
      for (const Row& r : c.res.node_rows)
        if (col(r, "level") == "collective" && col(r, "gpu") == c.ref_gpu && num(r, "nodes") > 1 &&
            num(r, "ranks_per_node") == 1 && !is_node_aware_allscan(col(r, "backend")))
          files.insert("results/" + c.res.file_of(r));
      c.params.network = f.link;
      c.net_source = "measured: fitted to " + std::to_string(f.points) + " collective configurations of " +
                     c.ref_gpu + " over several nodes of one rank each in " + join({files.begin(), files.end()}, ", ") +
                     " (RMS residual " + fmt("%.1f%%", 100 * f.rms_rel_residual) +
                     "; the transport those runs used, e.g. sockets, not necessarily InfiniBand)";
      c.net_brief = "measured (" + join({files.begin(), files.end()}, ", ") + ")";
      return;
    }
  }
  c.net_source = "assumed (" + flags + ", the defaults of --net-gbps/--net-latency-us: InfiniBand NDR), not measured: "
                 "no collective rows over several nodes of one rank each";
  c.net_brief = "assumed";
}

// --- All-Scans measured across simulated nodes ---------------------------------------------------------------------
// For each GPU with collective rows over several nodes: the network link fitted to its rows over nodes of one rank
// each (the chain and the plain All-Scan, network_points), and every row at Table 2's state against the cost model
// with that link. The hierarchical and log-depth rows are not in the fit, so their errors check the model's formulas.
std::string section_simulated_nodes(const Context& c) {
  std::ostringstream s;
  s << "## All-Scans across simulated nodes (measured)\n\n";
  std::set<std::string> gpus;
  for (const Row& r : c.res.node_rows)
    if (col(r, "level") == "collective") gpus.insert(col(r, "gpu"));
  if (gpus.empty()) {
    s << "No collective rows over several nodes yet: `scripts/gpu_session.sh nodes` on a machine of several GPUs splits "
         "them into nodes (`--ranks-per-node`, `--nodes-over-network`) and measures the chain and the three All-Scans "
         "across them.\n\n";
    return s.str();
  }
  const double S = kTable2Bytes;
  std::ostringstream csv;
  csv << "gpu,gpus,nodes,ranks_per_node,comm,pattern,allscan,block_elems,measured_ms,model_ms,model_over_measured,"
         "in_fit,net_alpha_us,net_GBps,git_sha,code_state\n";
  for (const std::string& gpu : gpus) {
    const std::vector<CollectivePoint> pts = network_points(c.res.node_rows, gpu);
    const LinkFit f = fit_network_link(pts);
    double lo = INFINITY, hi = 0;
    for (const auto& q : pts) lo = std::min(lo, q.bytes), hi = std::max(hi, q.bytes);
    const bool linked = f.ok && std::isfinite(f.link.beta_Bps);
    std::set<std::string> comms;
    auto keep = [&](const Row& r) {
      return col(r, "level") == "collective" && col(r, "gpu") == gpu && num(r, "bytes") == S && ms(r) > 0;
    };
    auto key = [](const Row& r) {
      return col(r, "world_size") + "|" + col(r, "ranks_per_node") + "|" + col(r, "method") + "|" + col(r, "backend") +
             "|" + col(r, "block_elems");
    };
    const auto newest = newest_by(c.res.node_rows, keep, key);
    for (auto& [k, r] : newest) comms.insert(col(*r, "comm"));
    comms.erase("");
    bool sockets = false;
    for (const auto& m : comms) sockets |= m.find("socket") != std::string::npos;
    s << "On " << gpu << ", nodes simulated on one host (`--ranks-per-node N --nodes-over-network`: each node its own "
      << "NCCL host id, so NCCL carries the traffic between nodes over its network transport"
      << (comms.empty() ? std::string(", which the rows do not name") : ", `" + join({comms.begin(), comms.end()}, "`, `") + "`")
      << (sockets ? ": sockets through the host, not InfiniBand" : "") << "). ";
    if (linked)
      s << "The network link, fitted to the chain and the plain All-Scan (`--allscan host`) over nodes of one rank "
        << "each (" << f.points << " configurations of " << bytes_str(lo) << "-" << bytes_str(hi)
        << ", RMS residual " << fmt("%.1f%%", 100 * f.rms_rel_residual) << "): " << link_str(f.link) << ".";
    else
      s << "No network link could be fitted (fewer than two configurations of the chain or the plain All-Scan over "
           "nodes of one rank each), so the model column is empty.";
    s << " Every row at Table 2's state (" << bytes_str(S) << " per rank) against the cost model with that link (the "
      << "formulas of the next section); the hierarchical and log-depth rows are not in the fit, so their "
         "errors check those formulas.\n\n";
    std::vector<std::vector<std::string>> rows;
    std::map<std::pair<int, int>, std::pair<std::string, double>> fastest;  // (P, R) -> the fastest All-Scan row
    double worst_held = 0;
    for (auto& [k, r] : newest) {
      const int P = inum(*r, "world_size"), R = std::max(1, inum(*r, "ranks_per_node"));
      const std::string pattern = col(*r, "method"), backend = col(*r, "backend");
      const std::string variant = pattern != "allscan" ? "" : is_node_aware_allscan(backend) ? backend : "host";
      const double block = num(*r, "block_elems") > 0 ? num(*r, "block_elems") : 0;
      const int dv = num(*r, "dv") > 0 ? inum(*r, "dv") : 128;
      const bool in_fit = R == 1 && !is_node_aware_allscan(backend);
      // Inside a node: at one rank per node no hop; else the reference GPU's fitted link (or the user's).
      std::optional<Link> intra;
      if (R == 1) intra = f.link;
      else if (c.user_intra) intra = c.user_intra;
      else if (gpu == c.ref_gpu && c.gpu_fit)
        if (const Link* l = c.gpu_fit->collective_model().link_for(pattern)) intra = *l;
      ModelParams p = c.params;
      p.gpus_per_node = R, p.network = f.link;
      std::optional<double> t;
      if (linked && intra)
        t = variant.empty() ? collective_time(pattern, P, S, 0, dv, *intra, p)
                            : allscan_variant_time(variant, P, S, 4 * block, dv, *intra, p);
      const double m = ms(*r);
      if (t && !in_fit) worst_held = std::max(worst_held, std::abs(*t * 1e3 / m - 1));
      if (!variant.empty()) {
        auto& best = fastest[{P, R}];
        if (best.first.empty() || m < best.second)
          best = {"`" + variant + "`" + (block > 0 && block * 4 < S ? " (blocks of " + int_str(block) + ")" : ""), m};
      }
      rows.push_back({std::to_string(P), std::to_string(P / R) + " x " + std::to_string(R), pattern,
                      variant.empty() ? "—" : "`" + variant + "`",
                      block > 0 && 4 * block < S ? int_str(block) : block > 0 ? int_str(block) + " (whole state)" : "whole state",
                      num_cell(m), t ? num_cell(*t * 1e3) : "—", t ? fmt("%.2f", *t * 1e3 / m) : "—",
                      in_fit ? "yes" : "no (held out)"});
      csv << join({csv_field(gpu), std::to_string(P), std::to_string(P / R), std::to_string(R), col(*r, "comm"),
                   pattern, variant, fmt("%.0f", block), fmt("%.6g", m), t ? fmt("%.6g", *t * 1e3) : "",
                   t ? fmt("%.4g", *t * 1e3 / m) : "", in_fit ? "1" : "0", fmt("%.6g", f.link.alpha_s * 1e6),
                   fmt("%.6g", f.link.beta_Bps / 1e9), col(*r, "git_sha"), col(*r, kCodeStateCol)},
                  ",")
          << "\n";
    }
    s << md_table({"GPUs", "nodes x ranks", "pattern", "All-Scan", "block (elements)", "measured (ms)", "model (ms)",
                   "model ÷ measured", "in the link's fit"},
                  rows, "rllllrrrl")
      << "\n";
    for (auto& [pr, best] : fastest)
      s << "- " << pr.first << " GPUs as " << pr.first / pr.second << " nodes of " << pr.second
        << ": the fastest All-Scan of " << bytes_str(S) << " is " << best.first << ", " << num_cell(best.second)
        << " ms.\n";
    if (linked)
      s << "- The rows the link was not fitted on differ from the model by up to " << fmt("%.0f%%", 100 * worst_held)
        << (worst_held <= 0.30 ? " (inside 30%)" : " (beyond 30%: the formulas miss them)") << ".\n";
    s << "\n";
  }
  std::ofstream(c.tables_dir + "/allscan_simulated_nodes.csv") << csv.str();
  s << "(`tables/allscan_simulated_nodes.csv` has the same numbers and the link.)\n\n";
  return s.str();
}

// The commits of the rows that the reference GPU's links of `patterns` were fitted on (the links collective_model()
// uses), space-separated, and their one code state: changed where any row's code changed, else unknown where any is
// unknown, else current. Both empty where no link of them was fitted.
std::pair<std::string, std::string> link_commits(const Context& c, const std::vector<std::string>& patterns) {
  std::map<std::string, std::string> commits;
  if (c.gpu_fit)
    for (const std::string& pattern : patterns)
      for (const auto& pf : c.gpu_fit->patterns)
        if (pf.pattern == pattern && pf.backend == c.gpu_fit->backend_for(pattern))
          commits.insert(pf.commits.begin(), pf.commits.end());
  if (commits.empty()) return {"", ""};
  std::vector<std::string> shas;
  bool changed = false, unknown = false;
  for (const auto& [sha, state] : commits) {
    if (!sha.empty()) shas.push_back(sha);
    changed |= state == "changed";
    unknown |= sha.empty() || (state != "changed" && state != "current");
  }
  return {join(shas, " "), changed ? "changed" : unknown ? "unknown" : "current"};
}

std::string section_beyond_one_node(const Context& c) {
  const ModelParams& p = c.params;
  const int R = p.gpus_per_node;
  const double S = kTable2Bytes, b = 4.0 * kPaperBlockElems;
  const int dv = 128;
  std::ostringstream s;
  s << "## All-Scan variants beyond one node (model)\n\n"
    << "**A model, not a measurement**: the cost model's prediction of one collective call at Table 2's setting (state "
    << bytes_str(S) << " per rank, blocks of " << bytes_str(b) << ", K=" << int_str(S / b) << ", dv=" << dv << ") on "
    << R << " GPUs per node, for zeco's three All-Scans across nodes (`--allscan host`, `host-hier`, `host-logdepth`; "
    << "`zeco/all_scan.h`), LASP-1's chain, LASP-2's all-gather and ring's rotation. With R = " << R
    << " ranks per node, N = P / R nodes, d = S / dv the decay row and pipe(a, c) = a hop_in(b) + c hop_net(b) + (K-1) "
       "x the slowest hop kind used (`report/src/cost_model.h`):\n\n"
    << "- chain (`host`): pipe(P - N, N - 1)\n"
    << "- hierarchical (`host-hier`): pipe(R - 1, N - 1) + hop_in(d) + hop_in(S) (the nodes' chains and the chain of node "
       "aggregates form one flow line; the decay row goes ahead inside the node; the leader hands the prefix on)\n"
    << "- log-depth (`host-logdepth`): pipe(R - 1, 0) + hop_in(d) + ceil(log2 N) hop_net(S + d) + hop_in(S)\n"
    << "- LASP-1: (P - 1) whole-state hops in series; LASP-2: ring all-gather of P records of S + d; ring: P - 1 steps "
       "of S (the formulas of the cost model section)\n\n";
  // The links: inside a node the user's or each pattern's fitted one, between nodes params.network.
  std::optional<CostModel> cm;
  if (c.gpu_fit) cm = c.gpu_fit->collective_model();
  auto intra_for = [&](const std::string& pattern) -> std::optional<Link> {
    if (c.user_intra) return c.user_intra;
    if (cm && cm->link_for(pattern)) return *cm->link_for(pattern);
    return std::nullopt;
  };
  std::string intra_words;
  if (c.user_intra)
    intra_words = link_str(*c.user_intra) + " for every pattern, the user's constants (--constants " + c.o.constants +
                  "), not measured here";
  else if (cm)
    intra_words = "each pattern's link fitted on " + c.ref_gpu + "'s rows of P <= " +
                  std::to_string(c.gpu_fit->fit_max_world) + " (the cost model section; the All-Scans use the "
                  "allscan link, " + (cm->link_for("allscan") ? link_str(*cm->link_for("allscan")) : "not fitted") + ")";
  s << "Constants: inside a node " << (intra_words.empty() ? "none (no GPU rows and no --constants)" : intra_words)
    << "; between nodes " << network_str(c) << ". `spbench report --constants FILE` (intra_alpha_us, intra_gbps, "
    << "net_alpha_us, net_gbps) or `--net-gbps`/`--net-latency-us` put a cluster's own figures in.\n\n";
  const std::vector<std::string> scans = allscan_variants();
  const std::vector<std::string> others = {"chain", "allgather", "ring"};
  std::map<int, std::map<std::string, double>> scan_t, all_t;
  std::vector<std::vector<std::string>> rows;
  std::ostringstream csv;
  csv << "gpus,nodes,host,host-hier,host-logdepth,fastest_allscan,lasp1_chain,lasp2_allgather,ring,intra_alpha_us,"
         "intra_GBps,net_alpha_us,net_GBps,net_source,holdout_allscan,holdout_chain,holdout_allgather,holdout_ring,"
         "git_sha,code_state\n";
  const std::optional<Link> scan_link = intra_for("allscan");
  // Every row's numbers come from the same links: the commits of their rows (none for the user's constants).
  const auto [links_sha, links_state] =
      c.user_intra ? std::pair<std::string, std::string>{} : link_commits(c, {"allscan", "chain", "allgather", "ring"});
  // The hold-out of each column's link inside a node (the cost model section): fitted on P <= 2, checked at the
  // measured P above; the user's own constants have none.
  const HoldOut* hold = !c.user_intra && cm ? holdout_of(c, c.ref_gpu) : nullptr;
  auto hold_words = [&](const std::string& pattern, double block) -> std::string {
    if (c.user_intra) return "no hold-out (the user's constants)";
    return hold ? hold->beside("collective", pattern, S, block) : "—";
  };
  auto hold_max = [&](const std::string& pattern) -> std::string {
    const HoldOutError* e = hold ? hold->error_of("collective", pattern) : nullptr;
    return e && e->points ? fmt("%.4g", e->max_abs) : "";
  };
  rows.push_back({"hold-out of the link", "—", hold_words("allscan", b), "the allscan link: as left",
                  "the allscan link: as left", "—", hold_words("chain", 0), hold_words("allgather", 0),
                  hold_words("ring", 0), "inside a node; the network's constants have no hold-out"});
  for (int P : kPredictGpus) {
    if (P > R && P % R) continue;
    std::vector<std::string> row = {std::to_string(P), std::to_string(P > R ? P / R : 1)};
    std::vector<std::string> crow = row;
    for (const auto& v : scans) {
      std::optional<double> t;
      if (scan_link) t = allscan_variant_time(v, P, S, b, dv, *scan_link, p);
      if (t) scan_t[P][v] = all_t[P][v] = *t;
      row.push_back(t ? num_cell(*t * 1e3) : "—");
      crow.push_back(t ? fmt("%.6g", *t * 1e3) : "");
    }
    const std::string best = fastest_of(scan_t[P], scans);
    row.push_back(best.empty() ? "—" : "`" + best + "`");
    crow.push_back(best);
    for (const auto& pat : others) {
      const std::optional<Link> l = intra_for(pat);
      std::optional<double> t;
      if (l) t = collective_time(pat, P, S, 0, dv, *l, p);
      if (t) all_t[P][pat] = *t;
      row.push_back(t ? num_cell(*t * 1e3) : "—");
      crow.push_back(t ? fmt("%.6g", *t * 1e3) : "");
    }
    row.push_back(P > R ? "intra + network (" + link_str(p.network) + ", " +
                              c.net_brief + ")"
                        : "intra only");
    const Link in = scan_link.value_or(Link{});
    crow.insert(crow.end(), {fmt("%.6g", in.alpha_s * 1e6), fmt("%.6g", in.beta_Bps / 1e9),
                             fmt("%.6g", p.network.alpha_s * 1e6), fmt("%.6g", p.network.beta_Bps / 1e9),
                             csv_field(c.net_source), hold_max("allscan"), hold_max("chain"), hold_max("allgather"),
                             hold_max("ring"), links_sha, links_state});
    rows.push_back(row);
    csv << join(crow, ",") << "\n";
  }
  std::ofstream(c.tables_dir + "/allscan_beyond_one_node.csv") << csv.str();
  if (!scan_link) {
    s << "No prediction: no All-Scan link inside a node (no GPU collective rows and no intra constants).\n\n";
    return s.str();
  }
  s << md_table({"GPUs", "nodes", "chain `host` (ms)", "hierarchical `host-hier` (ms)", "log-depth `host-logdepth` (ms)",
                 "fastest All-Scan", "LASP-1 chain (ms)", "LASP-2 all-gather (ms)", "ring (ms)", "constants used"},
                rows, "rrrrrlrrrl")
    << "\n(`tables/allscan_beyond_one_node.csv` has the same numbers, the constants, each link's hold-out error and "
       "the commits of the rows the links were fitted on.)\n\n";
  // Who wins, and from where.
  auto names = [](const std::vector<int>& g) {
    std::vector<std::string> v;
    for (int x : g) v.push_back(std::to_string(x));
    return v.empty() ? std::string("none of these counts") : join(v, ", ");
  };
  s << "Fastest All-Scan by GPU count (a tie goes to the simpler: on one node the three are the same chain):";
  for (const auto& v : scans) {
    std::vector<int> at;
    for (auto& [P, m] : scan_t)
      if (fastest_of(m, scans) == v) at.push_back(P);
    const auto from = wins_from(scan_t, scans, v);
    s << " `" << v << "` at " << names(at) << (from ? " (from " + std::to_string(*from) + " GPUs on)" : "") << ";";
  }
  std::vector<std::string> every = scans;
  every.insert(every.end(), others.begin(), others.end());
  s << " of all six collectives the fastest is";
  for (auto& [P, m] : all_t) s << " " << P << ": `" << fastest_of(m, every) << "`" << (P == all_t.rbegin()->first ? "." : ",");
  s << "\n\n";
  // zeco's `auto` against the model.
  const auto ld = wins_from(scan_t, scans, "host-logdepth"), hier = wins_from(scan_t, scans, "host-hier");
  Topology several;
  several.nodes = 2, several.ranks_per_node = R;
  const std::string pick = resolve_allscan("auto", true, several);
  s << "zeco's `--allscan auto` picks `" << pick << "` wherever the world spans several nodes (`resolve_allscan`, "
    << "`zeco/all_scan.cpp`). ";
  if ((pick == "host-logdepth" && ld && *ld <= 2 * R) || (pick == "host-hier" && hier && *hier <= 2 * R))
    s << "The model agrees with these constants: `" << pick << "` is the fastest from " << 2 * R << " GPUs ("
      << "2 nodes) to " << kPredictGpus.back() << ".";
  else
    s << "With these constants the model says otherwise (above). `auto` keeps its rule because the network's constants "
         "here are not measured, and which variant wins turns on the network's alpha against S / beta: log-depth "
         "sends ceil(log2 N) whole states, host-hier N - 1 + K - 1 blocks, so on a fast network with a large alpha "
         "(InfiniBand) log-depth wins, and on a slow one (sockets: 50 us, 10 Gb/s) host-hier wins from 4 nodes on "
         "(`tests/report/test_cost_model.cpp`, Crossover). Rerun the report with the cluster's constants and pass "
         "`--allscan` explicitly where they say so.";
  s << "\n\n";
  return s.str();
}

}  // namespace report_detail
}  // namespace spb
