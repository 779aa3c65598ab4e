// spbench report, what every section shares: the formatting, the rows, a paper table's lines and the verdicts against
// the paper (report_common.h).
#include "report/src/report_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include "sp/method.h"

namespace spb {
namespace report_detail {

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
                     const std::string& align) {
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
         col(r, "date").substr(0, 10) + (sha.empty() || sha == "unknown" ? "" : ", " + sha.substr(0, 7)) +
         (code_changed(r) ? ", † code changed since" : code_unknown(r) ? ", ? commit unknown" : "");
}
PlotSeries measured_of(const std::string& method, const Row& r, const std::string& extra, int colour) {
  const std::string& gpu = col(r, "gpu");
  const std::string& be = col(r, "backend");
  std::vector<std::string> where;
  if (!extra.empty()) where.push_back(extra);
  if (gpu != be) where.push_back(gpu);
  if (code_changed(r)) where.push_back(kOlderCodeMark);
  if (code_unknown(r)) where.push_back(kUnknownCodeMark);
  PlotSeries s = measured_series(method, be, join(where, ", "), colour);
  if (gpu != be) restyle_for_gpu(s, gpu);
  s.mark = code_changed(r) ? kOlderCodeMark : code_unknown(r) ? kUnknownCodeMark : "";
  return s;
}

PlotSeries& add_series(std::map<std::string, PlotSeries>& series, const std::vector<std::string>& order,
                       PlotSeries fresh) {
  const std::string method = fresh.title.substr(0, fresh.title.find(' '));
  return series.emplace(order_key(order, method, fresh.title), std::move(fresh)).first->second;
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
  if (!t.cpu) gpus.insert(kPaperGpus.begin(), kPaperGpus.end());
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
    bool paper_row = false;  // the paper published this GPU count: every method gets a line there
    for (auto& m : t.methods) paper_row |= std::isfinite(paper_value(c.paper, t.paper_level, P, t.paper_seq, m));
    for (auto& m : t.methods) {
      Line base;
      base.gpus = P, base.method = m;
      base.paper = paper_value(c.paper, t.paper_level, P, t.paper_seq, m);
      base.r_paper = base.paper / paper_ref;
      std::vector<Line> mine;
      for (auto& [k, r] : measured)
        if (col(*r, "method") == m && inum(*r, "world_size") == P) {
          Line l = base;
          l.row = r, l.measured = ms(*r);
          l.r_measured = l.measured / ref_for(*r);
          mine.push_back(l);
        }
      // An unmeasured line at a GPU count the paper published: its number beside ours.
      if (mine.empty() && paper_row) mine.push_back(base);
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

bool PaperPoint::agrees() const {  // on the quotient as printed (two decimals), so the text never contradicts itself
  const double q = std::round(quotient() * 100) / 100;
  return q >= std::round(100 / kAgreeBand) / 100 && q <= kAgreeBand;
}
std::optional<PaperPoint> paper_point(const Line& l) {
  if (!std::isfinite(l.r_paper)) return std::nullopt;
  if (l.row && std::isfinite(l.r_measured)) return PaperPoint{l.gpus, l.r_measured, l.r_paper};
  return std::nullopt;
}
// The table cell: "measured 1.16x ÷ paper 1.15x = 1.01".
std::string versus_cell(const Line& l, const std::string& ref) {
  const auto p = paper_point(l);
  if (!p || l.method == ref) return "—";
  return "measured " + ratio_cell(p->ours) + " ÷ paper " + ratio_cell(p->paper) + " = " + fmt("%.2f", p->quotient());
}

// Per method: the paper's and the measured ratios to the reference; then the comparison with the paper at every GPU
// count it published where ours was measured (agrees only if every point is within the band). `quantity` names what
// the table holds ("time" or "throughput": for a throughput a lower ratio is the worse one).
std::string trend_paragraph(const std::vector<Line>& lines, const TableDef& t, const std::string& quantity) {
  using Series = std::vector<std::pair<int, double>>;
  const bool higher_better = quantity == "throughput";
  auto span = [](const Series& v) {
    return ratio_cell(v.front().second) + " at " + std::to_string(v.front().first) + " GPUs" +
           (v.size() > 1 ? " to " + ratio_cell(v.back().second) + " at " + std::to_string(v.back().first) : "");
  };
  std::ostringstream s;
  s << "spbench's measured ratio is compared with the paper's at every GPU count the paper published and we "
       "measured: the quotient (ours ÷ paper) must lie within "
    << band_str() << " at every point for \"agrees\".\n\n";
  bool any = false;
  for (const std::string& m : t.methods) {
    if (m == t.ref) continue;
    Series paper, measured;
    std::vector<PaperPoint> points;
    for (const Line& l : lines) {
      if (l.method != m) continue;
      if (std::isfinite(l.r_paper) && (paper.empty() || paper.back().first != l.gpus)) paper.push_back({l.gpus, l.r_paper});
      if (std::isfinite(l.r_measured)) measured.push_back({l.gpus, l.r_measured});
      if (auto p = paper_point(l)) points.push_back(*p);
    }
    if (paper.empty() && measured.empty()) continue;
    any = true;
    s << "- **" << m << " ÷ " << t.ref << "**: ";
    std::vector<std::string> parts;
    if (!paper.empty()) parts.push_back("paper " + span(paper));
    if (!measured.empty()) {
      std::vector<std::string> mv;
      for (auto& [g, r] : measured) mv.push_back(ratio_cell(r) + " at " + std::to_string(g));
      parts.push_back("measured " + join(mv, ", "));
    }
    s << join(parts, "; ") << ". ";
    if (points.empty() && !paper.empty()) {
      s << "No measured ratio at a GPU count the paper published: no verdict here. ";
    } else if (!points.empty()) {
      std::vector<std::string> pv, off;
      bool worse = false, better = false;  // ours, where outside the band: worse or better than the paper's
      for (const PaperPoint& p : points) {
        pv.push_back(std::to_string(p.gpus) + " GPUs " + fmt("%.2f", p.quotient()));
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
    }
    if (!measured.empty() && !paper.empty() && measured.back().first < paper.front().first)
      s << "Our measurements stop at " << measured.back().first << " GPUs, below the paper's smallest count ("
        << paper.front().first << "). ";
    s << "\n";
  }
  if (!any) return "No numbers to compare yet.\n";
  return s.str();
}

std::string predicted_in_md(const Context& c, const TableDef& t) {
  if (t.predicted_in.empty() || c.res.sim_rows.empty()) return "";
  return "For more GPUs than were measured, the simulation predicts this table: \"" + t.predicted_in +
         "\" in the simulation's section, beside the paper and the hold-out of the rows each ratio is made of.\n\n";
}

std::string ratio_paragraph(const std::vector<Line>& lines, const TableDef& t) {
  std::ostringstream s;
  for (const std::string& m : t.methods) {
    if (m == t.ref) continue;
    std::vector<std::string> mv;
    for (const Line& l : lines)
      if (l.method == m && std::isfinite(l.r_measured))
        mv.push_back(ratio_cell(l.r_measured) + " at " + std::to_string(l.gpus));
    if (!mv.empty()) s << "- **" << m << " ÷ " << t.ref << "**: measured " << join(mv, ", ") << ".\n";
  }
  return s.str().empty() ? "No ratios to show yet.\n" : s.str();
}

std::string render_lines(const std::vector<Line>& lines, const std::string& ref, const std::string& value,
                         bool with_paper, const std::string& count) {
  std::vector<std::vector<std::string>> rows;
  for (const Line& l : lines) {
    std::vector<std::string> r = {std::to_string(l.gpus), l.method,
                                  l.row ? num_cell(l.measured) + stale_mark(*l.row) : kNotMeasured,
                                  l.row ? machine_of(*l.row) : "—"};
    if (with_paper) r.push_back(std::isfinite(l.paper) ? num_cell(l.paper) : kNotPublished);
    r.push_back(ratio_cell(l.r_measured));
    if (with_paper) r.push_back(ratio_cell(l.r_paper));
    if (with_paper) r.push_back(versus_cell(l, ref));
    rows.push_back(r);
  }
  std::vector<std::string> head = {!count.empty() ? count : with_paper ? "GPUs" : "ranks", "method",
                                   "measured " + value, "measured on (gpu, world size, backend, date)"};
  if (with_paper) head.push_back("paper " + value);
  head.push_back("÷ " + ref + ": measured");
  if (with_paper) head.push_back("÷ " + ref + ": paper");
  if (with_paper) head.push_back("ours ÷ paper (ratios)");
  return md_table(head, rows, with_paper ? "rlrlrrrl" : "rlrlr");
}

void write_table_csv(const Context& c, const std::string& id, const std::vector<Line>& lines, bool model_level) {
  const std::string unit = model_level ? "tokens_per_s_per_gpu" : "ms";
  std::ofstream f(c.tables_dir + "/" + id + ".csv");
  f << "gpus,method,measured_" << unit << ",measured_gpu,measured_world_size,measured_backend,measured_date,"
    << "measured_git_sha,measured_code_state,"
    << (model_level ? "measured_config," : "") << "paper_" << unit << ",ratio_measured,ratio_paper\n";
  auto n = [](double v) { return std::isfinite(v) ? fmt("%.6g", v) : std::string(); };
  for (const Line& l : lines) {
    f << l.gpus << "," << l.method << "," << n(l.measured) << "," << (l.row ? csv_field(col(*l.row, "gpu")) : "") << ","
      << (l.row ? col(*l.row, "world_size") : "") << "," << (l.row ? col(*l.row, "backend") : "") << ","
      << (l.row ? col(*l.row, "date") : "") << "," << (l.row ? col(*l.row, "git_sha") : "") << ","
      << (l.row ? col(*l.row, kCodeStateCol) : "") << ",";
    if (model_level) f << (l.row ? csv_field(model_config_str(*l.row)) : "") << ",";
    f << n(l.paper) << "," << n(l.r_measured) << "," << n(l.r_paper) << "\n";
  }
}

std::vector<std::string> operator_methods(const Context& c) {
  const std::vector<std::string> registered = method_names();
  std::set<std::string> names(registered.begin(), registered.end());
  for (auto& r : c.res.rows)
    if (col(r, "level") == "operator" || col(r, "level") == "model") names.insert(col(r, "method"));
  return ordered(names, registered);
}

// The paper's two patterns and LASP-1's chain, then every pattern measured (on GPUs, or on CPU ranks for `cpu`).
std::vector<std::string> collective_methods(const Context& c, bool cpu) {
  std::set<std::string> names = {"allgather", "allscan", "chain"};
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && col(r, "pass") != "probe" && is_cpu_row(r) == cpu)
      names.insert(col(r, "method"));
  return ordered(names, {"allscan", "allgather", "chain", "ring", "alltoall"});
}

Shape shape_of(const Row& r) {
  return {inum(r, "batch"), inum(r, "heads"), inum(r, "dk"), inum(r, "dv"), col(r, "dtype")};
}
bool operator_row(const Row& r, bool cpu) {
  return col(r, "level") == "operator" && col(r, "pass") == "fwd_bwd" && is_cpu_row(r) == cpu && ms(r) > 0 &&
         default_order(r);
}

double tokens_per_s(const Row& r) { return num(r, "tokens_per_s_per_gpu"); }

}  // namespace report_detail
}  // namespace spb
