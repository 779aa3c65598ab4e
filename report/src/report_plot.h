// spbench report, its plots: each plot is a data file (NAME.dat, one gnuplot index block per series) and a script
// (NAME.gp) that draws it to NAME.png (pngcairo) and NAME.svg. Both text files are deterministic, name only files
// beside them, and are what scripts/check_report.sh compares; the images are drawn by gnuplot.
#pragma once

#include <string>
#include <vector>

namespace spb {

struct PlotSeries {
  std::string title;
  std::vector<std::vector<double>> rows;  // the columns `using` reads
  std::string using_ = "1:2";
  std::string style;                      // "with ..." and colours; see the helpers below
};

// Series styles: a method keeps its colour in every plot (its index in a fixed palette).
enum class SeriesKind { measured, model, paper, bars };
std::string series_style(SeriesKind kind, int colour, int point_type = 7);
std::string colour_spec(int colour);  // lc rgb "#..."
int method_colour(const std::string& method);
int backend_point(const std::string& backend);  // measured rows: a point type per backend

struct PlotSpec {
  std::string name;  // file stem
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  int logx_base = 2;
  std::string extra;  // more gnuplot commands, before the plot
  std::string key = "outside right top";
  int width = 1000, height = 560;
  std::vector<PlotSeries> series;
  bool empty() const;
};

// Writes DIR/NAME.dat and DIR/NAME.gp; returns false (and writes nothing) if no series has a point.
bool write_plot(const std::string& dir, const PlotSpec& p);
// Runs gnuplot on each DIR/NAME.gp inside DIR; false (with a message on stderr) if gnuplot is missing or fails.
bool render_plots(const std::string& dir, const std::vector<std::string>& names);

}  // namespace spb
