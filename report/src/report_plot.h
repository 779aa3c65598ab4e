// spbench report, its plots: each plot is a data file (NAME.dat, one gnuplot index block per series) and a script
// (NAME.gp) that draws it to NAME.png (pngcairo) and NAME.svg. Both text files are deterministic, name only files
// beside them, and are what scripts/check_report.sh compares; the images are drawn by gnuplot.
#pragma once

#include <string>
#include <vector>

namespace spb {

// What a series is. Its style says so (report_plot.cpp), its legend title names it, and the data file heads its
// block with it ("# [2] measured: zeco (device-ll16) measured, NVIDIA H200").
enum class SeriesKind {
  measured,   // rows of results/: colour per method, dash type and filled point per backend, "M (BACKEND) measured"
  simulated,  // rows of the simulation (results/sim/): the method's colour, open points, "M (BACKEND) simulated, P"
  paper,      // the paper's published numbers: the method's colour, open circles, no line, "M paper"
  reference,  // a guide line (the ideal): thin, dotted, black
  bars,       // the timelines' spans
};
const char* kind_name(SeriesKind kind);

struct PlotSeries {
  std::string title;
  std::vector<std::vector<double>> rows;  // the columns `using` reads
  std::string using_ = "1:2";
  std::string style;  // "with ..." and colours; see the helpers below
  SeriesKind kind = SeriesKind::measured;
  // Text drawn in the plot beside points of this series, so that a reader of the image alone sees it, not only the
  // legend: `mark` beside every row's point ("†": measured on code that changed since; "?": of unknown code), and
  // each of `labels` at its point (a point of older code among current ones; where the All-Scan backend changes along
  // the GPUs).
  struct Label {
    double x, y;
    std::string text;
  };
  std::string mark;
  std::vector<Label> labels;
};
// The marks of older code in plots and tables: kOlderCodeMark where a row's code changed since it was measured,
// kUnknownCodeMark where its commit is not known here.
inline const char* const kOlderCodeMark = "†";
inline const char* const kUnknownCodeMark = "?";

// A method keeps its colour in every plot (its index in a fixed palette); a backend keeps its dash type and point type.
int method_colour(const std::string& method);
std::string colour_spec(int colour);           // lc rgb "#..."
std::string backend_dash(const std::string& backend);  // dt ... (never the reference line's dotted dt 3)
int backend_point(const std::string& backend);        // a filled point type
// A method's measured series, titled and styled. `backend`: what carried the rows; `where`: the machine and setting,
// after a comma ("" for none). `colour` < 0: the method's. (The paper's series: paper_series below; the simulation's:
// report_sim.cpp.)
PlotSeries measured_series(const std::string& method, const std::string& backend, const std::string& where,
                           int colour = -1);
// A measured series of another GPU kind than the reference style's: on an H100 the method's colour darkened, open
// points of the backend's shape, and the backend's H100 dash type (one per backend, none a H200 backend's), so that
// H100 and H200 series of one method and backend differ in colour, dash and marker. Other GPUs keep the style.
void restyle_for_gpu(PlotSeries& s, const std::string& gpu);
PlotSeries paper_series(const std::string& method, const std::string& where, int colour = -1);
PlotSeries reference_series(const std::string& title);
std::string bars_style(int colour);
// The key to the styles in words, for the report: which dash type is which backend, and so on (Markdown).
std::string plot_styles_md(const std::vector<std::string>& backends);

// An axis is logarithmic where its data spans more than a decade (all positive, max > 10 x min), linear otherwise;
// a plot may fix it.
enum class Scale { automatic, linear, log };

struct PlotSpec {
  std::string name;  // file stem
  std::string title, xlabel, ylabel;  // the labels say the unit
  Scale xscale = Scale::automatic, yscale = Scale::automatic;
  int logx_base = 2;
  bool y_from_zero = false;  // a linear y axis starts at 0
  std::string extra;  // more gnuplot commands, before the plot
  std::string key = "outside right top";
  int width = 1200, height = 560;
  std::vector<PlotSeries> series;
  bool empty() const;
};

// Writes DIR/NAME.dat and DIR/NAME.gp; returns false (and writes nothing) if no series has a point.
bool write_plot(const std::string& dir, const PlotSpec& p);
// Runs gnuplot on each DIR/NAME.gp inside DIR; false (with a message on stderr) if gnuplot is missing or fails.
bool render_plots(const std::string& dir, const std::vector<std::string>& names);

}  // namespace spb
