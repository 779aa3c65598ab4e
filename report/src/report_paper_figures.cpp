// spbench report: the two figures users quote from the paper, redrawn from our measured and simulated rows:
//   - tokens/s per GPU against the number of GPUs (the paper's Figure 1, near-linear scaling): the operator level at
//     Table 3's setting, and the model level at each tokens-per-GPU where GPU model rows exist;
//   - "1M tokens on 64 GPUs versus 16K tokens on one GPU": the time of one operator forward+backward at 16K tokens
//     per GPU as the world grows with the sequence.
// Every point is measured (a row of results/, its file named) or simulated (a row of results/sim/ on the prediction
// platform, the simulation's predicted tables' own: simulated_predictions), and says so in the plot (a measured series
// is solid or its backend's dash type with filled points; a simulated one dashed with open squares), in the README's
// table beside the plot and in tables/fig_*.csv. The paper's numbers are drawn beside them as open circles.
#include "report/src/report_common.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace spb {
namespace report_detail {

namespace {

const std::vector<std::string> kFigureMethods = {"dp", "zeco", "lasp2", "lasp1"};  // the paper's tables' methods
const std::vector<int> kFigureGpus = {1, 2, 4, 8, 16, 32, 64, 128, 256};
constexpr long long kFigureL = 16384;  // tokens per GPU: Table 3's setting, "16K on one GPU"

bool figure_method(const std::string& m) {
  return std::find(kFigureMethods.begin(), kFigureMethods.end(), m) != kFigureMethods.end();
}

struct FigPoint {
  int gpus = 0;
  std::string method, backend;
  std::string label;  // measured, simulated, paper
  double value = NAN;
  const Row* row = nullptr;  // measured and simulated: the row
  std::string source;        // measured and simulated: results/FILE; paper: its table
};

struct FigData {
  std::string name, what;  // file stem; what the value is, in words
  std::string unit;        // of the value
  long long tokens_per_gpu = kFigureL;
  std::vector<FigPoint> points;
  std::string paper_how;    // for the sources line
  std::string paper_where;              // the paper's series, after its name
};

// "16K", "1M": the tokens in all at P GPUs.
std::string tokens_str(double n) {
  if (n >= 1048576 && std::fmod(n, 1048576) == 0) return int_str(n / 1048576) + "M";
  if (n >= 1024 && std::fmod(n, 1024) == 0) return int_str(n / 1024) + "K";
  return int_str(n);
}

std::string value_str(double v) { return num_cell(v); }

// The simulated points of `level` (at L tokens per GPU) where a method was not measured: the simulation's predictions
// (simulated_predictions), each with its row and file. `value`: what the figure shows of a row.
template <class Value>
void add_simulated(const Context& c, FigData& f, const std::string& level, const std::set<std::pair<std::string, int>>& measured,
                   Value value) {
  for (const auto& [key, r] : simulated_predictions(c, level, f.tokens_per_gpu)) {
    const auto& [P, m] = key;
    if (!figure_method(m) || measured.count({m, P})) continue;
    f.points.push_back({P, m, col(*r, "backend"), "simulated", value(*r), r, "results/" + c.res.file_of(*r)});
  }
}

// The operator at Table 3's setting: measured lines of the table (each the newest row of its method, world size, gpu
// and backend), the simulation's prediction at every GPU count a method was not measured, and Table 3's numbers.
// `throughput`: tokens/s per GPU (B = 1: L / time), else the time in ms.
FigData operator_figure(const Context& c, bool throughput) {
  FigData f;
  f.name = throughput ? "fig_tokens_per_gpu_operator_L16384" : "fig_1m_tokens_on_64_gpus";
  f.what = throughput ? "tokens/s per GPU (operator forward+backward)" : "operator forward+backward time";
  f.unit = throughput ? "tokens/s" : "ms";
  const TableDef t = operator_table(c, kFigureL);
  auto value = [&](double ms_) { return throughput ? double(kFigureL) / (ms_ * 1e-3) : ms_; };
  std::set<std::pair<std::string, int>> measured;
  for (const Line& l : build_lines(c, t)) {
    if (!l.row || !figure_method(l.method)) continue;
    f.points.push_back({l.gpus, l.method, col(*l.row, "backend"), "measured", value(l.measured), l.row,
                        "results/" + c.res.file_of(*l.row)});
    measured.insert({l.method, l.gpus});
  }
  // A simulated row's time is its mean over the timed iterations, as the measured and the simulation's tables show it.
  add_simulated(c, f, "operator", measured, [&](const Row& r) { return value(ms(r)); });
  f.paper_how = "the paper's Table 3 (H100)";
  f.paper_where = "H100, Table 3";
  for (const std::string& m : kFigureMethods)
    for (int P : kFigureGpus) {
      const double v = paper_value(c.paper, "operator", P, kFigureL, m);
      if (std::isfinite(v)) f.points.push_back({P, m, "", "paper", value(v), nullptr, "paper, Table 3 (H100)"});
    }
  return f;
}

// The model level at L tokens per GPU: the rows Table 5 or 6 shows, the simulation's prediction at every GPU count a
// method was not measured, the paper's model table.
FigData model_figure(const Context& c, long long L) {
  FigData f;
  f.name = "fig_tokens_per_gpu_model_L" + std::to_string(L);
  f.what = "training tokens/s per GPU (model level)";
  f.unit = "tokens/s";
  f.tokens_per_gpu = L;
  std::set<std::pair<std::string, int>> measured;
  for (const Row* r : model_rows_shown(c.res.rows, L, false)) {
    if (!figure_method(col(*r, "method"))) continue;
    f.points.push_back({inum(*r, "world_size"), col(*r, "method"), col(*r, "backend"), "measured", tokens_per_s(*r), r,
                        "results/" + c.res.file_of(*r)});
    measured.insert({col(*r, "method"), inum(*r, "world_size")});
  }
  add_simulated(c, f, "model", measured, [](const Row& r) { return tokens_per_s(r); });
  f.paper_how = "the paper's model table (H100)";
  f.paper_where = "H100, model table";
  for (const std::string& m : kFigureMethods)
    for (int P : kFigureGpus) {
      const double v = paper_value(c.paper, "model", P, L, m);
      if (std::isfinite(v)) f.points.push_back({P, m, "", "paper", v, nullptr, "paper, model table (H100)"});
    }
  return f;
}

bool has_label(const FigData& f, const std::string& label) {
  return std::any_of(f.points.begin(), f.points.end(), [&](const FigPoint& p) { return p.label == label; });
}

// The plot: a measured series per (method, backend, gpu), a simulated series per method, the paper's per method.
PlotSpec figure_plot(const FigData& f) {
  std::map<std::string, PlotSeries> series;
  auto order = [](const std::string& m) {
    return fmt("%02.0f", double(std::find(kFigureMethods.begin(), kFigureMethods.end(), m) - kFigureMethods.begin()));
  };
  std::map<std::string, std::map<int, const FigPoint*>> simulated;  // per series, its points by GPUs
  for (const FigPoint& p : f.points) {
    PlotSeries fresh = p.label == "measured"    ? measured_of(p.method, *p.row)
                       : p.label == "simulated" ? predicted_series(p.method)
                                                : paper_series(p.method, f.paper_where);
    const std::string key = std::string(p.label == "measured" ? "0" : p.label == "simulated" ? "1" : "2") +
                            order(p.method) + fresh.title;
    PlotSeries& s = series.emplace(key, fresh).first->second;
    s.rows.push_back({double(p.gpus), p.value});
    if (p.label == "simulated" && p.row) simulated[key][p.gpus] = &p;
  }
  for (auto& [key, by_gpus] : simulated) {  // where the simulated backend changes along the GPUs, say so
    std::string last_backend;
    for (auto& [gpus, point] : by_gpus) label_backend_change(series.at(key), last_backend, *point->row, point->value);
  }
  PlotSpec p;
  p.name = f.name;
  p.xlabel = "number of GPUs";
  for (auto& [k, s] : series) p.series.push_back(s);
  return p;
}

// The README's table beside a plot: a row per GPU count, a column per method; each cell ours, labelled measured (and
// on which gpu where several were) or simulated, then the paper's number where it published one.
std::string figure_table(const FigData& f) {
  std::set<int> gpus;
  for (const FigPoint& p : f.points) gpus.insert(p.gpus);
  std::set<std::string> measured_gpus;
  for (const FigPoint& p : f.points)
    if (p.label == "measured") measured_gpus.insert(col(*p.row, "gpu"));
  std::vector<std::vector<std::string>> rows;
  for (int P : gpus) {
    std::vector<std::string> row = {std::to_string(P), tokens_str(double(P) * f.tokens_per_gpu)};
    for (const std::string& m : kFigureMethods) {
      std::vector<std::string> ours, paper;
      for (const FigPoint& p : f.points) {
        if (p.gpus != P || p.method != m) continue;
        if (p.label == "paper")
          paper.push_back("paper " + value_str(p.value));
        else
          ours.push_back(value_str(p.value) + " " + p.label +
                         (p.label == "measured" && measured_gpus.size() > 1 ? " (" + col(*p.row, "gpu") + ")" : ""));
      }
      ours.insert(ours.end(), paper.begin(), paper.end());
      row.push_back(ours.empty() ? "—" : join(ours, "; "));
    }
    rows.push_back(row);
  }
  std::vector<std::string> head = {"GPUs", "tokens in all"};
  for (const std::string& m : kFigureMethods) head.push_back(m + " (" + f.unit + ")");
  return md_table(head, rows, "rrllll");
}

// Where the points come from: each results file with the (method, backend) rows taken from it, measured and
// simulated apart, and the paper.
std::string figure_sources(const FigData& f) {
  std::ostringstream s;
  s << "Each point says what it is: ";
  for (const char* label : {"measured", "simulated"}) {
    std::map<std::string, std::set<std::string>> files;  // results/FILE -> "method (backend) on gpu"
    for (const FigPoint& p : f.points)
      if (p.label == label) files[p.source].insert(p.method + " (" + p.backend + ") on " + col(*p.row, "gpu"));
    s << "**" << label << "** — ";
    if (files.empty())
      s << (std::string(label) == "measured" ? "none at this setting in results/"
                                             : "none at this setting in results/sim/");
    bool first = true;
    for (auto& [file, what] : files) {
      s << (first ? "" : "; ") << "`" << file << "`: " << join({what.begin(), what.end()}, ", ");
      first = false;
    }
    s << (std::string(label) == "simulated" ? " (on `" + std::string(kSimPredictPlatform) +
                                                  "`, at the GPU counts where that method was not measured)"
                                            : "")
      << "; ";
  }
  s << "**paper** — " << f.paper_how << ". `tables/" << f.name
    << ".csv` has every point with its label and source.\n\n";
  return s.str();
}

void write_figure_csv(const Context& c, const FigData& f) {
  std::ofstream out(c.tables_dir + "/" + f.name + ".csv");
  out << "gpus,tokens_in_all,method,backend,label,value,unit,source,git_sha,code_state\n";
  for (const FigPoint& p : f.points)
    out << p.gpus << "," << (long long)(p.gpus * f.tokens_per_gpu) << "," << p.method << "," << csv_field(p.backend)
        << "," << p.label << "," << fmt("%.6g", p.value) << "," << f.unit << "," << csv_field(p.source) << ","
        << (p.row ? col(*p.row, "git_sha") : "") << "," << (p.row ? col(*p.row, kCodeStateCol) : "") << "\n";
}

// The value and label of a method's point at P (ours: measured first), or none.
const FigPoint* ours_at(const FigData& f, const std::string& m, int P) {
  const FigPoint* best = nullptr;
  for (const FigPoint& p : f.points)
    if (p.method == m && p.gpus == P && p.label != "paper" && (!best || p.label == "measured")) best = &p;
  return best;
}

std::string point_words(const FigPoint& p, const std::string& unit) {
  return value_str(p.value) + " " + unit + " (" + p.label + (p.row ? ", " + p.source : "") + ")";
}

}  // namespace

std::string section_paper_figures(Context& c) {
  std::ostringstream s;
  s << "## The paper's two figures: tokens/s per GPU against GPUs, and 1M tokens on 64 GPUs\n\n"
    << "The figures users quote from the paper, redrawn from spbench's rows as far as the lent machines go and from "
       "the simulation beyond. Every point is labelled **measured** (a row of results/, the file named below the "
       "table) or **simulated** (a row of results/sim/ on `" << kSimPredictPlatform << "`, the same numbers as the "
       "simulation's predicted tables); in the plots a measured series has filled points on its backend's line style, "
       "a simulated one open squares on a dashed line, and the paper's numbers are open circles. Methods: dp (no communication: the ideal), zeco, lasp2 "
       "and lasp1, those of the paper's tables.\n\n";

  // Figure 1: tokens/s per GPU against GPUs, the operator level.
  {
    const FigData f = operator_figure(c, true);
    write_figure_csv(c, f);
    PlotSpec p = figure_plot(f);
    p.title = "Tokens/s per GPU vs GPUs: operator forward+backward (B=1, H=16, dk=dv=128, bf16, 16384 tokens per GPU)";
    p.ylabel = "throughput per GPU (tokens/s, forward+backward)";
    p.y_from_zero = true;
    p.extra = "set format y \"%.1s%c\"\n";
    s << "### Tokens/s per GPU against GPUs (Figure 1 style), operator level\n\n"
      << "16384 tokens per GPU (Table 3's setting): tokens per second per GPU of one attention forward + backward "
         "(B x L ÷ time). Flat is linear scaling: dp (no communication) is the ideal.\n\n";
    s << figure_md(draw(c, p, "Tokens/s per GPU against the number of GPUs, operator level, 16384 tokens per GPU: "
                              "measured, simulated, the paper's Table 3.",
                        "no GPU operator rows at Table 3's setting, measured or simulated, yet"));
    if (!f.points.empty()) s << figure_table(f) << "\n" << figure_sources(f);
    std::vector<std::string> keep;
    for (const std::string& m : kFigureMethods) {
      const FigPoint* one = ours_at(f, m, 1);
      const FigPoint* last = nullptr;
      for (int P : kFigureGpus)
        if (const FigPoint* q = ours_at(f, m, P)) last = q;
      if (one && last && last->gpus > 1)
        keep.push_back(m + " " + fmt("%.0f%%", 100 * last->value / one->value) + " at " +
                       std::to_string(last->gpus) + " GPUs (" + last->label + ")");
    }
    if (!keep.empty())
      s << "Tokens/s per GPU kept from one GPU: " << join(keep, ", ") << ".\n\n";
  }

  // Figure 1, the model level, where GPU model rows exist.
  for (long long L : {16384LL, 32768LL}) {
    if (model_rows_shown(c.res.rows, L, false).empty()) continue;
    const FigData f = model_figure(c, L);
    if (!has_label(f, "measured")) continue;
    write_figure_csv(c, f);
    PlotSpec p = figure_plot(f);
    p.title = "Tokens/s per GPU vs GPUs: model-level training (GLA LM, " + std::to_string(L) + " tokens per GPU)";
    p.ylabel = "training throughput per GPU (tokens/s)";
    p.y_from_zero = true;
    p.extra = "set format y \"%.1s%c\"\n";
    s << "### Tokens/s per GPU against GPUs (Figure 1 style), model level, " << L << " tokens per GPU\n\n"
      << "One training step (forward + backward + gradient all-reduce + AdamW), the rows Table "
      << (L == 16384 ? "5" : "6") << " shows.\n\n";
    s << figure_md(draw(c, p, "Training tokens/s per GPU against the number of GPUs, " + std::to_string(L) +
                                  " tokens per GPU: measured, simulated, the paper's model table.",
                        "no GPU model rows yet"))
      << figure_table(f) << "\n"
      << figure_sources(f);
  }

  // 1M tokens on 64 GPUs versus 16K tokens on one GPU.
  {
    const FigData f = operator_figure(c, false);
    write_figure_csv(c, f);
    PlotSpec p = figure_plot(f);
    p.title = "1M tokens on 64 GPUs vs 16K tokens on one GPU: operator forward+backward at 16384 tokens per GPU";
    p.xlabel = "number of GPUs";
    p.ylabel = "forward + backward time (ms)";
    std::string tics;  // the tokens in all on the top axis, above the GPU counts
    for (int P : kFigureGpus)
      tics += std::string(tics.empty() ? "" : ", ") + "\"" + tokens_str(double(P) * kFigureL) + "\" " +
              std::to_string(P);
    const std::string range = "[1:" + std::to_string(kFigureGpus.back()) + "]";
    p.xscale = Scale::log;
    p.extra = "set xrange " + range + "\nset logscale x2 2\nset x2range " + range + "\nset x2tics (" + tics +
              ")\nset x2label \"tokens in all (16384 per GPU)\" noenhanced\n";
    const FigPoint* dp1 = nullptr;
    for (const FigPoint& q : f.points)
      if (q.method == "dp" && q.gpus == 1 && q.label == "measured") dp1 = &q;
    if (dp1) {
      PlotSeries ref = reference_series("16K tokens on one GPU: dp measured, " + value_str(dp1->value) + " ms");
      for (int P : kFigureGpus) ref.rows.push_back({double(P), dp1->value});
      p.series.push_back(ref);
    }
    s << "### 1M tokens on 64 GPUs versus 16K tokens on one GPU\n\n"
      << "The time of one attention forward + backward at 16384 tokens per GPU while the sequence grows with the "
         "world: 16K tokens on one GPU, 1M (1048576) on 64. A method that scales perfectly keeps one GPU's time "
         "(the dotted black line: dp measured on one GPU).\n\n";
    s << figure_md(draw(c, p, "Operator forward+backward time at 16384 tokens per GPU, the sequence growing with the "
                              "GPUs (16K tokens on 1 GPU to 4M on 256): measured, simulated, the paper's Table 3.",
                        "no GPU operator rows at Table 3's setting, measured or simulated, yet"));
    if (!f.points.empty()) s << figure_table(f) << "\n" << figure_sources(f);
    if (dp1) {
      std::vector<std::string> v;
      for (const std::string& m : kFigureMethods)
        if (const FigPoint* q = ours_at(f, m, 64))
          v.push_back("**" + m + "** " + point_words(*q, "ms") + ", " + fmt("%.2fx", q->value / dp1->value));
      std::set<int> paper_gpus;
      for (const FigPoint& q : f.points)
        if (q.label == "paper") paper_gpus.insert(q.gpus);
      std::vector<std::string> pg;
      for (int P : paper_gpus) pg.push_back(std::to_string(P));
      if (!v.empty())
        s << "1M tokens on 64 GPUs against 16K tokens on one GPU (dp " << point_words(*dp1, "ms") << "): "
          << join(v, "; ") << ". The paper's Table 3 at 64 GPUs: "
          << (paper_gpus.count(64) ? "drawn above" : std::string(kNotPublished) +
                                                       (pg.empty() ? "" : " (its GPU counts here: " + join(pg, ", ") + ")"))
          << ".\n\n";
    }
  }
  return s.str();
}

}  // namespace report_detail
}  // namespace spb
