// spbench report: the paper's Tables 2-6 with our measured numbers, the cost model's predictions and the paper's
// numbers side by side, the plots, and a section for CPU-rank rows. See report.h for what is written where.
#include "report/src/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "runtime/error.h"
#include "sp/method.h"
#include "report/src/report_data.h"
#include "report/src/report_plot.h"
#include "zeco/all_scan.h"

namespace spb {

namespace fs = std::filesystem;

void add_report_command(CLI::App& app, ReportOptions& o) {
  app.add_option("--results", o.results, "directory of result CSVs (every *.csv is read)");
  app.add_option("--paper", o.paper, "the paper's numbers (paper_tables.csv)");
  app.add_option("--out", o.out, "output directory (README.md, tables/, plots/)");
  app.add_flag("!--no-plots", o.plots, "write the gnuplot scripts and data but do not run gnuplot");
  app.add_option("--gpus-per-node", o.gpus_per_node, "cost model: GPUs per node (NVLink inside)")
      ->check(CLI::PositiveNumber);
  app.add_option("--net-gbps", o.net_gbps, "cost model: network bandwidth between nodes (Gb/s)")
      ->check(CLI::PositiveNumber)
      ->each([&o](const std::string&) { o.net_given = true; });
  app.add_option("--net-latency-us", o.net_latency_us, "cost model: network latency per hop (us)")
      ->check(CLI::NonNegativeNumber)
      ->each([&o](const std::string&) { o.net_given = true; });
  app.add_option("--constants", o.constants,
                 "cost model: a CSV of key,value lines with intra_alpha_us, intra_gbps (inside a node) and/or "
                 "net_alpha_us, net_gbps (between nodes); Gb/s, us");
  app.add_option("--overlap", o.overlap, "cost model: share of a pass's compute that hides zeco's/lasp2's collective")
      ->check(CLI::Range(0.0, 1.0));
}

ModelParams ReportOptions::model_params() const {
  ModelParams p;
  p.gpus_per_node = gpus_per_node;
  p.network = {net_latency_us * 1e-6, net_gbps * 1e9 / 8};
  p.overlap_fraction = overlap;
  return p;
}

namespace {

// --- the paper's settings -------------------------------------------------------------------------------------------
constexpr double kTable2Bytes = 2097152;    // 32 heads x 128 x 128 fp32 per rank
constexpr long long kPaperBlockElems = 16384;  // All-Scan block of the paper
constexpr long long kTable2Seq = 8192;
const std::vector<int> kPredictGpus = {8, 16, 32, 64, 128, 256};
const char* const kNotMeasured = "not measured";
const char* const kNotPublished = "not published here";

// --- formatting -----------------------------------------------------------------------------------------------------
std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string num_cell(double v) {
  if (!std::isfinite(v)) return "";
  return std::fabs(v) >= 1000 ? fmt("%.0f", v) : fmt("%.4g", v);
}
std::string ratio_cell(double v) { return std::isfinite(v) ? fmt("%.2fx", v) : "—"; }
std::string int_str(double v) { return std::to_string((long long)std::llround(v)); }
std::string bytes_str(double b) {
  if (b >= 1048576 && std::fmod(b, 1048576) == 0) return int_str(b / 1048576) + " MiB";
  if (b >= 1024 && std::fmod(b, 1024) == 0) return int_str(b / 1024) + " KiB";
  return int_str(b) + " B";
}
// `align`: one letter per column, l or r (numbers); missing letters are l.
std::string md_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                     const std::string& align = "") {
  std::ostringstream s;
  s << "|";
  for (auto& h : head) s << " " << h << " |";
  s << "\n|";
  for (size_t i = 0; i < head.size(); ++i) s << (i < align.size() && align[i] == 'r' ? " ---: |" : " --- |");
  s << "\n";
  for (auto& r : rows) {
    s << "|";
    for (auto& c : r) s << " " << c << " |";
    s << "\n";
  }
  return s.str();
}
std::string csv_field(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '\n') c = ';';
  return s;
}
std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// --- rows -----------------------------------------------------------------------------------------------------------
bool is(const Row& r, const char* c, double v) { return num(r, c) == v; }
double ms(const Row& r) { return num(r, "time_ms_mean"); }
std::string machine_of(const Row& r) {
  const double P = num(r, "world_size");
  const std::string& be = col(r, "backend");
  const std::string& sha = col(r, "git_sha");  // runs of one day differ by their code
  return col(r, "gpu") + ", " + int_str(P) + (P == 1 ? " rank, " : " ranks, ") + (be == col(r, "gpu") ? "" : be + ", ") +
         col(r, "date").substr(0, 10) + (sha.empty() || sha == "unknown" ? "" : ", " + sha.substr(0, 7));
}
// A measured series' label: the gpu, and the backend where it says more.
std::string series_label(const std::string& what, const Row& r) {
  const std::string& gpu = col(r, "gpu");
  const std::string& be = col(r, "backend");
  return what + " measured (" + gpu + (be == gpu ? "" : ", " + be) + ")";
}
// Methods in the order of the paper's tables, then any other, alphabetically: a new method shows up by itself.
std::vector<std::string> ordered(const std::set<std::string>& names, const std::vector<std::string>& first) {
  std::vector<std::string> out;
  for (auto& f : first)
    if (names.count(f)) out.push_back(f);
  for (auto& n : names)
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

// --- one paper table: measured, model, paper per (GPUs, method) ------------------------------------------------------
struct TableDef {
  std::string id, what;
  std::string ref;  // ratios are method / ref
  std::string paper_level;
  long long paper_seq = 0;
  std::vector<std::string> methods;
  std::function<bool(const Row&)> setting;  // a non-CPU row at the paper's setting (method and world size free)
  std::function<std::pair<double, std::string>(const std::string&, int)> model;  // ms or NaN with a reason
  bool cpu = false;     // CPU-rank rows, at the measured world sizes only
  bool fitted = false;  // the model was fitted (then every GPU count gets a line per method)
};

struct Line {
  int gpus = 0;
  std::string method;
  const Row* row = nullptr;
  double measured = NAN, model = NAN, paper = NAN;
  std::string model_note;
  double r_measured = NAN, r_model = NAN, r_paper = NAN;
};

struct Context {
  const ReportOptions& o;
  ResultFiles res;
  std::vector<PaperValue> paper;
  ModelParams params;
  std::string ref_gpu;  // GPU machine the GPU predictions are fitted on ("" when none)
  std::optional<MachineFit> gpu_fit, cpu_fit;
  std::string plots_dir, tables_dir;
  std::vector<std::string> plots;  // written
  std::string net_source;          // where params.network comes from, in words
  std::optional<Link> user_intra;  // --constants' link inside a node
};

std::vector<Line> build_lines(const Context& c, const TableDef& t) {
  auto keep = [&](const Row& r) {
    return is_cpu_row(r) == t.cpu && t.setting(r) && ms(r) > 0 &&
           std::find(t.methods.begin(), t.methods.end(), col(r, "method")) != t.methods.end();
  };
  auto key = [](const Row& r) {
    return col(r, "method") + "|" + col(r, "world_size") + "|" + col(r, "gpu") + "|" + col(r, "backend");
  };
  const auto measured = newest_by(c.res.rows, keep, key);
  std::set<int> gpus;
  if (!t.cpu) gpus.insert(kPredictGpus.begin(), kPredictGpus.end());
  for (auto& [k, r] : measured) gpus.insert(inum(*r, "world_size"));
  // The reference method's time per (gpu, world size, code): ratios compare rows of one machine, and of one run
  // where the reference was measured by the same code (git_sha); otherwise the reference's best on that machine.
  // Every reference row counts here, not only the newest, so an older run keeps its own reference.
  std::map<std::tuple<std::string, int, std::string>, double> ref_ms;
  auto add_ref = [&](const Row& r, const std::string& sha) {
    auto& v = ref_ms.emplace(std::tuple{col(r, "gpu"), inum(r, "world_size"), sha}, INFINITY).first->second;
    v = std::min(v, ms(r));
  };
  for (const Row& r : c.res.rows)
    if (keep(r) && col(r, "method") == t.ref) add_ref(r, col(r, "git_sha")), add_ref(r, "");
  auto ref_for = [&](const Row& r) {
    auto it = ref_ms.find({col(r, "gpu"), inum(r, "world_size"), col(r, "git_sha")});
    if (it == ref_ms.end()) it = ref_ms.find({col(r, "gpu"), inum(r, "world_size"), std::string()});
    return it == ref_ms.end() ? NAN : it->second;
  };
  std::vector<Line> lines;
  for (int P : gpus) {
    const double paper_ref = paper_value(c.paper, t.paper_level, P, t.paper_seq, t.ref);
    auto [model_ref, ignored] = t.model(t.ref, P);
    bool paper_row = false;  // the paper published this GPU count: every method gets a line there
    for (auto& m : t.methods) paper_row |= std::isfinite(paper_value(c.paper, t.paper_level, P, t.paper_seq, m));
    for (auto& m : t.methods) {
      Line base;
      base.gpus = P, base.method = m;
      base.paper = paper_value(c.paper, t.paper_level, P, t.paper_seq, m);
      std::tie(base.model, base.model_note) = t.model(m, P);
      base.r_paper = base.paper / paper_ref;
      base.r_model = base.model / model_ref;
      std::vector<Line> mine;
      for (auto& [k, r] : measured)
        if (col(*r, "method") == m && inum(*r, "world_size") == P) {
          Line l = base;
          l.row = r, l.measured = ms(*r);
          l.r_measured = l.measured / ref_for(*r);
          mine.push_back(l);
        }
      // Unmeasured lines where there is something to say: a prediction (or why there is none, once a fit exists),
      // or a GPU count the paper published.
      const bool said = std::isfinite(base.model) || (t.fitted && !base.model_note.empty());
      if (mine.empty() && (said || std::isfinite(base.paper) || paper_row)) mine.push_back(base);
      lines.insert(lines.end(), mine.begin(), mine.end());
    }
  }
  return lines;
}

// --- against the paper, point by point --------------------------------------------------------------------------------
// spbench's ratio (method ÷ the table's reference) agrees with the paper's at a GPU count when their quotient lies
// within [1/kAgreeBand, kAgreeBand]; a method agrees with the paper only where every such point does.
constexpr double kAgreeBand = 1.25;
std::string band_str() { return fmt("%.2f", 1 / kAgreeBand) + "-" + fmt("%.2f", kAgreeBand); }

// One point of comparison: spbench's ratio at a GPU count the paper published (measured where this line was
// measured, else the model's prediction) and the paper's.
struct PaperPoint {
  int gpus = 0;
  double ours = NAN, paper = NAN;
  bool measured = false;
  double quotient() const { return ours / paper; }
  bool agrees() const {  // on the quotient as printed (two decimals), so the text never contradicts itself
    const double q = std::round(quotient() * 100) / 100;
    return q >= std::round(100 / kAgreeBand) / 100 && q <= kAgreeBand;
  }
};
std::optional<PaperPoint> paper_point(const Line& l) {
  if (!std::isfinite(l.r_paper)) return std::nullopt;
  if (l.row && std::isfinite(l.r_measured)) return PaperPoint{l.gpus, l.r_measured, l.r_paper, true};
  if (std::isfinite(l.r_model)) return PaperPoint{l.gpus, l.r_model, l.r_paper, false};
  return std::nullopt;
}
// The table cell: "measured 1.16x ÷ paper 1.15x = 1.01" ("model ..." where the line was not measured).
std::string versus_cell(const Line& l, const std::string& ref) {
  const auto p = paper_point(l);
  if (!p || l.method == ref) return "—";
  return std::string(p->measured ? "measured " : "model ") + ratio_cell(p->ours) + " ÷ paper " + ratio_cell(p->paper) +
         " = " + fmt("%.2f", p->quotient());
}

// Per method: the paper's, the model's and the measured ratios to the reference; then the comparison with the paper at
// every GPU count it published (agrees only if every point is within the band), with the reason where one is known;
// and how the model's absolute numbers compare with the paper's. `quantity` names what the table holds ("time" or
// "throughput": for a throughput a lower ratio is the worse one).
std::string trend_paragraph(const std::vector<Line>& lines, const TableDef& t, const ModelParams& params,
                            const std::string& quantity = "time") {
  using Series = std::vector<std::pair<int, double>>;
  const bool higher_better = quantity == "throughput";
  auto add = [](Series& v, int g, double x) {
    if (std::isfinite(x) && (v.empty() || v.back().first != g)) v.push_back({g, x});
  };
  auto span = [](const Series& v) {
    return ratio_cell(v.front().second) + " at " + std::to_string(v.front().first) + " GPUs" +
           (v.size() > 1 ? " to " + ratio_cell(v.back().second) + " at " + std::to_string(v.back().first) : "");
  };
  auto moves = [](const Series& v) {  // the ratio changes by more than 5% over the GPU counts
    double lo = INFINITY, hi = 0;
    for (auto& [g, r] : v) lo = std::min(lo, r), hi = std::max(hi, r);
    return v.size() >= 2 && hi > lo * 1.05;
  };
  std::ostringstream s;
  s << "spbench's ratio is compared with the paper's at every GPU count the paper published: the quotient (ours ÷ "
       "paper) must lie within "
    << band_str() << " at every point for \"agrees\"; ours is the measured ratio where that GPU count was measured, "
    << "else the model's prediction (each point says which).\n\n";
  bool any = false;
  for (const std::string& m : t.methods) {
    Series paper, model, measured, abs_ratio;  // abs_ratio: the model's number / the paper's
    std::vector<PaperPoint> points;
    for (const Line& l : lines) {
      if (l.method != m) continue;
      add(paper, l.gpus, l.r_paper);
      if (l.gpus >= kPredictGpus.front()) add(model, l.gpus, l.r_model);
      if (std::isfinite(l.r_measured)) measured.push_back({l.gpus, l.r_measured});
      add(abs_ratio, l.gpus, l.model / l.paper);
      if (auto p = paper_point(l)) points.push_back(*p);
    }
    if (m == t.ref) {
      if (abs_ratio.empty()) continue;
      any = true;
      double lo = INFINITY, hi = 0;
      for (auto& [g, r] : abs_ratio) lo = std::min(lo, r), hi = std::max(hi, r);
      s << "- **" << m << "** (the reference): the model's " << quantity << " is " << fmt("%.2f", lo) << "-"
        << fmt("%.2f", hi) << "x the paper's over " << abs_ratio.front().first << " to " << abs_ratio.back().first
        << " GPUs (the paper's H100 cluster against a model fitted on our machine).\n";
      continue;
    }
    if (paper.empty() && model.empty() && measured.empty()) continue;
    any = true;
    s << "- **" << m << " ÷ " << t.ref << "**: ";
    std::vector<std::string> parts;
    if (!paper.empty()) parts.push_back("paper " + span(paper));
    if (!model.empty()) parts.push_back("model prediction " + span(model));
    if (!measured.empty()) {
      std::vector<std::string> mv;
      for (auto& [g, r] : measured) mv.push_back(ratio_cell(r) + " at " + std::to_string(g));
      parts.push_back("measured " + join(mv, ", "));
    }
    s << join(parts, "; ") << ". ";
    if (points.empty() && !paper.empty()) {
      s << "No spbench ratio at a GPU count the paper published: no verdict. ";
    } else if (!points.empty()) {
      std::vector<std::string> pv, off;
      bool worse = false, better = false;  // ours, where outside the band: worse or better than the paper's
      for (const PaperPoint& p : points) {
        pv.push_back(std::to_string(p.gpus) + " GPUs " + fmt("%.2f", p.quotient()) +
                     (p.measured ? " (measured)" : " (model)"));
        if (p.agrees()) continue;
        off.push_back(std::to_string(p.gpus));
        ((p.quotient() > 1) != higher_better ? worse : better) = true;
      }
      s << "Ours ÷ paper: " << join(pv, ", ") << ": ";
      if (off.empty())
        s << "**agrees** (every point within " << band_str() << "). ";
      else
        s << "**disagrees** at " << join(off, ", ") << " GPUs (outside " << band_str() << "; spbench's " << m
          << (worse && better ? " is worse at some points and better at others" : worse ? " fares worse" : " fares better")
          << " against " << t.ref << " than the paper's). ";
      // Reasons, where one is known.
      if (!off.empty()) {
        if (m == "lasp1" && worse)
          s << "The model follows our LASP-1, which is fully serial (a rank receives its state before it computes, as "
               "in the official code): P x dp plus the chain. The paper's LASP-1 grows far more slowly than P x dp, so "
               "less of its compute waits on the chain. ";
        if ((m == "zeco" || m == "lasp2") && better && !moves(model) && moves(paper)) {
          if (params.overlap_fraction > 0)
            s << "The model hides the collective behind " << fmt("%g", 100 * params.overlap_fraction)
              << "% of each pass's local compute (a parameter), so its " << m << " stays at " << t.ref << "; ";
          else
            s << "The model's " << m << " stays near " << t.ref << " (its collective is small against the pass on the "
              << "fitted links); ";
          s << "the paper's moves away from " << t.ref << ", so more of its time goes to communication or other "
               "per-rank work than the alpha-beta links predict. ";
        }
      }
    }
    if (!abs_ratio.empty()) {
      double lo = INFINITY, hi = 0;
      for (auto& [g, r] : abs_ratio) lo = std::min(lo, r), hi = std::max(hi, r);
      s << "The model's " << m << " " << quantity << " is " << fmt("%.2f", lo) << "-" << fmt("%.2f", hi)
        << "x the paper's where both exist. ";
    }
    if (!measured.empty() && !paper.empty() && measured.back().first < paper.front().first)
      s << "Our measurements stop at " << measured.back().first << " GPUs, below the paper's smallest count ("
        << paper.front().first << "): from there on only the model speaks. ";
    s << "\n";
  }
  if (!any) return "No numbers to compare yet.\n";
  return s.str();
}

std::string render_lines(const std::vector<Line>& lines, const std::string& ref, const std::string& value,
                         bool with_paper = true) {
  std::vector<std::vector<std::string>> rows;
  for (const Line& l : lines) {
    std::vector<std::string> r = {std::to_string(l.gpus), l.method, l.row ? num_cell(l.measured) : kNotMeasured,
                                  l.row ? machine_of(*l.row) : "—",
                                  std::isfinite(l.model) ? num_cell(l.model) : l.model_note};
    if (with_paper) r.push_back(std::isfinite(l.paper) ? num_cell(l.paper) : kNotPublished);
    r.push_back(ratio_cell(l.r_measured));
    r.push_back(ratio_cell(l.r_model));
    if (with_paper) r.push_back(ratio_cell(l.r_paper));
    if (with_paper) r.push_back(versus_cell(l, ref));
    rows.push_back(r);
  }
  std::vector<std::string> head = {with_paper ? "GPUs" : "ranks", "method", "measured " + value,
                                   "measured on (gpu, world size, backend, date)", "model prediction " + value};
  if (with_paper) head.push_back("paper " + value);
  head.push_back("÷ " + ref + ": measured");
  head.push_back("÷ " + ref + ": model");
  if (with_paper) head.push_back("÷ " + ref + ": paper");
  if (with_paper) head.push_back("ours ÷ paper (ratios)");
  return md_table(head, rows, with_paper ? "rlrlrrrrrl" : "rlrlrrr");
}

void write_table_csv(const Context& c, const std::string& id, const std::vector<Line>& lines) {
  std::ofstream f(c.tables_dir + "/" + id + ".csv");
  f << "gpus,method,measured_ms,measured_gpu,measured_world_size,measured_backend,measured_date,model_ms,paper_ms,"
       "ratio_measured,ratio_model,ratio_paper\n";
  auto n = [](double v) { return std::isfinite(v) ? fmt("%.6g", v) : std::string(); };
  for (const Line& l : lines)
    f << l.gpus << "," << l.method << "," << n(l.measured) << "," << (l.row ? csv_field(col(*l.row, "gpu")) : "") << ","
      << (l.row ? col(*l.row, "world_size") : "") << "," << (l.row ? col(*l.row, "backend") : "") << ","
      << (l.row ? col(*l.row, "date") : "") << "," << n(l.model) << "," << n(l.paper) << "," << n(l.r_measured) << ","
      << n(l.r_model) << "," << n(l.r_paper) << "\n";
}


// --- the cost model's predictions for the GPU tables ------------------------------------------------------------------
std::pair<double, std::string> no_fit(const Context& c, const char* what) {
  return {NAN, c.ref_gpu.empty() ? "no fit yet (no GPU rows)" : std::string("no fit (") + what + ")"};
}

std::function<std::pair<double, std::string>(const std::string&, int)> collective_model(const Context& c) {
  return [&c](const std::string& pattern, int P) -> std::pair<double, std::string> {
    if (!c.gpu_fit) return no_fit(c, "");
    const CostModel cm = c.gpu_fit->collective_model();
    if (std::find(model_patterns().begin(), model_patterns().end(), pattern) == model_patterns().end())
      return {NAN, "no formula"};
    auto t = cm.collective(pattern, P, kTable2Bytes, 4.0 * kPaperBlockElems, 128);
    if (!t) return no_fit(c, ("no " + pattern + " rows").c_str());
    return {*t * 1e3, ""};
  };
}

std::function<std::pair<double, std::string>(const std::string&, int)> operator_model(const Context& c, long long L) {
  return [&c, L](const std::string& method, int P) -> std::pair<double, std::string> {
    if (!c.gpu_fit) return no_fit(c, "");
    if (std::find(model_methods().begin(), model_methods().end(), method) == model_methods().end())
      return {NAN, "no formula"};
    const CostModel cm = c.gpu_fit->model_for(c.res.rows, 1, 16, 128, 128, "bf16");
    if (!cm.fwd_bwd.ok) return no_fit(c, "no dp rows at H=16, dk=dv=128, bf16");
    OperatorShape s;
    s.world = P, s.batch = 1, s.heads = 16, s.dk = 128, s.dv = 128, s.tokens_per_rank = L;
    s.block_bytes = 4.0 * kPaperBlockElems, s.act_bytes = 2;
    if (method == "ulysses" && s.heads % P != 0) return {NAN, "n/a (H=16 not divisible by P)"};
    auto t = cm.operator_time(method, s);
    if (!t) return no_fit(c, "a pattern it needs was not measured");
    return {*t * 1e3, ""};
  };
}

std::vector<std::string> operator_methods(const Context& c) {
  std::set<std::string> names(model_methods().begin(), model_methods().end());
  for (auto& m : method_names()) names.insert(m);
  for (auto& r : c.res.rows)
    if (col(r, "level") == "operator" || col(r, "level") == "model") names.insert(col(r, "method"));
  return ordered(names, {"dp", "zeco", "lasp2", "lasp1", "ring", "ulysses"});
}

// The paper's two patterns and LASP-1's chain, then every pattern measured (on GPUs, or on CPU ranks for `cpu`).
std::vector<std::string> collective_methods(const Context& c, bool cpu) {
  std::set<std::string> names = {"allgather", "allscan", "chain"};
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && col(r, "pass") != "probe" && is_cpu_row(r) == cpu)
      names.insert(col(r, "method"));
  return ordered(names, {"allscan", "allgather", "chain", "ring", "alltoall"});
}

// Each measured All-Scan next to the floor the link probes give it (issue 4): the state over one link's bandwidth
// plus the pipeline's fill (P-2 more blocks) and P-1 flag latencies, from the newest probe of each GPU.
std::string section_floors(const Context& c) {
  std::map<std::string, std::pair<double, double>> probe;  // gpu -> (hop latency us, pair bandwidth GB/s)
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && col(r, "pass") == "probe") {
      auto& p = probe[col(r, "gpu")];
      if (col(r, "method") == "hop_latency") p.first = ms(r) * 1e3;
      if (col(r, "method") == "pair_bandwidth") p.second = num(r, "algbw_GBps");
    }
  std::ostringstream s;
  s << "### All-Scan against its floor\n\n";
  bool any = false;
  for (auto& [gpu, p] : probe) {
    if (p.first <= 0 || p.second <= 0) continue;
    s << "Link probes on " << gpu << " (`spbench collective --probe`, ranks 0 and 1): one-hop flag latency "
      << num_cell(p.first) << " us, pair bandwidth " << num_cell(p.second)
      << " GB/s. Floor of a K-block pipeline over P-1 hops = (K + P - 2) x block bytes / bandwidth + (P-1) x latency "
         "(K = 1: the chain, (P-1) x (latency + state / bandwidth)); for the packet protocols (device-ll, "
         "device-ll16), which pipeline word by word whatever K, the floor of any All-Scan: state / bandwidth + (P-1) x "
         "latency.\n\n"
      << "| GPUs | backend | state | block (elements) | measured (us) | floor (us) | measured / floor |\n"
      << "| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n";
    std::map<std::tuple<double, std::string, double, double>, const Row*> newest;
    for (auto& r : c.res.rows)
      if (col(r, "level") == "collective" && col(r, "method") == "allscan" && col(r, "gpu") == gpu &&
          (num(r, "bytes") == kTable2Bytes || num(r, "bytes") == kTable2Bytes / 2)) {
        auto& slot = newest[{num(r, "world_size"), col(r, "backend"), num(r, "bytes"), num(r, "block_elems")}];
        if (!slot || col(r, "date") > col(*slot, "date")) slot = &r;
      }
    for (auto& [key, r] : newest) {
      const double P = std::get<0>(key), bytes = std::get<2>(key), block = std::get<3>(key);
      const double block_us = 4 * block / (p.second * 1e3), K = bytes / (4 * block);
      const bool packets = std::get<1>(key).rfind("device-ll", 0) == 0;
      const double floor_us = packets ? bytes / (p.second * 1e3) + (P - 1) * p.first
                                      : (K + P - 2) * block_us + (P - 1) * p.first;
      s << "| " << int_str(P) << " | " << std::get<1>(key) << " | " << bytes_str(bytes) << " | " << int_str(block)
        << " | " << num_cell(ms(*r) * 1e3) << " | " << num_cell(floor_us) << " | " << num_cell(ms(*r) * 1e3 / floor_us)
        << "x |\n";
      any = true;
    }
    s << "\n";
  }
  if (!any) s << "No link probes or All-Scan rows at 1-2 MiB measured yet.\n\n";
  return s.str();
}

// --- plots ------------------------------------------------------------------------------------------------------------
// Sorts a plot's measured series in the tables' order of methods (or of patterns).
std::string order_key(const std::vector<std::string>& order, const std::string& method, const std::string& title) {
  const size_t i = size_t(std::find(order.begin(), order.end(), method) - order.begin());
  return fmt("%04.0f", double(i)) + title;
}
struct Figure {
  std::string name, caption, missing;  // missing: why it was not drawn
};

std::vector<int> model_gpus(bool cpu, int max_measured) {
  std::vector<int> v;
  if (cpu) {
    for (int P = 2; P <= std::max(2, max_measured); ++P) v.push_back(P);
  } else {
    for (int P = 2; P <= 256; P *= 2) v.push_back(P);
  }
  return v;
}

Figure draw(Context& c, const PlotSpec& p, const std::string& caption, const std::string& missing) {
  const bool has_ours = std::any_of(p.series.begin(), p.series.end(), [](const PlotSeries& s) {
    return !s.rows.empty() && s.title.rfind("paper", 0) != 0;
  });
  if (has_ours && write_plot(c.plots_dir, p)) {
    c.plots.push_back(p.name);
    return {p.name, caption, ""};
  }
  return {p.name, caption, missing};
}

std::string class_label(bool cpu) { return cpu ? "CPU ranks" : "GPUs"; }

Figure plot_collective_vs_gpus(Context& c, bool cpu) {
  const MachineFit* fit = cpu ? (c.cpu_fit ? &*c.cpu_fit : nullptr) : (c.gpu_fit ? &*c.gpu_fit : nullptr);
  // The paper's size where measured; on CPU ranks the largest size measured at two world sizes or more.
  double bytes = kTable2Bytes;
  std::map<double, std::set<int>> worlds_at;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && is_cpu_row(r) == cpu) worlds_at[num(r, "bytes")].insert(inum(r, "world_size"));
  if (!worlds_at.count(kTable2Bytes))
    for (auto& [b, w] : worlds_at)
      if (w.size() >= 2) bytes = b;
  auto keep = [&](const Row& r) {
    return col(r, "level") == "collective" && is_cpu_row(r) == cpu && num(r, "bytes") == bytes && ms(r) > 0 &&
           (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems));
  };
  auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "world_size"); };
  std::map<std::string, PlotSeries> series;
  int maxP = 0;
  for (auto& [k, r] : newest_by(c.res.rows, keep, key)) {
    const std::string title = series_label(col(*r, "method"), *r);
    PlotSeries& s = series[order_key(collective_methods(c, cpu), col(*r, "method"), title)];
    s.title = title;
    s.style = series_style(SeriesKind::measured, method_colour(col(*r, "method")), backend_point(col(*r, "backend")));
    s.rows.push_back({num(*r, "world_size"), ms(*r)});
    maxP = std::max(maxP, inum(*r, "world_size"));
  }
  PlotSpec p;
  p.name = cpu ? "cpu_collective_vs_gpus" : "collective_vs_gpus";
  p.title = "Collective time vs " + class_label(cpu) + " (" + bytes_str(bytes) + " state per rank, All-Scan block " +
            int_str(kPaperBlockElems) + " elements)";
  p.xlabel = cpu ? "CPU ranks (MPI processes)" : "GPUs";
  p.ylabel = "time per call (ms)";
  p.logx = true, p.logy = true;
  for (auto& [k, s] : series) p.series.push_back(s);
  if (fit)
    for (const std::string& pat : collective_methods(c, cpu)) {
      const CostModel cm = fit->collective_model();
      PlotSeries s;
      s.title = pat + " model prediction";
      s.style = series_style(SeriesKind::model, method_colour(pat));
      for (int P : model_gpus(cpu, maxP)) {
        auto t = cm.collective(pat, P, bytes, 4.0 * kPaperBlockElems, 128);
        if (t) s.rows.push_back({double(P), *t * 1e3});
      }
      if (!s.rows.empty()) p.series.push_back(s);
    }
  if (!cpu)
    for (const char* pat : {"allscan", "allgather"}) {
      PlotSeries s;
      s.title = std::string("paper ") + pat + " (H100)";
      s.style = series_style(SeriesKind::paper, method_colour(pat));
      for (int P : kPredictGpus) {
        const double v = paper_value(c.paper, "collective", P, kTable2Seq, pat);
        if (std::isfinite(v)) s.rows.push_back({double(P), v});
      }
      p.series.push_back(s);
    }
  return draw(c, p,
              "Collective time against the number of " + class_label(cpu) +
                  ": measured (solid), cost-model prediction (dashed)" + (cpu ? "" : ", the paper's Table 2 (circles)") + ".",
              "no " + std::string(cpu ? "CPU" : "GPU") + " collective rows yet");
}

Figure plot_collective_vs_bytes(Context& c, bool cpu) {
  const MachineFit* fit = cpu ? (c.cpu_fit ? &*c.cpu_fit : nullptr) : (c.gpu_fit ? &*c.gpu_fit : nullptr);
  int P = 0;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && is_cpu_row(r) == cpu) P = std::max(P, inum(r, "world_size"));
  auto keep = [&](const Row& r) {
    return col(r, "level") == "collective" && is_cpu_row(r) == cpu && is(r, "world_size", P) && ms(r) > 0 &&
           (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems) || num(r, "bytes") < 4 * kPaperBlockElems);
  };
  auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "bytes"); };
  std::map<std::string, PlotSeries> series;
  double lo = INFINITY, hi = 0;
  for (auto& [k, r] : newest_by(c.res.rows, keep, key)) {
    const std::string title = series_label(col(*r, "method"), *r);
    PlotSeries& s = series[order_key(collective_methods(c, cpu), col(*r, "method"), title)];
    s.title = title;
    s.style = series_style(SeriesKind::measured, method_colour(col(*r, "method")), backend_point(col(*r, "backend")));
    s.rows.push_back({num(*r, "bytes"), ms(*r)});
    lo = std::min(lo, num(*r, "bytes")), hi = std::max(hi, num(*r, "bytes"));
  }
  PlotSpec p;
  p.name = cpu ? "cpu_collective_vs_bytes" : "collective_vs_bytes";
  p.title = "Collective time vs state size on " + std::to_string(P) + " " + class_label(cpu) + " (All-Scan block " +
            int_str(kPaperBlockElems) + " elements)";
  p.xlabel = "per-rank state (bytes)";
  p.extra = "set format x \"%.0b %BB\"\n";
  p.ylabel = "time per call (ms)";
  p.logx = true, p.logy = true;
  for (auto& [k, s] : series) p.series.push_back(s);
  if (fit && P >= 2)
    for (const std::string& pat : collective_methods(c, cpu)) {
      const CostModel cm = fit->collective_model();
      PlotSeries s;
      s.title = pat + " model prediction";
      s.style = series_style(SeriesKind::model, method_colour(pat));
      for (double b = lo; b <= hi; b *= 2) {
        auto t = cm.collective(pat, P, b, 4.0 * kPaperBlockElems, 128);
        if (t) s.rows.push_back({b, *t * 1e3});
      }
      if (!s.rows.empty()) p.series.push_back(s);
    }
  return draw(c, p, "Collective time against the per-rank state size at the largest world size measured.",
              "no " + std::string(cpu ? "CPU" : "GPU") + " collective rows yet");
}

Figure plot_allscan_vs_block(Context& c, bool cpu) {
  const MachineFit* fit = cpu ? (c.cpu_fit ? &*c.cpu_fit : nullptr) : (c.gpu_fit ? &*c.gpu_fit : nullptr);
  // The paper's size if swept over blocks there, else the largest size with two block sizes or more.
  std::map<double, std::set<double>> blocks_at;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && col(r, "method") == "allscan" && is_cpu_row(r) == cpu)
      blocks_at[num(r, "bytes")].insert(num(r, "block_elems"));
  double bytes = 0;
  for (auto& [b, s] : blocks_at)
    if (s.size() >= 2) bytes = b;
  if (blocks_at.count(kTable2Bytes) && blocks_at[kTable2Bytes].size() >= 2) bytes = kTable2Bytes;
  auto keep = [&](const Row& r) {
    return col(r, "level") == "collective" && col(r, "method") == "allscan" && is_cpu_row(r) == cpu &&
           num(r, "bytes") == bytes && ms(r) > 0;
  };
  auto key = [](const Row& r) {
    return col(r, "world_size") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "block_elems");
  };
  const auto rows = newest_by(c.res.rows, keep, key);
  std::set<int> worlds;
  for (auto& [k, r] : rows) worlds.insert(inum(*r, "world_size"));
  std::set<int> model_worlds = worlds;
  if (!cpu) model_worlds.insert({8, 64, 256});
  auto colour = [&](int P) { return int(std::distance(model_worlds.begin(), model_worlds.find(P))); };
  std::map<std::pair<int, std::string>, PlotSeries> series;
  for (auto& [k, r] : rows) {
    const int P = inum(*r, "world_size");
    const std::string title = series_label("P=" + std::to_string(P), *r);
    PlotSeries& s = series[{P, title}];
    s.title = title, s.style = series_style(SeriesKind::measured, colour(P), backend_point(col(*r, "backend")));
    s.rows.push_back({num(*r, "block_elems"), ms(*r)});
  }
  PlotSpec p;
  p.name = cpu ? "cpu_allscan_vs_block" : "allscan_vs_block";
  p.title = "All-Scan time vs block size (" + bytes_str(bytes) + " state per rank)";
  p.xlabel = "All-Scan block (fp32 elements; K = state / block)";
  p.ylabel = "time per call (ms)";
  p.logx = true, p.logy = true;
  for (auto& [k, s] : series) p.series.push_back(s);
  if (fit && bytes > 0) {
    const CostModel cm = fit->collective_model();
    for (int P : model_worlds) {
      PlotSeries s;
      s.title = "P=" + std::to_string(P) + " model prediction";
      s.style = series_style(SeriesKind::model, colour(P));
      for (double b = 128; b <= bytes / 4; b *= 2) {
        auto t = cm.collective("allscan", P, bytes, 4 * b, 128);
        if (t) s.rows.push_back({b, *t * 1e3});
      }
      if (!s.rows.empty() && P >= 2) p.series.push_back(s);
    }
  }
  if (series.empty()) p.series.clear();
  return draw(c, p, "All-Scan time against its block size: small blocks pay the per-hop latency K times, large blocks "
                    "lose the pipelining over the P-1 hops.",
              "no " + std::string(cpu ? "CPU" : "GPU") + " All-Scan rows with two block sizes or more yet");
}

// Operator configurations (shape) present among `cpu` rows: batch, heads, dk, dv, dtype.
struct Shape {
  int batch, heads, dk, dv;
  std::string dtype;
  bool operator<(const Shape& o) const {
    return std::tie(batch, heads, dk, dv, dtype) < std::tie(o.batch, o.heads, o.dk, o.dv, o.dtype);
  }
  std::string str() const {
    return "B=" + std::to_string(batch) + ", H=" + std::to_string(heads) + ", dk=" + std::to_string(dk) +
           ", dv=" + std::to_string(dv) + ", " + dtype;
  }
  std::string tag() const {
    return "B" + std::to_string(batch) + "_H" + std::to_string(heads) + "_dk" + std::to_string(dk) + "_dv" +
           std::to_string(dv);
  }
};
Shape shape_of(const Row& r) {
  return {inum(r, "batch"), inum(r, "heads"), inum(r, "dk"), inum(r, "dv"), col(r, "dtype")};
}
// The methods' default schedule: zeco and lasp2 in order (--overlap 0) and zeco's one head group. Rows of the other
// orders (and groups) are development measurements beside it: the tables and plots show one row per method, the
// default's, and the exposed-communication section shows each order's timeline.
bool default_order(const Row& r) {
  const std::string o = col(r, "overlap"), g = col(r, "head_groups");
  return (o.empty() || o == "0") && (g.empty() || g == "1");
}

bool operator_row(const Row& r, bool cpu) {
  return col(r, "level") == "operator" && col(r, "pass") == "fwd_bwd" && is_cpu_row(r) == cpu && ms(r) > 0 &&
         default_order(r);
}

std::vector<Figure> plot_operator_vs_gpus(Context& c, bool cpu) {
  std::vector<Figure> figs;
  const MachineFit* fit = cpu ? (c.cpu_fit ? &*c.cpu_fit : nullptr) : (c.gpu_fit ? &*c.gpu_fit : nullptr);
  // GPUs: the settings of Tables 3 and 4. CPU ranks: every (shape, tokens per rank) measured.
  std::set<std::pair<Shape, long long>> configs;
  if (!cpu) configs = {{Shape{1, 16, 128, 128, "bf16"}, 16384}, {Shape{1, 16, 128, 128, "bf16"}, 32768}};
  else
    for (auto& r : c.res.rows)
      if (operator_row(r, true)) configs.insert({shape_of(r), lnum(r, "tokens_per_rank")});
  for (auto& [shape, L] : configs) {
    auto keep = [&, L = L, shape = shape](const Row& r) {
      const Shape s = shape_of(r);
      return operator_row(r, cpu) && !(s < shape) && !(shape < s) && is(r, "tokens_per_rank", double(L)) &&
             (col(r, "method") != "zeco" || cpu || is(r, "block_elems", kPaperBlockElems));
    };
    auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "world_size"); };
    std::map<std::string, PlotSeries> series;
    std::set<int> worlds;
    double block_elems = kPaperBlockElems;
    for (auto& [k, r] : newest_by(c.res.rows, keep, key)) {
      const std::string title = series_label(col(*r, "method"), *r);
      PlotSeries& s = series[order_key(operator_methods(c), col(*r, "method"), title)];
      s.title = title;
      s.style = series_style(SeriesKind::measured, method_colour(col(*r, "method")), backend_point(col(*r, "backend")));
      s.rows.push_back({num(*r, "world_size"), ms(*r)});
      worlds.insert(inum(*r, "world_size"));
      if (col(*r, "method") == "zeco" && num(*r, "block_elems") > 0) block_elems = num(*r, "block_elems");
    }
    PlotSpec p;
    p.name = std::string(cpu ? "cpu_" : "") + "operator_vs_gpus_" + (cpu ? shape.tag() + "_" : "") + "L" + std::to_string(L);
    p.title = "Operator forward+backward vs " + class_label(cpu) + " (" + shape.str() + ", " + std::to_string(L) +
              " tokens per rank)";
    p.xlabel = cpu ? "CPU ranks (MPI processes)" : "GPUs";
    p.ylabel = "forward + backward time (ms)";
    p.logx = true, p.logy = true;
    for (auto& [k, s] : series) p.series.push_back(s);
    if (fit) {
      for (const std::string& m : operator_methods(c)) {
        PlotSeries s;
        s.title = m + " model prediction";
        s.style = series_style(SeriesKind::model, method_colour(m));
        // CPU ranks: at the measured world sizes only (their dp time depends on how many ranks share the cores).
        std::set<int> ps = worlds;
        if (!cpu) {
          ps.insert(1);
          for (int P : model_gpus(false, 0)) ps.insert(P);
        }
        for (int P : ps) {
          OperatorShape os;
          os.world = P, os.batch = shape.batch, os.heads = shape.heads, os.dk = shape.dk, os.dv = shape.dv;
          os.tokens_per_rank = L, os.block_bytes = 4 * block_elems, os.act_bytes = shape.dtype == "fp32" ? 4 : 2;
          const CostModel cm =
              fit->model_for(c.res.rows, shape.batch, shape.heads, shape.dk, shape.dv, shape.dtype, cpu ? P : 0);
          auto t = cm.operator_time(m, os);
          if (t) s.rows.push_back({double(P), *t * 1e3});
        }
        if (!s.rows.empty()) p.series.push_back(s);
      }
    }
    if (!cpu)
      for (const std::string& m : operator_methods(c)) {
        PlotSeries s;
        s.title = "paper " + m + " (H100)";
        s.style = series_style(SeriesKind::paper, method_colour(m));
        for (int P : kPredictGpus) {
          const double v = paper_value(c.paper, "operator", P, L, m);
          if (std::isfinite(v)) s.rows.push_back({double(P), v});
        }
        if (!s.rows.empty()) p.series.push_back(s);
      }
    figs.push_back(draw(c, p,
                        "Operator forward+backward time per method against the number of " + class_label(cpu) + ", " +
                            std::to_string(L) + " tokens per rank" +
                            (cpu ? "." : " (Table " + std::string(L == 16384 ? "3" : "4") + "'s setting)."),
                        "no " + std::string(cpu ? "CPU" : "GPU") + " operator rows at " + shape.str() + ", " +
                            std::to_string(L) + " tokens per rank yet"));
  }
  return figs;
}

std::vector<Figure> plot_scaling(Context& c, bool cpu, bool weak) {
  std::vector<Figure> figs;
  // Groups: weak = (gpu, shape, tokens per rank); strong = (gpu, shape, total tokens = tokens per rank x P).
  std::map<std::tuple<std::string, Shape, long long>, std::vector<const Row*>> groups;
  auto key = [](const Row& r) {
    return col(r, "method") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "world_size") + "|" +
           col(r, "tokens_per_rank") + "|" + col(r, "batch") + "|" + col(r, "heads") + "|" + col(r, "dk") + "|" +
           col(r, "dv") + "|" + col(r, "dtype") + "|" + col(r, "block_elems");
  };
  for (auto& [k, r] : newest_by(c.res.rows, [&](const Row& r) { return operator_row(r, cpu); }, key)) {
    const long long L = lnum(*r, "tokens_per_rank"), P = lnum(*r, "world_size");
    groups[{col(*r, "gpu"), shape_of(*r), weak ? L : L * P}].push_back(r);
  }
  for (auto& [g, rows] : groups) {
    auto& [gpu, shape, tokens] = g;
    std::set<int> worlds;
    for (auto* r : rows) worlds.insert(inum(*r, "world_size"));
    if (worlds.size() < 2) continue;
    std::map<std::string, PlotSeries> series;
    double dp_first = NAN;
    int p_first = *worlds.begin();
    for (auto* r : rows) {
      const std::string m = col(*r, "method");
      const std::string title = m + " (" + col(*r, "backend") + (col(*r, "block_elems") != "0" && m == "zeco"
                                                                     ? ", block " + col(*r, "block_elems") : "") + ")";
      PlotSeries& s = series[order_key(operator_methods(c), m, title)];
      s.title = title, s.style = series_style(SeriesKind::measured, method_colour(m), backend_point(col(*r, "backend")));
      const double P = num(*r, "world_size"), L = num(*r, "tokens_per_rank");
      const double y = weak ? num(*r, "batch") * L / (ms(*r) * 1e-3) : ms(*r);
      s.rows.push_back({P, y});
      if (m == "dp" && int(P) == p_first) dp_first = ms(*r);
    }
    for (auto& [k, s] : series) std::sort(s.rows.begin(), s.rows.end());
    PlotSpec p;
    const std::string sys = cpu ? "cpu_" : "";
    p.name = sys + (weak ? "weak_scaling_" : "strong_scaling_") + shape.tag() + (weak ? "_L" : "_T") + std::to_string(tokens);
    if (!cpu) p.name += "_" + [&] {
      std::string t;
      for (char ch : gpu) t += std::isalnum((unsigned char)ch) ? ch : '_';
      return t;
    }();
    p.title = std::string(weak ? "Weak scaling: " : "Strong scaling: ") + std::to_string(tokens) +
              (weak ? " tokens per rank" : " tokens in all") + " (" + shape.str() + ", " + gpu + ")";
    p.xlabel = cpu ? "CPU ranks (MPI processes)" : "GPUs";
    p.ylabel = weak ? "throughput per rank (tokens/s, forward+backward)" : "forward + backward time (ms)";
    p.logx = true, p.logy = !weak;
    if (weak) p.extra = "set yrange [0:*]\nset format y \"%.1s%c\"\n";
    for (auto& [k, s] : series) p.series.push_back(s);
    if (!weak && std::isfinite(dp_first)) {
      PlotSeries ideal;
      ideal.title = p_first == 1 ? std::string("ideal: dp at P=1, divided by P")
                                 : "ideal: dp at P=" + std::to_string(p_first) + " x " + std::to_string(p_first) + "/P";
      ideal.style = "with lines lw 1 dt 3 lc rgb \"#000000\"";
      for (int P : worlds) ideal.rows.push_back({double(P), dp_first * p_first / P});
      p.series.push_back(ideal);
    }
    figs.push_back(draw(c, p,
                        weak ? "Weak scaling (fixed tokens per rank): throughput per rank; flat is ideal."
                             : "Strong scaling (fixed total tokens): time against ranks; the dotted line is ideal.",
                        ""));
  }
  return figs;
}

// Per rank: the forward and backward passes' time, or (comm) the communication stream's spans but the passes and
// chunk_cumsum (local compute that zeco and lasp2 put there only to overlap it with the boundary kernel); the rank
// where it is largest.
double slowest_rank_us(const std::vector<const Row*>& rows, bool comm) {
  std::map<int, double> per_rank;
  for (auto* r : rows) {
    const std::string span = col(*r, "span"), stream = col(*r, "stream");
    const bool pass = span == "forward" || span == "backward";
    if (comm ? (stream == "comm" && !pass && span != "cumsum") : pass)
      per_rank[inum(*r, "rank")] += num(*r, "end_us") - num(*r, "start_us");
  }
  double m = 0;
  for (auto& [rank, us] : per_rank) m = std::max(m, us);
  return m;
}

// The name of a timeline run for a method and its order (the `overlap` column): "zeco", "zeco_overlap" (1: the output
// corrected after), "zeco_beside" (2: the chunk states beside the communication).
std::string run_name(const std::string& method, const std::string& overlap) {
  return method + (overlap == "1" ? "_overlap" : overlap == "2" ? "_beside" : "");
}
std::string order_note(const std::string& overlap) {
  return overlap == "0" || overlap.empty() ? "" : " (--overlap " + overlap + ")";
}

// The timeline runs the report shows: one per method and order ("zeco", "zeco_overlap", ...) at one setting (GPUs
// first, then the largest world size, then the newest), each the newest at that setting, with its iterations (the
// `iteration` column; files written before it have one) and its key: method, backend, world_size, tokens_per_rank,
// heads, dk, dv, gpu, git_sha, date, overlap.
struct TimelineRun {
  std::vector<std::string> key;
  std::vector<std::vector<const Row*>> iterations;
  // The iteration whose forward + backward (slowest rank) is the median one: the one a plot shows.
  const std::vector<const Row*>& typical() const {
    std::vector<std::pair<double, size_t>> t;
    for (size_t i = 0; i < iterations.size(); ++i) t.push_back({slowest_rank_us(iterations[i], false), i});
    std::sort(t.begin(), t.end());
    return iterations[t[(t.size() - 1) / 2].second];
  }
  // The median over the iterations of slowest_rank_us.
  double median_us(bool comm) const {
    std::vector<double> t;
    for (auto& rows : iterations) t.push_back(slowest_rank_us(rows, comm));
    std::sort(t.begin(), t.end());
    return t.size() % 2 ? t[t.size() / 2] : (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2;
  }
};
std::map<std::string, TimelineRun> timeline_runs(const Context& c) {
  std::map<std::string, TimelineRun> out;
  if (c.res.timeline.empty()) return out;
  // Runs: rows sharing these columns, then their iterations. Prefer GPUs, then the largest world size, the newest.
  const std::vector<std::string> id_cols = {"method", "backend", "world_size", "tokens_per_rank", "heads", "dk", "dv",
                                            "gpu", "git_sha", "date"};
  std::map<std::vector<std::string>, std::map<long, std::vector<const Row*>>> runs;
  for (auto& r : c.res.timeline) {
    std::vector<std::string> k;
    for (auto& cname : id_cols) k.push_back(col(r, cname));
    runs[k][std::atol(col(r, "iteration").c_str())].push_back(&r);
  }
  // Which order zeco and lasp2 ran in (k[10]): the `overlap` column, or for rows written before it existed, whether
  // the run corrected its output after the communication (only the overlapped order has apply_initial).
  std::map<std::vector<std::string>, std::map<long, std::vector<const Row*>>> keyed;
  for (auto& [k, its] : runs) {
    const auto& first = its.begin()->second;
    std::string overlap = col(*first.front(), "overlap");
    if (overlap.empty()) {
      overlap = "0";
      for (auto* r : first)
        if (col(*r, "span") == "apply_initial" && (k[0] == "zeco" || k[0] == "lasp2")) overlap = "1";
    }
    auto k2 = k;
    k2.push_back(overlap);
    keyed[k2] = its;
  }
  runs.swap(keyed);
  auto rank_of = [&](const std::vector<std::string>& k) {
    return std::make_tuple(k[1] != "cpu", std::atoi(k[2].c_str()), std::atoll(k[3].c_str()), k[9]);
  };
  const std::vector<std::string>* best = nullptr;
  for (auto& [k, its] : runs)
    if (!best || rank_of(*best) <= rank_of(k)) best = &k;
  // One per method and order at the chosen setting (its newest run); the backend may differ by method (zeco's device
  // All-Scan), CPU against GPU may not.
  std::map<std::string, const std::vector<std::string>*> per_method;
  for (auto& [k, its] : runs) {
    bool same = (k[1] == "cpu") == ((*best)[1] == "cpu");
    for (size_t i : {2, 3, 4, 5, 6, 7}) same &= k[i] == (*best)[i];
    if (!same) continue;
    auto& slot = per_method[run_name(k[0], k[10])];
    if (!slot || (*slot)[9] <= k[9]) slot = &k;
  }
  for (auto& [method, kp] : per_method) {
    TimelineRun& run = out[method];
    run.key = *kp;
    for (auto& [it, rows] : runs[*kp]) run.iterations.push_back(rows);
  }
  return out;
}

// The overlap timeline of one iteration: every rank's compute and communication streams.
std::vector<Figure> plot_timelines(Context& c) {
  std::vector<Figure> figs;
  for (auto& [method, run] : timeline_runs(c)) {
    const auto& rows = run.typical();
    int ranks = 0;
    std::set<std::string> names;
    bool second = false;  // a lane for the second compute stream where a span is on it (zeco's head groups)
    for (auto* r : rows) {
      ranks = std::max(ranks, inum(*r, "rank") + 1);
      names.insert(col(*r, "span"));
      second |= col(*r, "stream") == "compute2";
    }
    const double per_rank = second ? 4.5 : 3.5, comm_lane = second ? 3 : 2;
    // A span that contains another span of its rank and stream is a whole pass: drawn on its own thin lane.
    auto outer = [&](const Row* a) {
      for (auto* b : rows)
        if (b != a && col(*b, "rank") == col(*a, "rank") && col(*b, "stream") == col(*a, "stream") &&
            num(*b, "start_us") >= num(*a, "start_us") && num(*b, "end_us") <= num(*a, "end_us") &&
            !(num(*b, "start_us") == num(*a, "start_us") && num(*b, "end_us") == num(*a, "end_us")))
          return true;
      return false;
    };
    std::map<std::string, PlotSeries> series;
    int colour = 0;
    std::map<std::string, int> colour_of;
    for (auto& n : names) colour_of[n] = colour++;
    for (auto* r : rows) {
      const int rank = inum(*r, "rank");
      const std::string stream = col(*r, "stream");
      const bool pass = outer(r), comm = stream == "comm", on_second = stream == "compute2";
      const double lane = rank * per_rank + (pass ? 0 : comm ? comm_lane : on_second ? 2 : 1);
      const double a = num(*r, "start_us") / 1e3, b = num(*r, "end_us") / 1e3;
      const std::string title = col(*r, "span") + (pass     ? " (pass)"
                                                   : comm   ? " (comm stream)"
                                                   : on_second ? " (second compute stream)"
                                                            : " (compute stream)");
      PlotSeries& s = series[title];
      s.title = title;
      s.using_ = "1:2:3:4";
      s.style = pass ? "with boxxyerror fs solid 0.2 border " + colour_spec(colour_of[col(*r, "span")]) + " " +
                           colour_spec(colour_of[col(*r, "span")])
                     : series_style(SeriesKind::bars, colour_of[col(*r, "span")]);
      s.rows.push_back({(a + b) / 2, lane, (b - a) / 2, pass ? 0.2 : 0.4});
    }
    PlotSpec p;
    p.name = "timeline_" + method;
    const auto& k = run.key;
    const std::string order = order_note(k[10]);
    p.title = "One iteration of " + k[0] + order + " on " + k[2] + " " + (k[1] == "cpu" ? "CPU ranks" : k[7] + " GPUs") + " (" +
              k[3] + " tokens per rank, H=" + k[4] + ", dk=" + k[5] + ", dv=" + k[6] + ", " + k[9].substr(0, 10) + ")";
    p.xlabel = "time since the iteration started (ms)";
    p.ylabel = "";
    p.key = "outside right top";
    p.height = std::max(360, 120 + ranks * (second ? 110 : 90));
    std::string tics;
    for (int r = 0; r < ranks; ++r) {
      const std::string rank = "\"rank " + std::to_string(r);
      tics += (r ? ", " : "") + rank + " pass\" " + fmt("%g", r * per_rank) + ", " + rank + " compute\" " +
              fmt("%g", r * per_rank + 1) + ", " + rank + " comm\" " + fmt("%g", r * per_rank + comm_lane);
      if (second) tics += ", " + rank + " compute 2\" " + fmt("%g", r * per_rank + 2);
    }
    p.extra = "set ytics (" + tics + ")\nset yrange [" + fmt("%g", ranks * per_rank - 0.8) +
              ":-0.8]\nset grid x\nunset grid\nset grid xtics\n";
    for (auto& [t, s] : series) p.series.push_back(s);
    figs.push_back(draw(c, p,
                        "The overlap timeline of one " + k[0] + order + " iteration on " + k[2] + " " +
                            (k[1] == "cpu" ? "CPU ranks (their streams run one after the other: this shows the "
                                             "pipeline, not GPU overlap)"
                                           : k[7] + " GPUs") +
                            (run.iterations.size() > 1
                                 ? " (the median of " + std::to_string(run.iterations.size()) + " recorded)"
                                 : std::string()) +
                            ": the spans of every rank's compute and communication streams (results/*timeline*.csv).",
                        ""));
  }
  return figs;
}

// What the timelines say of each method's communication: its iterations against dp's at the same setting, beside the
// time of its communication spans. The excess over dp is what the overlap did not hide (communication, hand-offs,
// extra kernels). Medians over each run's iterations (one in files written before the `iteration` column), since a
// single iteration moves by some microseconds (a late host launch on one rank shows in it).
std::string section_exposed(const Context& c) {
  const auto runs = timeline_runs(c);
  const auto dp = runs.find("dp");
  if (dp == runs.end() || runs.size() < 2) return "";
  const double dp_us = dp->second.median_us(false);
  const auto& k = dp->second.key;
  std::ostringstream s;
  s << "#### Exposed communication (from the timelines above)\n\n"
    << "Each method's recorded iterations on " << k[2] << " " << (k[1] == "cpu" ? "CPU ranks" : k[7] + " GPUs")
    << ", " << k[3] << " tokens per rank: the median over its iterations of the forward + backward of the slowest rank, "
    << "its excess over dp's median (" << fmt("%.1f", dp_us) << " us, " << dp->second.iterations.size()
    << (dp->second.iterations.size() == 1 ? " iteration" : " iterations") << "), and the median of the communication spans of the rank where they took longest (waiting for peers "
       "included; chunk_cumsum, which zeco and lasp2 run on the communication stream beside the boundary kernel, is not "
       "one). The excess is the communication, stream hand-offs and extra kernels that the overlap did not hide.\n\n"
    << "| method | iterations | forward + backward (us) | over dp (us) | communication spans (us) | over dp ÷ "
       "communication |\n"
    << "|---|---|---|---|---|---|\n";
  for (auto& [method, run] : runs) {
    if (method == "dp") continue;
    const double t = run.median_us(false), comm_us = run.median_us(true);
    s << "| " << method << " | " << run.iterations.size() << " | " << fmt("%.1f", t) << " | " << fmt("%.1f", t - dp_us)
      << " | " << fmt("%.1f", comm_us) << " | " << (comm_us > 0 ? fmt("%.0f %%", 100 * (t - dp_us) / comm_us) : "—")
      << " |\n";
  }
  return s.str() + "\n";
}

std::string figure_md(const Figure& f) {
  if (!f.missing.empty()) return "- *" + f.caption + "* Not drawn: " + f.missing + ".\n";
  return "![" + f.caption + "](plots/" + f.name + ".png)\n\n" + f.caption + " ([SVG](plots/" + f.name +
         ".svg), [data](plots/" + f.name + ".dat), [script](plots/" + f.name + ".gp))\n\n";
}

// --- sections ---------------------------------------------------------------------------------------------------------
std::string section_data(const Context& c) {
  std::ostringstream s;
  s << "## Data\n\n";
  if (c.res.files.empty() && c.res.timeline_files.empty())
    s << "No result CSVs in `results/` yet: every table below shows the paper's numbers only, and no plot is drawn. "
         "Run a sweep (see the repository's README) and regenerate.\n\n";
  for (auto& [name, n] : c.res.files) s << "- `results/" << name << "`: " << n << " rows\n";
  for (auto& [name, n] : c.res.timeline_files) s << "- `results/" << name << "`: " << n << " timeline spans\n";
  for (auto& [name, why] : c.res.skipped) s << "- `results/" << name << "`: skipped, " << why << "\n";
  std::map<std::tuple<std::string, std::string, std::string>, int> counts;  // (level, gpu, backend)
  for (auto& r : c.res.rows) counts[{col(r, "level"), col(r, "gpu"), col(r, "backend")}]++;
  if (!counts.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (auto& [k, n] : counts) rows.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::to_string(n)});
    s << "\n" << md_table({"level", "gpu", "backend", "rows"}, rows, "lllr");
  }
  s << "\n";
  return s.str();
}

std::string gpu_table(Context& c, const TableDef& t, const std::string& heading, const std::string& setting,
                      const std::string& value) {
  std::ostringstream s;
  s << "## " << heading << "\n\n" << setting << "\n\n";
  const auto lines = build_lines(c, t);
  write_table_csv(c, t.id, lines);
  if (lines.empty()) {
    s << "Nothing at this setting yet: no GPU rows, no model fit, and the paper's numbers are " << kNotPublished
      << ".\n\n";
    return s.str();
  }
  s << render_lines(lines, t.ref, value) << "\n";
  s << "Against the paper:\n\n" << trend_paragraph(lines, t, c.params) << "\n";
  return s.str();
}

std::string link_str(const Link& l) {
  return fmt("%.3g", l.alpha_s * 1e6) + " us, " + (std::isfinite(l.beta_Bps) ? fmt("%.4g", l.beta_Bps / 1e9) : "inf") + " GB/s";
}

std::string fits_table(const MachineFit& f) {
  std::vector<std::vector<std::string>> rows;
  for (auto& p : f.patterns)
    rows.push_back({p.pattern, p.backend, std::to_string(p.fit.points),
                    p.fit.ok ? fmt("%.3g", p.fit.link.alpha_s * 1e6) : "—",
                    p.fit.ok && std::isfinite(p.fit.link.beta_Bps)
                        ? fmt("%.4g", p.fit.link.beta_Bps / 1e9) + (p.beta_from.empty() ? "" : " (from " + p.beta_from + ")")
                        : "—",
                    p.fit.ok ? fmt("%.1f%%", 100 * p.fit.rms_rel_residual) : "too few points",
                    p.holdout_points ? fmt("%.1f%%", 100 * p.holdout_median_rel) + " / " +
                                           fmt("%.1f%%", 100 * p.holdout_max_rel) + " (" +
                                           std::to_string(p.holdout_points) + " points)"
                                     : "—"});
  return md_table({"pattern", "backend", "points", "alpha (us)", "beta (GB/s)", "RMS residual of the fit",
                   "hold-out error, median / max"},
                  rows, "llrrrrr");
}

// --- the model level (Tables 5 and 6) ---------------------------------------------------------------------------------
// The cost model carried to the model level at one tokens-per-GPU (cost_model.h: step(P) = T_compute + layers x the
// attention's excess over dp + the gradient all-reduce): what the prediction rests on, or why there is none.
struct ModelLevelFit {
  std::string why;          // not empty: no prediction, and why
  const Row* dp = nullptr;  // the dp row T_compute comes from
  CostModel cm;             // the links of the reference GPU and the dp kernel at the per-layer shape
  OperatorShape layer;      // one block's attention (world set per prediction)
  int layers = 0;
  double grad_bytes = 0, allreduce_dp_s = 0, compute_s = 0, tokens_per_step = 0;
  std::string kernel_basis;  // where the per-layer dp kernel time comes from
  // tokens/s per GPU, or NaN with the reason.
  std::pair<double, std::string> predict(const std::string& method, int P) const {
    if (!why.empty()) return {NAN, why};
    if (std::find(model_methods().begin(), model_methods().end(), method) == model_methods().end())
      return {NAN, "no formula"};
    OperatorShape s = layer;
    s.world = P;
    if (method == "ulysses" && s.heads % P != 0)
      return {NAN, "n/a (H=" + std::to_string(s.heads) + " not divisible by P)"};
    auto t = cm.model_step_time(method, s, layers, grad_bytes, compute_s);
    if (!t) return {NAN, "no fit (a pattern it needs was not measured)"};
    return {tokens_per_step / *t, ""};
  }
};

double tokens_per_s(const Row& r) { return num(r, "tokens_per_s_per_gpu"); }

ModelLevelFit fit_model_level(const Context& c, long long L) {
  ModelLevelFit f;
  if (!c.gpu_fit) {
    f.why = no_fit(c, "").second;
    return f;
  }
  // T_compute from dp's step: the paper's configuration first, then the fewest ranks (the least all-reduce), then the
  // newest row.
  for (const Row* r : model_rows_shown(c.res.rows, L, false)) {
    if (col(*r, "method") != "dp") continue;
    if (!f.dp || std::make_tuple(paper_model_config(*r), -lnum(*r, "world_size"), col(*r, "date")) >
                     std::make_tuple(paper_model_config(*f.dp), -lnum(*f.dp, "world_size"), col(*f.dp, "date")))
      f.dp = r;
  }
  if (!f.dp) {
    f.why = "no fit (no dp row at " + std::to_string(L) + " tokens per GPU)";
    return f;
  }
  const Row& dp = *f.dp;
  OperatorShape& s = f.layer;
  s.batch = inum(dp, "batch"), s.heads = inum(dp, "heads"), s.dk = inum(dp, "dk"), s.dv = inum(dp, "dv");
  s.tokens_per_rank = L, s.act_bytes = col(dp, "dtype") == "fp32" ? 4 : 2;
  s.block_bytes = 4.0 * kPaperBlockElems;
  for (const Row* r : model_rows_shown(c.res.rows, L, false))  // zeco's block as measured at this configuration
    if (col(*r, "method") == "zeco" && model_config_key(*r) == model_config_key(dp) && num(*r, "block_elems") > 0)
      s.block_bytes = 4 * num(*r, "block_elems");
  f.layers = inum(dp, "layers");
  f.grad_bytes = 4 * num(dp, "params");
  f.tokens_per_step = double(s.batch) * double(L);
  if (!(f.grad_bytes > 0) || f.layers < 1 || s.heads < 1 || s.dk < 1 || s.dv < 1 || s.batch < 1) {
    f.why = "no fit (the dp row lacks params, layers or its shape)";
    return f;
  }
  f.cm = c.gpu_fit->model_for(c.res.rows, s.batch, s.heads, s.dk, s.dv, col(dp, "dtype"));
  if (f.cm.fwd_bwd.ok) {
    f.kernel_basis = "fitted to the dp operator rows at this shape";
  } else {
    // Not measured at the per-layer shape: the operator tables' dp kernel, scaled by the attention's work per token.
    const CostModel ref = c.gpu_fit->model_for(c.res.rows, 1, 16, 128, 128, "bf16");
    if (!ref.fwd_bwd.ok) {
      f.why = "no fit (no dp operator rows to time the attention)";
      return f;
    }
    OperatorShape ref_shape;
    ref_shape.batch = 1, ref_shape.heads = 16, ref_shape.dk = 128, ref_shape.dv = 128;
    const int chunk = lnum(dp, "chunk") > 0 ? inum(dp, "chunk") : 64;
    const double factor = s.work_per_token(chunk) / ref_shape.work_per_token(chunk);
    f.cm.fwd_bwd = ref.fwd_bwd.scaled(factor);
    if (ref.fwd.ok) f.cm.fwd = ref.fwd.scaled(factor);
    f.cm.local_overhead = ref.local_overhead;
    f.kernel_basis = "the operator tables' dp kernel (H=16, dk=dv=128, bf16) scaled by the attention's work per token "
                     "(B H (4 dk dv + chunk (dk + dv)), chunk " + std::to_string(chunk) + "): x" + fmt("%.3g", factor);
  }
  const int P0 = inum(dp, "world_size");
  auto ar = f.cm.allreduce(P0, f.grad_bytes);
  if (!ar) {
    f.why = "no fit (no all-gather or ring rows for the all-reduce's link)";
    return f;
  }
  f.allreduce_dp_s = *ar;
  f.compute_s = ms(dp) * 1e-3 - *ar;
  if (!(f.compute_s > 0)) f.why = "no fit (dp's step is shorter than the modelled all-reduce)";
  return f;
}

// The lines of Table 5 or 6 (or of a CPU-rank model table: `cpu`, no paper, no prediction): per GPU count and method,
// the row shown, the prediction, the paper's number, and each one's share of dp's throughput.
std::vector<Line> model_lines(const Context& c, long long L, bool cpu, const ModelLevelFit& fit,
                              const std::string& config = "") {
  std::vector<const Row*> shown;
  if (config.empty()) {
    shown = model_rows_shown(c.res.rows, L, cpu);
  } else {  // one configuration's table: its newest row per method, world size and backend
    auto keep = [&](const Row& r) {
      return col(r, "level") == "model" && is_cpu_row(r) && lnum(r, "tokens_per_rank") == L &&
             tokens_per_s(r) > 0 && model_config_key(r) == config;
    };
    auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "world_size") + "|" + col(r, "backend"); };
    for (auto& [k, r] : newest_by(c.res.rows, keep, key)) shown.push_back(r);
  }
  const auto methods = operator_methods(c);  // the model's methods, the registered ones and any measured
  std::set<int> gpus;
  for (const Row* r : shown) gpus.insert(inum(*r, "world_size"));
  if (!cpu) {
    for (auto& v : c.paper)
      if (v.level == "model" && v.seq_per_gpu == L) gpus.insert(v.gpus);
    if (fit.why.empty()) gpus.insert(kPredictGpus.begin(), kPredictGpus.end());
  }
  std::vector<Line> lines;
  for (int P : gpus) {
    const double paper_dp = cpu ? NAN : paper_value(c.paper, "model", P, L, "dp");
    const double model_dp = cpu ? NAN : fit.predict("dp", P).first;
    bool paper_row = false;
    for (auto& m : methods) paper_row |= !cpu && std::isfinite(paper_value(c.paper, "model", P, L, m));
    for (auto& m : methods) {
      Line base;
      base.gpus = P, base.method = m;
      base.paper = cpu ? NAN : paper_value(c.paper, "model", P, L, m);
      if (!cpu) std::tie(base.model, base.model_note) = fit.predict(m, P);
      base.r_paper = base.paper / paper_dp;
      base.r_model = base.model / model_dp;
      std::vector<Line> mine;
      for (const Row* r : shown)
        if (col(*r, "method") == m && inum(*r, "world_size") == P) {
          Line l = base;
          l.row = r, l.measured = tokens_per_s(*r);
          const Row* d = model_dp_row(c.res.rows, *r);
          l.r_measured = d ? l.measured / tokens_per_s(*d) : NAN;
          mine.push_back(l);
        }
      // Unmeasured lines where there is something to say: a prediction (or why there is none, once a fit exists), or
      // a GPU count the paper published.
      const bool said = std::isfinite(base.model) || (fit.why.empty() && !base.model_note.empty());
      if (mine.empty() && !cpu && (said || std::isfinite(base.paper) || paper_row)) mine.push_back(base);
      lines.insert(lines.end(), mine.begin(), mine.end());
    }
  }
  return lines;
}

void write_model_table_csv(const Context& c, const std::string& id, const std::vector<Line>& lines) {
  std::ofstream f(c.tables_dir + "/" + id + ".csv");
  f << "gpus,method,measured_tokens_per_s_per_gpu,measured_gpu,measured_world_size,measured_backend,measured_date,"
       "measured_config,model_tokens_per_s_per_gpu,paper_tokens_per_s_per_gpu,ratio_measured,ratio_model,ratio_paper\n";
  auto n = [](double v) { return std::isfinite(v) ? fmt("%.6g", v) : std::string(); };
  for (const Line& l : lines)
    f << l.gpus << "," << l.method << "," << n(l.measured) << "," << (l.row ? csv_field(col(*l.row, "gpu")) : "") << ","
      << (l.row ? col(*l.row, "world_size") : "") << "," << (l.row ? col(*l.row, "backend") : "") << ","
      << (l.row ? col(*l.row, "date") : "") << "," << (l.row ? csv_field(model_config_str(*l.row)) : "") << ","
      << n(l.model) << "," << n(l.paper) << "," << n(l.r_measured) << "," << n(l.r_model) << "," << n(l.r_paper)
      << "\n";
}

Figure plot_model_throughput(Context& c, long long L, const ModelLevelFit& fit, const std::vector<Line>& lines) {
  std::map<std::string, PlotSeries> series;
  const auto methods = operator_methods(c);
  for (const Line& l : lines) {
    if (!l.row) continue;
    const std::string title = series_label(l.method, *l.row);
    PlotSeries& s = series[order_key(methods, l.method, title)];
    s.title = title;
    s.style = series_style(SeriesKind::measured, method_colour(l.method), backend_point(col(*l.row, "backend")));
    s.rows.push_back({double(l.gpus), l.measured});
  }
  PlotSpec p;
  p.name = "model_throughput_L" + std::to_string(L);
  p.title = "Model-level training throughput vs GPUs (GLA LM, " + std::to_string(L) + " tokens per GPU)";
  p.xlabel = "GPUs";
  p.ylabel = "throughput per GPU (tokens/s)";
  p.logx = true;
  p.extra = "set yrange [0:*]\nset format y \"%.1s%c\"\n";
  for (auto& [k, s] : series) p.series.push_back(s);
  if (fit.why.empty())
    for (const std::string& m : methods) {
      PlotSeries s;
      s.title = m + " model prediction";
      s.style = series_style(SeriesKind::model, method_colour(m));
      std::vector<int> ps = {1};
      for (int P : model_gpus(false, 0)) ps.push_back(P);
      for (int P : ps) {
        const double v = fit.predict(m, P).first;
        if (std::isfinite(v)) s.rows.push_back({double(P), v});
      }
      if (s.rows.size() >= 2) p.series.push_back(s);  // a line needs two points
    }
  for (const std::string& m : methods) {
    PlotSeries s;
    s.title = "paper " + m + " (H100)";
    s.style = series_style(SeriesKind::paper, method_colour(m));
    for (int P : kPredictGpus) {
      const double v = paper_value(c.paper, "model", P, L, m);
      if (std::isfinite(v)) s.rows.push_back({double(P), v});
    }
    if (!s.rows.empty()) p.series.push_back(s);
  }
  return draw(c, p,
              "Training throughput per GPU against GPUs, " + std::to_string(L) +
                  " tokens per GPU: measured (solid), the cost model carried to the model level (dashed, a model "
                  "prediction), the paper's model table (circles).",
              "no GPU model rows at " + std::to_string(L) + " tokens per GPU yet");
}

std::string section_model_level(Context& c, long long L, const std::string& table) {
  std::ostringstream s;
  s << "## Table " << table << ": model-level training throughput, " << L << " tokens per GPU\n\n"
    << "GLA language-model training (`spbench model`; the paper's GLA-1B: H=32, 20 layers, hidden 2048), one step = "
       "forward + backward + gradient all-reduce + AdamW; tokens per second per GPU. Each measured row is the newest of "
       "its method, world size, GPU and backend, at the paper's configuration where one was measured (its "
       "configuration is in the table). Ratios are method ÷ dp at the same world size (for measured rows: dp's row of "
       "the same machine and configuration; higher is better, dp is the ideal).\n\n";
  const ModelLevelFit fit = fit_model_level(c, L);
  const auto lines = model_lines(c, L, false, fit);
  write_model_table_csv(c, table == "5" ? "table5" : "table6", lines);
  bool measured = false;
  for (const Line& l : lines) measured |= l.row != nullptr;
  if (!measured) s << "**Not measured yet**: results/ holds no GPU rows of level `model` at this setting.\n\n";
  if (lines.empty()) {
    s << "The paper's numbers at this setting are " << kNotPublished << ", and there is no model prediction.\n\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const Line& l : lines)
      rows.push_back({std::to_string(l.gpus), l.method, l.row ? num_cell(l.measured) : kNotMeasured,
                      l.row ? model_config_str(*l.row) : "—", l.row ? machine_of(*l.row) : "—",
                      std::isfinite(l.model) ? num_cell(l.model) : fit.why.empty() ? l.model_note : "—",
                      std::isfinite(l.paper) ? num_cell(l.paper) : kNotPublished, ratio_cell(l.r_measured),
                      ratio_cell(l.r_model), ratio_cell(l.r_paper), versus_cell(l, "dp")});
    s << md_table({"GPUs", "method", "measured (tokens/s/GPU)", "configuration",
                   "measured on (gpu, world size, backend, date)", "model prediction (tokens/s/GPU)",
                   "paper (tokens/s/GPU)", "÷ dp: measured", "÷ dp: model", "÷ dp: paper", "ours ÷ paper (ratios)"},
                  rows, "rlrllrrrrrl")
      << "\n";
    TableDef t;
    t.ref = "dp";
    for (const Line& l : lines)
      if (std::find(t.methods.begin(), t.methods.end(), l.method) == t.methods.end()) t.methods.push_back(l.method);
    s << "Against the paper:\n\n" << trend_paragraph(lines, t, c.params, "throughput") << "\n";
  }
  s << "**Model prediction** (the cost model carried to the model level, not a measurement): step time(P) = dp's "
       "measured step time, less its own modelled gradient all-reduce (T_compute: every token-local part of the step) "
       "+ layers x (the operator-level cost model's time of the method's attention forward + backward at P at the "
       "model's per-layer shape, less dp's: its exposed communication and extra local work) + the gradient all-reduce "
       "at P (a ring all-reduce of 4 x params bytes of fp32 gradients: 2 (P-1)/P x bytes / bandwidth + 2 (P-1) x "
       "latency, over NVLink inside a node of "
    << c.params.gpus_per_node << " and the network beyond); throughput = B x tokens per GPU / step time. ";
  if (!fit.why.empty()) {
    s << "Not predicted here: " << fit.why << ".\n\n";
  } else {
    const Row& dp = *fit.dp;
    s << "Here: dp's step " << num_cell(ms(dp)) << " ms on " << machine_of(dp) << " (" << model_config_str(dp)
      << "), of which the modelled all-reduce of " << num_cell(fit.grad_bytes / 1048576) << " MiB is "
      << num_cell(fit.allreduce_dp_s * 1e3) << " ms, so T_compute = " << num_cell(fit.compute_s * 1e3) << " ms; "
      << fit.layers << " layers of attention at B=" << fit.layer.batch << ", H=" << fit.layer.heads
      << ", dk=" << fit.layer.dk << ", dv=" << fit.layer.dv << " (zeco's All-Scan block "
      << int_str(fit.layer.block_bytes / 4) << " elements), the dp kernel time " << fit.kernel_basis
      << "; the links fitted on " << c.ref_gpu << " (the cost model section), the network "
      << link_str(c.params.network) << " (a parameter, not measured).\n\n";
  }
  if (!lines.empty()) s << figure_md(plot_model_throughput(c, L, fit, lines)) << "\n";
  return s.str();
}

// The CPU-rank model rows: a table per (configuration, tokens per rank), with the last step's loss (equal losses
// across world sizes and methods are the SP equivalence that the model level's tests check).
std::string section_cpu_model(const Context& c) {
  std::set<std::pair<std::string, long long>> configs;
  std::map<std::string, const Row*> example;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "model" && is_cpu_row(r) && tokens_per_s(r) > 0) {
      configs.insert({model_config_key(r), lnum(r, "tokens_per_rank")});
      example[model_config_key(r)] = &r;
    }
  std::ostringstream s;
  std::set<std::string> ids;
  for (auto& [config, L] : configs) {
    const auto lines = model_lines(c, L, true, ModelLevelFit{}, config);
    s << "### Model-level training, " << model_config_str(*example[config]) << ", " << L << " tokens per rank\n\n"
      << "Tokens per second per rank of one training step (`spbench model` on CPU ranks), and the last step's loss: "
         "every method and world size trains the same model on the same tokens, so a correct SP method ends with dp's "
         "loss (the SP equivalence). No model prediction at this level on CPU ranks.\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const Line& l : lines)
      rows.push_back({std::to_string(l.gpus), l.method, num_cell(l.measured), machine_of(*l.row),
                      num_cell(num(*l.row, "loss")), ratio_cell(l.r_measured)});
    s << md_table({"ranks", "method", "measured (tokens/s per rank)", "measured on (gpu, world size, backend, date)",
                   "loss (last step)", "÷ dp: measured"},
                  rows, "rlrlrr")
      << "\n";
    const Row& e = *example[config];
    std::string id = "cpu_model_B" + col(e, "batch") + "_H" + col(e, "heads") + "_hidden" + col(e, "hidden") +
                     "_layers" + col(e, "layers") + "_L" + std::to_string(L);
    if (!ids.insert(id).second) id += "_" + std::to_string(ids.size());
    write_model_table_csv(c, id, lines);
  }
  return s.str();
}

std::string section_cost_model(const Context& c) {
  std::ostringstream s;
  const ModelParams& p = c.params;
  s << "## The cost model\n\n"
    << "An alpha-beta model (`report/src/cost_model.h`): a hop of b bytes takes alpha + b / beta. Inside a node of "
    << p.gpus_per_node << " GPUs the link is NVLink with alpha and beta fitted by least squares (on relative error) to "
    << "the measured collective rows, one fit per pattern and backend; between nodes it is the network, a parameter: "
    << link_str(p.network) << " (" << fmt("%g", p.network.beta_Bps * 8 / 1e9) << " Gb/s). The operator level adds the "
    << "local dp time per token, fitted to the dp rows. The formulas (P ranks, state S, K blocks of b bytes):\n\n"
    << "- All-Scan: (P-1) hops of one block + the rest of the state through the slowest link: "
       "sum_h hop_h(b) + (K-1) max_h hop_h(b)\n"
    << "- chain (LASP-1): (P-1) x hop(S), in series\n"
    << "- all-gather (LASP-2): ring all-gather of P records of S (1 + 1/dv): (P-1) steps through the slowest link\n"
    << "- ring: (P-1) rotation steps of S; all-to-all: S/P to each of the P-1 others\n"
    << "- operator: dp = t0 + t_token L; every other method's local compute = dp x (1 + its local overhead, its "
       "one-rank time over dp's, measured); lasp1 = P x dp + 2 chains (serial, as implemented: a rank computes after "
       "its predecessor); zeco and lasp2 = local + per pass the collective minus what " << fmt("%g", 100 * p.overlap_fraction)
    << "% of the pass's compute hides; ring = local + per pass (P-1) x max(step transfer, " << fmt("%g", 100 * p.ring_step_fraction)
    << "% of the pass's compute); ulysses = local + the all-to-alls of q,k,v,g,o and their gradients (H must divide by P)\n\n";
  if (c.gpu_fit) {
    s << "GPU predictions are fitted on **" << c.ref_gpu << "**:\n\n" << fits_table(*c.gpu_fit) << "\n";
    const CostModel cm = c.gpu_fit->model_for(c.res.rows, 1, 16, 128, 128, "bf16");
    if (cm.fwd_bwd.ok)
      s << "dp kernel (H=16, dk=dv=128, bf16), forward+backward: " << fmt("%.4g", cm.fwd_bwd.t0_s * 1e3) << " ms + "
        << fmt("%.4g", cm.fwd_bwd.per_token_s * 1e9) << " ns per token (" << cm.fwd_bwd.points << " points).\n\n";
    if (cm.fwd_bwd.ok && !cm.local_overhead.empty()) {
      s << "Local overhead over dp, each method on one GPU (its extra passes, no communication):";
      for (auto& [m, ov] : cm.local_overhead) s << " " << m << " " << fmt("%+.0f%%", 100 * ov) << ";";
      s << "\n\n";
    }
    if (!cm.fwd_bwd.ok)
      s << "No dp operator rows at H=16, dk=dv=128, bf16 on this machine: no operator predictions.\n\n";
  } else {
    s << "**No GPU rows yet: nothing to fit, so the GPU tables carry no model predictions.** ";
  }
  if (c.cpu_fit) {
    s << "For the CPU-rank section the same model is fitted to the CPU rows (where more ranks run than the machine has "
         "cores they time-share the cores, which no alpha-beta link describes: large residuals there are expected):\n\n"
      << fits_table(*c.cpu_fit) << "\n";
  }
  s << "A beta marked \"from\" another pattern: this pattern was measured at one block size only, which fixes "
       "alpha + block / beta but not the two apart, so beta is taken from that pattern on the same machine and only "
       "alpha is fitted.\n\n";
  s << "Hold-out: each pattern is fitted again on the smaller half of its measured sizes and predicts the larger half, "
       "which it was not fitted on; the error is |predicted - measured| / measured. The test "
       "`tests/report/test_cost_model.cpp` checks every formula against hand-computed values, recovers a known alpha "
       "and beta exactly from synthetic times, and on a committed CPU-rank fixture (a real `spbench collective` run) "
       "fits the 2-rank rows up to 512 KiB and predicts the 1 and 2 MiB rows within 50% each (median within 25%).\n\n";
  return s.str();
}

std::string section_cpu(Context& c, const std::vector<Figure>& figs) {
  std::ostringstream s;
  s << "## CPU ranks: the pipeline works (not comparable with the paper)\n\n";
  bool any = false;
  for (auto& r : c.res.rows) any |= is_cpu_row(r);
  if (!any) {
    s << "No CPU-rank rows in results/.\n\n";
    return s.str();
  }
  s << "Rows measured on CPU ranks (MPI processes, fp32, small shapes). They exercise every method, the checks, the "
       "cost model's fit and this report; their times say nothing about GPUs. Model predictions here come from the "
       "fit to the CPU rows themselves.\n\n";
  // Operator: one table per (shape, tokens per rank).
  std::set<std::pair<Shape, long long>> configs;
  for (auto& r : c.res.rows)
    if (operator_row(r, true)) configs.insert({shape_of(r), lnum(r, "tokens_per_rank")});
  for (auto& [shape, L] : configs) {
    TableDef t;
    t.id = "cpu_operator_" + shape.tag() + "_L" + std::to_string(L);
    t.ref = "dp";
    t.cpu = true;
    t.methods = operator_methods(c);
    t.setting = [shape = shape, L = L](const Row& r) {
      const Shape sh = shape_of(r);
      return operator_row(r, true) && !(sh < shape) && !(shape < sh) && is(r, "tokens_per_rank", double(L));
    };
    double block_elems = 0;
    for (auto& r : c.res.rows)
      if (is_cpu_row(r) && t.setting(r) && col(r, "method") == "zeco") block_elems = num(r, "block_elems");
    t.model = [&c, shape = shape, L = L, block_elems](const std::string& m, int P) -> std::pair<double, std::string> {
      if (!c.cpu_fit) return {NAN, "no fit"};
      const CostModel cm =
          c.cpu_fit->model_for(c.res.rows, shape.batch, shape.heads, shape.dk, shape.dv, shape.dtype, P);
      OperatorShape os;
      os.world = P, os.batch = shape.batch, os.heads = shape.heads, os.dk = shape.dk, os.dv = shape.dv;
      os.tokens_per_rank = L, os.block_bytes = 4 * block_elems, os.act_bytes = 4;
      auto v = cm.operator_time(m, os);
      return v ? std::pair<double, std::string>{*v * 1e3, ""} : std::pair<double, std::string>{NAN, "—"};
    };
    s << "### Operator forward+backward, " << shape.str() << ", " << L << " tokens per rank\n\n";
    const auto lines = build_lines(c, t);
    write_table_csv(c, t.id, lines);
    s << render_lines(lines, t.ref, "(ms)", false) << "\n";
  }
  s << section_cpu_model(c);
  // Collective: the paper's size where measured, else the largest size measured at two world sizes or more.
  std::map<double, std::set<int>> worlds_at;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && is_cpu_row(r)) worlds_at[num(r, "bytes")].insert(inum(r, "world_size"));
  if (!worlds_at.empty()) {
    double bytes = worlds_at.rbegin()->first;
    for (auto& [b, w] : worlds_at)
      if (w.size() >= 2) bytes = b;
    if (worlds_at.count(kTable2Bytes)) bytes = kTable2Bytes;
    TableDef t;
    t.id = "cpu_collective";
    t.ref = "allscan";
    t.cpu = true;
    t.methods = collective_methods(c, true);
    t.setting = [bytes](const Row& r) {
      return col(r, "level") == "collective" && num(r, "bytes") == bytes &&
             (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems) ||
              bytes <= 4 * kPaperBlockElems);
    };
    t.model = [&c, bytes](const std::string& m, int P) -> std::pair<double, std::string> {
      if (!c.cpu_fit) return {NAN, "no fit"};
      auto v = c.cpu_fit->collective_model().collective(m, P, bytes, 4.0 * kPaperBlockElems, 128);
      return v ? std::pair<double, std::string>{*v * 1e3, ""} : std::pair<double, std::string>{NAN, "—"};
    };
    s << "### Collectives, " << bytes_str(bytes) << " state per rank, All-Scan block " << kPaperBlockElems
      << " elements\n\n";
    const auto lines = build_lines(c, t);
    write_table_csv(c, t.id, lines);
    s << render_lines(lines, t.ref, "(ms)", false) << "\n";
  }
  s << "### Plots of the CPU rows\n\n";
  for (auto& f : figs) s << figure_md(f);
  s << "\n";
  return s.str();
}

// Removes what an earlier report wrote, so nothing stale survives a regeneration.
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
      return;
    }
  }
  if (c.o.net_given) {
    c.net_source = "given (--net-gbps/--net-latency-us: " + flags + "), not measured here";
    return;
  }
  if (!c.ref_gpu.empty()) {
    const auto pts = network_points(c.res.rows, c.ref_gpu);
    const LinkFit f = fit_network_link(pts);
    if (f.ok && std::isfinite(f.link.beta_Bps)) {
      c.params.network = f.link;
      c.net_source = "fitted to " + std::to_string(f.points) + " collective configurations of " + c.ref_gpu +
                     " over several nodes of one rank each (RMS residual " + fmt("%.1f%%", 100 * f.rms_rel_residual) +
                     "; the transport those runs used, e.g. sockets, not necessarily InfiniBand)";
      return;
    }
  }
  c.net_source = "assumed (" + flags + ", the defaults of --net-gbps/--net-latency-us: InfiniBand NDR), not measured: "
                 "no collective rows over several nodes of one rank each";
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
    intra_words = "each pattern's link fitted on " + c.ref_gpu + " (the cost model section; the All-Scans use the "
                  "allscan link, " + (cm->link_for("allscan") ? link_str(*cm->link_for("allscan")) : "not fitted") + ")";
  const std::string net_words = link_str(p.network) + " (" + fmt("%g", p.network.beta_Bps * 8 / 1e9) + " Gb/s), " +
                                c.net_source;
  s << "Constants: inside a node " << (intra_words.empty() ? "none (no GPU rows and no --constants)" : intra_words)
    << "; between nodes " << net_words << ". `spbench report --constants FILE` (intra_alpha_us, intra_gbps, "
    << "net_alpha_us, net_gbps) or `--net-gbps`/`--net-latency-us` put a cluster's own figures in.\n\n";
  const std::vector<std::string> scans = allscan_variants();
  const std::vector<std::string> others = {"chain", "allgather", "ring"};
  std::map<int, std::map<std::string, double>> scan_t, all_t;
  std::vector<std::vector<std::string>> rows;
  std::ostringstream csv;
  csv << "gpus,nodes,host,host-hier,host-logdepth,fastest_allscan,lasp1_chain,lasp2_allgather,ring,intra_alpha_us,"
         "intra_GBps,net_alpha_us,net_GBps,net_source\n";
  const std::optional<Link> scan_link = intra_for("allscan");
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
                              (c.net_source.rfind("fitted", 0) == 0 ? "fitted" : "assumed") + ")"
                        : "intra only");
    const Link in = scan_link.value_or(Link{});
    crow.insert(crow.end(), {fmt("%.6g", in.alpha_s * 1e6), fmt("%.6g", in.beta_Bps / 1e9),
                             fmt("%.6g", p.network.alpha_s * 1e6), fmt("%.6g", p.network.beta_Bps / 1e9),
                             csv_field(c.net_source)});
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
    << "\n(`tables/allscan_beyond_one_node.csv` has the same numbers and the constants.)\n\n";
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

void clean(const std::string& dir, const std::vector<std::string>& exts) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> doomed;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && std::find(exts.begin(), exts.end(), e.path().extension().string()) != exts.end())
      doomed.push_back(e.path());
  for (auto& p : doomed) fs::remove(p, ec);
}

}  // namespace

int run_report(const ReportOptions& o) {
  Context c{o, load_results(o.results), load_paper(o.paper), o.model_params(), "", {}, {}, "", "", {}};
  c.plots_dir = o.out + "/plots";
  c.tables_dir = o.out + "/tables";
  std::error_code ec;
  fs::create_directories(c.plots_dir, ec);
  SPB_USAGE(!ec, "--out " + o.out + ": cannot create " + c.plots_dir + " (" + ec.message() + ")");
  fs::create_directories(c.tables_dir, ec);
  SPB_USAGE(!ec, "--out " + o.out + ": cannot create " + c.tables_dir + " (" + ec.message() + ")");
  clean(c.plots_dir, {".png", ".svg", ".gp", ".dat"});
  clean(c.tables_dir, {".csv"});

  c.ref_gpu = reference_gpu(c.res.rows);
  resolve_network(c);
  if (!c.ref_gpu.empty()) c.gpu_fit = fit_machine(c.res.rows, c.ref_gpu, c.params);
  bool cpu_rows = false;
  for (auto& r : c.res.rows) cpu_rows |= is_cpu_row(r);
  if (cpu_rows) {
    std::vector<Row> cpu;
    for (auto& r : c.res.rows)
      if (is_cpu_row(r)) cpu.push_back(r);
    c.cpu_fit = fit_machine(cpu, "cpu", c.params);
  }

  // Plots first: the sections refer to them.
  std::vector<Figure> gpu_figs, cpu_figs, timeline_figs;
  for (bool cpu : {false, true}) {
    auto& figs = cpu ? cpu_figs : gpu_figs;
    figs.push_back(plot_collective_vs_gpus(c, cpu));
    figs.push_back(plot_collective_vs_bytes(c, cpu));
    figs.push_back(plot_allscan_vs_block(c, cpu));
    for (auto& f : plot_operator_vs_gpus(c, cpu)) figs.push_back(f);
    auto weak = plot_scaling(c, cpu, true), strong = plot_scaling(c, cpu, false);
    if (weak.empty()) figs.push_back({"", "Weak scaling (fixed tokens per rank).", "no operator rows at one tokens-per-rank on two world sizes or more yet"});
    if (strong.empty()) figs.push_back({"", "Strong scaling (fixed total tokens).", "no operator rows with the same total tokens on two world sizes or more yet"});
    figs.insert(figs.end(), weak.begin(), weak.end());
    figs.insert(figs.end(), strong.begin(), strong.end());
    if (cpu && !cpu_rows) figs.clear();
  }
  timeline_figs = plot_timelines(c);

  std::ostringstream md;
  md << "# spbench report: ZeCO's Tables 2-6, measured, modelled and published\n\n"
     << "Generated by `spbench report` from `results/*.csv` and the paper's published numbers "
        "([`paper/paper_tables.csv`](paper/paper_tables.csv), transcribed from a secondary summary of the paper; "
        "[`paper/README.md`](paper/README.md) says where each number comes from and how sure it is). Do not edit by hand: "
        "regenerate with `build/spbench report`; `scripts/check_report.sh` (ctest `report.drift`) fails when this "
        "directory no longer matches what results/ gives.\n\n"
     << "What each number is:\n\n"
     << "- **measured**: a row of results/; the machine is its `gpu` column, world size, backend and date (where "
        "several rows match, the newest `date`). Times are the mean over the timed iterations of the slowest rank.\n"
     << "- **model prediction**: the alpha-beta cost model (below), fitted to the measured rows of one machine; every "
        "number for more GPUs than were measured is one of these.\n"
     << "- **paper**: ZeCO (NeurIPS 2025), measured on up to 256 H100 80GB; \"" << kNotPublished
     << "\" where the summary did not give the number.\n\n"
     << "Ratios are between methods on the same machine and world size (method ÷ the table's reference), so they "
        "can be compared across machines where the times cannot.\n\n";
  md << section_data(c);

  TableDef t2;
  t2.id = "table2";
  t2.ref = "allscan";
  t2.paper_level = "collective";
  t2.paper_seq = kTable2Seq;
  t2.methods = collective_methods(c, false);
  t2.setting = [](const Row& r) {
    return col(r, "level") == "collective" && num(r, "bytes") == kTable2Bytes && is(r, "dv", 128) &&
           (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems));
  };
  t2.model = collective_model(c);
  t2.fitted = c.gpu_fit.has_value();
  md << gpu_table(c, t2, "Table 2: collective communication, All-Gather vs All-Scan",
                  "Per-rank state 2 MiB (32 heads x 128 x 128 fp32, `bytes=2097152`), All-Scan block 16384 elements "
                  "(64 KiB, K=32); time of one collective call in ms (`spbench collective`). allgather is LASP-2's "
                  "collective, allscan ZeCO's, chain LASP-1's; ring and alltoall are listed where measured.",
                  "(ms)");
  md << section_floors(c);
  for (long long L : {16384LL, 32768LL}) {
    TableDef t;
    t.id = L == 16384 ? "table3" : "table4";
    t.ref = "dp";
    t.paper_level = "operator";
    t.paper_seq = L;
    t.methods = operator_methods(c);
    t.setting = [L](const Row& r) {
      return operator_row(r, false) && is(r, "tokens_per_rank", double(L)) && is(r, "heads", 16) && is(r, "dk", 128) &&
             is(r, "dv", 128) && is(r, "batch", 1) &&
             (num(r, "block_elems") == 0 || is(r, "block_elems", kPaperBlockElems));
    };
    t.model = operator_model(c, L);
    t.fitted = c.gpu_fit.has_value();
    md << gpu_table(c, t,
                    std::string(L == 16384 ? "Table 3" : "Table 4") + ": operator forward+backward, " +
                        std::to_string(L) + " tokens per GPU",
                    "GLA attention with each SP method, one forward and one backward: B=1, H=16, dk=dv=128, " +
                        std::to_string(L) + " tokens per GPU, All-Scan block 16384 elements, bf16 (`spbench "
                        "operator`); time in ms. dp is the ideal (no communication).",
                    "(ms)");
  }
  md << section_model_level(c, 16384, "5") << section_model_level(c, 32768, "6");
  md << section_cost_model(c);
  md << section_beyond_one_node(c);

  md << "## Plots\n\n"
     << "Solid lines with dots are measured, dashed lines the cost model's predictions, open circles the paper's "
        "numbers. Each plot is drawn by gnuplot from the `.gp` script and `.dat` data beside it.\n\n";
  for (auto& f : gpu_figs) md << figure_md(f);
  md << "\n### Overlap timeline\n\n";
  if (timeline_figs.empty())
    md << "Not drawn: no timeline CSV in results/ (`results/*timeline*.csv` with columns rank, stream, span, "
          "start_us, end_us; `spbench operator --timeline FILE` writes one).\n\n";
  for (auto& f : timeline_figs) md << figure_md(f);
  md << section_exposed(c);
  md << section_cpu(c, cpu_figs);

  // No trailing blanks on a line, one newline at the end.
  std::string text;
  std::istringstream lines(md.str());
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  while (text.size() > 1 && text[text.size() - 1] == '\n' && text[text.size() - 2] == '\n') text.pop_back();
  std::ofstream(o.out + "/README.md") << text;
  if (o.plots && !c.plots.empty()) render_plots(c.plots_dir, c.plots);
  if (fs::is_empty(c.plots_dir, ec)) fs::remove(c.plots_dir, ec);  // git keeps no empty directory: neither do we
  std::printf("spbench report: %s/README.md, %zu plots, %zu tables (%zu result rows, %zu timeline spans)\n",
              o.out.c_str(), c.plots.size(), size_t(std::distance(fs::directory_iterator(c.tables_dir), fs::directory_iterator())),
              c.res.rows.size(), c.res.timeline.size());
  return 0;
}

}  // namespace spb
