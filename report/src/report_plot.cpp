#include "report/src/report_plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "runtime/error.h"

namespace spb {

namespace {

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr int kPaletteSize = sizeof kPalette / sizeof kPalette[0];

std::string quoted(const std::string& s) {  // a gnuplot double-quoted string
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// A title as one gnuplot string, broken into lines of at most kTitleLine characters at spaces: a long title centred
// over a plot narrowed by an outside key would run off the canvas (tests/report/check_plot_text_fits.sh).
constexpr size_t kTitleLine = 80;
std::string title_lines(const std::string& title) {
  std::vector<std::string> lines;
  std::string rest = title;
  while (rest.size() > kTitleLine) {
    size_t cut = rest.rfind(' ', kTitleLine);
    if (cut == std::string::npos || cut == 0) cut = kTitleLine;
    lines.push_back(rest.substr(0, cut));
    rest = rest.substr(cut + (rest[cut] == ' ' ? 1 : 0));
  }
  lines.push_back(rest);
  std::string q;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string one = quoted(lines[i]);
    q += (i ? " . \"\\n\" . " : "") + one;
  }
  return q;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

int method_colour(const std::string& m) {
  // The model's methods and patterns first (fixed colours), anything else by a stable hash of its name.
  static const std::vector<std::string> known = {"dp", "zeco", "lasp2", "lasp1", "ring", "ulysses",
                                                 "allscan", "allgather", "chain", "alltoall"};
  static const int colour_of[] = {8, 0, 1, 2, 3, 4, 0, 1, 2, 4};
  for (size_t i = 0; i < known.size(); ++i)
    if (known[i] == m) return colour_of[i];
  unsigned h = 0;
  for (char c : m) h = h * 31 + (unsigned char)c;
  return 5 + int(h % 5);
}

std::string colour_spec(int colour) {
  return std::string("lc rgb \"") + kPalette[((colour % kPaletteSize) + kPaletteSize) % kPaletteSize] + "\"";
}

const char* kind_name(SeriesKind kind) {
  switch (kind) {
    case SeriesKind::measured: return "measured";
    case SeriesKind::simulated: return "simulated";
    case SeriesKind::paper: return "paper";
    case SeriesKind::reference: return "reference";
    case SeriesKind::bars: return "bars";
  }
  return "";
}

namespace {

// Backends in a fixed order with their dash type and filled point type; any other backend gets one of the custom
// patterns by a stable hash of its name. dt 3 (dotted) is the reference line's and no backend's.
struct BackendStyle {
  const char* backend;
  const char* dash;
  int point;
  const char* words;  // the dash type, for the report's key
};
const BackendStyle kBackends[] = {
    {"nccl", "dt 1", 5, "solid, filled squares"},
    {"cpu", "dt 1", 7, "solid, filled circles"},
    {"cuda", "dt 1", 7, "solid, filled circles"},
    {"device-ll16", "dt 2", 7, "dashed, filled circles"},
    {"device-ll", "dt 4", 9, "dash-dot, filled triangles"},
    {"device-flag", "dt 5", 11, "dash-dot-dot, filled down-triangles"},
    {"device", "dt (16,6)", 13, "long dashes, filled diamonds"},
    {"host", "dt (24,6,4,6)", 15, "long dash-dot, filled pentagons"},
    {"host-hier", "dt (8,4,8,12)", 15, "paired dashes, filled pentagons"},
    {"host-logdepth", "dt (2,4,12,4)", 15, "dot-long dash, filled pentagons"},
};
const char* const kOtherDashes[] = {"dt (6,3,6,3,18,3)", "dt (30,8)", "dt (4,8)"};
const char* const kOtherWords[] = {"dash-dash-long dash, filled diamonds", "very long dashes, filled diamonds",
                                   "sparse short dashes, filled diamonds"};

const BackendStyle* known_backend(const std::string& backend) {
  for (const auto& b : kBackends)
    if (backend == b.backend) return &b;
  return nullptr;
}
int other_index(const std::string& backend) {
  unsigned h = 0;
  for (char c : backend) h = h * 31 + (unsigned char)c;
  return int(h % 3);
}

std::string with_where(const std::string& title, const std::string& where) {
  return where.empty() ? title : title + ", " + where;
}

}  // namespace

void restyle_for_gpu(PlotSeries& s, const std::string& gpu) {
  if (gpu.find("H100") == std::string::npos || s.kind != SeriesKind::measured) return;
  // The H100 dash of each dash type a backend has (backend_dash), and the open point of each filled one.
  static const std::map<std::string, std::string> dash = {
      {"dt 1", "dt (12,5)"},          {"dt 2", "dt (6,3,2,3)"},         {"dt 4", "dt (3,3)"},
      {"dt 5", "dt (14,3,3,3,3,3)"}, {"dt (16,6)", "dt (16,3,2,3)"},   {"dt (24,6,4,6)", "dt (24,3,2,3,2,3)"},
      {"dt (8,4,8,12)", "dt (8,2,2,2)"}, {"dt (2,4,12,4)", "dt (2,2,8,2)"}};
  static const std::map<int, int> open = {{5, 4}, {7, 6}, {9, 8}, {11, 10}, {13, 12}, {15, 14}};
  std::string& st = s.style;
  for (const auto& [from, to] : dash)
    if (auto at = st.find(" " + from + " pt "); at != std::string::npos) {
      st.replace(at + 1, from.size(), to);
      break;
    }
  for (const auto& [from, to] : open)
    if (auto at = st.find(" pt " + std::to_string(from) + " "); at != std::string::npos) {
      st.replace(at, 5 + std::to_string(from).size(), " pt " + std::to_string(to) + " ");
      break;
    }
  if (auto at = st.find("lc rgb \"#"); at != std::string::npos) {  // the colour at 60% of its brightness
    const std::string hex = st.substr(at + 9, 6);
    char buf[8];
    const long v = std::strtol(hex.c_str(), nullptr, 16);
    std::snprintf(buf, sizeof buf, "%02lx%02lx%02lx", (v >> 16 & 255) * 6 / 10, (v >> 8 & 255) * 6 / 10,
                  (v & 255) * 6 / 10);
    st.replace(at + 9, 6, buf);
  }
}

std::string backend_dash(const std::string& backend) {
  if (const auto* b = known_backend(backend)) return b->dash;
  return kOtherDashes[other_index(backend)];
}

int backend_point(const std::string& backend) {
  if (const auto* b = known_backend(backend)) return b->point;
  return 13;
}

PlotSeries measured_series(const std::string& method, const std::string& backend, const std::string& where,
                           int colour) {
  PlotSeries s;
  s.kind = SeriesKind::measured;
  s.title = with_where(method + " (" + backend + ") measured", where);
  s.style = "with linespoints lw 2 " + backend_dash(backend) + " pt " + std::to_string(backend_point(backend)) +
            " ps 1.1 " + colour_spec(colour < 0 ? method_colour(method) : colour);
  return s;
}

PlotSeries paper_series(const std::string& method, const std::string& where, int colour) {
  PlotSeries s;
  s.kind = SeriesKind::paper;
  s.title = with_where(method + " paper", where);
  s.style = "with points pt 6 ps 1.6 lw 2 " + colour_spec(colour < 0 ? method_colour(method) : colour);
  return s;
}

PlotSeries reference_series(const std::string& title) {
  PlotSeries s;
  s.kind = SeriesKind::reference;
  s.title = title;
  s.style = "with lines lw 1 dt 3 lc rgb \"#000000\"";
  return s;
}

std::string bars_style(int colour) { return "with boxxyerror fs solid 0.7 noborder " + colour_spec(colour); }

std::string plot_styles_md(const std::vector<std::string>& backends) {
  std::ostringstream s;
  s << "How to read the plots: the colour is the method (the same in every plot); the line style and the filled "
       "point type are the backend of a measured series (";
  for (size_t i = 0; i < backends.size(); ++i) {
    const auto* k = known_backend(backends[i]);
    s << (i ? "; " : "") << "`" << backends[i] << "` " << (k ? k->words : kOtherWords[other_index(backends[i])]);
  }
  s << "); a legend entry names both, as \"zeco (device-ll16) measured, NVIDIA H200\". The paper's published numbers "
       "are open circles without a line (\"paper\"). The simulation's rows (\"simulated\"): on the lent machine's "
       "platform large open circles without a line, on the paper's cluster a dashed line of open squares (also in the "
       "paper's two figures), the paper's numbers in the simulation's plots large stars. An axis is logarithmic where its data "
       "spans more than a decade. A **†** after a series' name and beside each of its points: measured on code that "
       "changed since (\"Rows of older code\"); a **?**: of a commit not in this repository.\n\n";
  return s.str();
}

namespace {

// Scale::automatic: log where every value of that column is positive and the largest is more than 10 x the smallest.
bool log_axis(const PlotSpec& p, Scale scale, size_t column) {
  if (scale != Scale::automatic) return scale == Scale::log;
  double lo = INFINITY, hi = 0;
  for (const auto& s : p.series)
    for (const auto& r : s.rows) {
      if (r.size() <= column) continue;
      if (!(r[column] > 0)) return false;
      lo = std::min(lo, r[column]), hi = std::max(hi, r[column]);
    }
  return hi > 10 * lo;
}

}  // namespace

bool PlotSpec::empty() const {
  for (const auto& s : series)
    if (!s.rows.empty()) return false;
  return true;
}

bool write_plot(const std::string& dir, const PlotSpec& p) {
  if (p.empty()) return false;
  std::ostringstream dat, gp;
  dat << "# " << p.title << "\n";
  int index = 0;
  std::vector<std::string> clauses;
  for (const auto& s : p.series) {
    if (s.rows.empty()) continue;
    dat << (index ? "\n\n" : "") << "# [" << index << "] " << kind_name(s.kind) << ": " << s.title << "\n";
    auto rows = s.rows;
    std::sort(rows.begin(), rows.end());  // lines run left to right
    for (const auto& r : rows) {
      for (size_t i = 0; i < r.size(); ++i) dat << (i ? " " : "") << number(r[i]);
      dat << "\n";
    }
    clauses.push_back(quoted(p.name + ".dat") + " index " + std::to_string(index) + " using " + s.using_ + " " +
                      s.style + " title " + quoted(s.title));
    ++index;
  }
  // The labels, each series' as a block of its own after all series (which keep their indices): x, y and the text.
  for (const auto& s : p.series) {
    if (s.rows.empty()) continue;
    auto labels = s.labels;
    if (!s.mark.empty())
      for (const auto& r : s.rows) labels.push_back({r.at(0), r.at(1), s.mark});
    if (labels.empty()) continue;
    std::sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) { return std::tie(a.x, a.y) < std::tie(b.x, b.y); });
    dat << "\n\n# [" << index << "] labels of " << s.title << "\n";
    for (const auto& l : labels) dat << number(l.x) << " " << number(l.y) << " " << quoted(l.text) << "\n";
    // In the series' colour, where its style names one.
    const auto lc = s.style.find("lc rgb \"");
    const auto lc_end = lc == std::string::npos ? lc : s.style.find('"', lc + 8);
    const std::string colour = lc_end == std::string::npos ? "" : " tc " + s.style.substr(lc + 3, lc_end + 1 - (lc + 3));
    clauses.push_back(quoted(p.name + ".dat") + " index " + std::to_string(index) +
                      " using 1:2:3 with labels left offset char 0.8,0.7" + colour + " notitle");
    ++index;
  }
  gp << "# Generated by spbench report: " << p.title << "\n"
     << "# Data: " << p.name << ".dat (one index block per series). Run inside this directory: gnuplot " << p.name
     << ".gp\n";
  gp << "set title " << title_lines(p.title) << " noenhanced\n";
  gp << "set xlabel " << quoted(p.xlabel) << " noenhanced\n";
  gp << "set ylabel " << quoted(p.ylabel) << " noenhanced\n";
  gp << "set key " << p.key << " noenhanced\n";
  gp << "set grid\n";
  const bool logx = log_axis(p, p.xscale, 0);
  if (logx) gp << "set logscale x " << p.logx_base << "\nset format x \"%g\"\n";
  // GPUs and ranks are whole: a linear axis of them gets a tic per one (no 1.5, 2.5).
  if (!logx && (p.xlabel.find("GPUs") != std::string::npos || p.xlabel.find("ranks") != std::string::npos))
    gp << "set xtics 1\nset format x \"%.0f\"\n";
  const bool logy = log_axis(p, p.yscale, 1);
  if (logy) gp << "set logscale y\nset format y \"%g\"\n";
  if (!logy && p.y_from_zero) gp << "set yrange [0:*]\n";
  gp << p.extra;
  const std::string size = std::to_string(p.width) + "," + std::to_string(p.height);
  gp << "set terminal pngcairo size " << size << " font \"sans,10\" noenhanced\n";
  gp << "set output " << quoted(p.name + ".png") << "\n";
  gp << "plot ";
  for (size_t i = 0; i < clauses.size(); ++i) gp << (i ? ", \\\n     " : "") << clauses[i];
  gp << "\n";
  gp << "set terminal svg size " << size << " font \"sans,10\" noenhanced\n";
  gp << "set output " << quoted(p.name + ".svg") << "\n";
  gp << "replot\n";
  gp << "unset output\n";
  std::ofstream(dir + "/" + p.name + ".dat") << dat.str();
  std::ofstream(dir + "/" + p.name + ".gp") << gp.str();
  return true;
}

bool render_plots(const std::string& dir, const std::vector<std::string>& names) {
  bool ok = true;
  for (const std::string& n : names) {
    const pid_t pid = fork();
    SPB_CHECK(pid >= 0, "fork");
    if (pid == 0) {
      if (chdir(dir.c_str()) != 0) _exit(126);
      const std::string script = n + ".gp";
      execlp("gnuplot", "gnuplot", script.c_str(), (char*)nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      std::fprintf(stderr, "spbench report: %s\n",
                   rc == 127 ? "gnuplot not found: the .gp scripts and data are written, the images are not"
                             : ("gnuplot failed on " + dir + "/" + n + ".gp").c_str());
      ok = false;
      if (rc == 127) break;
    }
  }
  return ok;
}

}  // namespace spb
