// spbench report: the plots of the collective and operator levels (time against GPUs, state size and block size;
// weak and strong scaling) and how a figure goes into the README.
#include "report/src/report_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <tuple>

namespace spb {
namespace report_detail {

// --- plots ------------------------------------------------------------------------------------------------------------
// Sorts a plot's measured series in the tables' order of methods (or of patterns).
std::string order_key(const std::vector<std::string>& order, const std::string& method, const std::string& title) {
  const size_t i = size_t(std::find(order.begin(), order.end(), method) - order.begin());
  return fmt("%04.0f", double(i)) + title;
}

Figure draw(Context& c, const PlotSpec& p, const std::string& caption, const std::string& missing) {
  const bool has_ours = std::any_of(p.series.begin(), p.series.end(), [](const PlotSeries& s) {
    return !s.rows.empty() && s.kind != SeriesKind::paper;
  });
  // A caption promises the paper's numbers only where some are drawn.
  const bool has_paper = std::any_of(p.series.begin(), p.series.end(), [](const PlotSeries& s) {
    return !s.rows.empty() && s.kind == SeriesKind::paper;
  });
  const std::string said = has_paper || caption.find("paper") == std::string::npos
                               ? caption
                               : caption + " (No number of the paper is drawn: it published none at this setting.)";
  if (has_ours && write_plot(c.plots_dir, p)) {
    c.plots.push_back(p.name);
    return {p.name, said, ""};
  }
  return {p.name, caption, missing};
}

std::string class_label(bool cpu) { return cpu ? "CPU ranks" : "GPUs"; }

Figure plot_collective_vs_gpus(Context& c, bool cpu) {
  // The paper's size where measured; on CPU ranks the largest size measured at two world sizes or more.
  double bytes = kTable2Bytes;
  std::map<double, std::set<int>> worlds_at;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && is_cpu_row(r) == cpu) worlds_at[num(r, "bytes")].insert(inum(r, "world_size"));
  if (!worlds_at.count(kTable2Bytes))
    for (auto& [b, w] : worlds_at)
      if (w.size() >= 2) bytes = b;
  const std::string timing = shown_timing(c, cpu);
  auto keep = [&](const Row& r) {
    return col(r, "level") == "collective" && is_cpu_row(r) == cpu && num(r, "bytes") == bytes && ms(r) > 0 &&
           timing_of(r) == timing && (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems));
  };
  auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "world_size"); };
  std::map<std::string, PlotSeries> series;
  for (auto& [k, r] : newest_by(c.res.rows, keep, key)) {
    PlotSeries& s = add_series(series, collective_methods(c, cpu), measured_of(col(*r, "method"), *r));
    s.rows.push_back({num(*r, "world_size"), ms(*r)});
  }
  PlotSpec p;
  p.name = cpu ? "cpu_collective_vs_gpus" : "collective_vs_gpus";
  p.title = "Collective time vs " + class_label(cpu) + " (" + bytes_str(bytes) + " state per rank, All-Scan block " +
            int_str(kPaperBlockElems) + " elements)";
  p.xlabel = cpu ? "CPU ranks (MPI processes)" : "number of GPUs";
  p.ylabel = "time per call (ms)";
  for (auto& [k, s] : series) p.series.push_back(s);
  if (!cpu)
    for (const char* pat : {"allscan", "allgather"}) {
      PlotSeries s = paper_series(pat, "H100, Table 2");
      for (int P : kPaperGpus) {
        const double v = paper_value(c.paper, "collective", P, kTable2Seq, pat);
        if (std::isfinite(v)) s.rows.push_back({double(P), v});
      }
      p.series.push_back(s);
    }
  return draw(c, p,
              "Collective time against the number of " + class_label(cpu) + ": measured (" + timed_words(timing) +
                  ")" + (cpu ? "" : " and the paper's Table 2 (latency)") + ".",
              "no " + std::string(cpu ? "CPU" : "GPU") + " collective rows yet");
}

Figure plot_collective_vs_bytes(Context& c, bool cpu) {
  int P = 0;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && is_cpu_row(r) == cpu) P = std::max(P, inum(r, "world_size"));
  const std::string timing = shown_timing(c, cpu);
  auto keep = [&](const Row& r) {
    return col(r, "level") == "collective" && is_cpu_row(r) == cpu && is(r, "world_size", P) && ms(r) > 0 &&
           timing_of(r) == timing &&
           (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems) ||
            num(r, "bytes") < 4 * kPaperBlockElems);
  };
  auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "bytes"); };
  std::map<std::string, PlotSeries> series;
  for (auto& [k, r] : newest_by(c.res.rows, keep, key)) {
    PlotSeries& s = add_series(series, collective_methods(c, cpu), measured_of(col(*r, "method"), *r));
    s.rows.push_back({num(*r, "bytes"), ms(*r)});
  }
  PlotSpec p;
  p.name = cpu ? "cpu_collective_vs_bytes" : "collective_vs_bytes";
  p.title = "Collective time vs state size on " + std::to_string(P) + " " + class_label(cpu) + " (All-Scan block " +
            int_str(kPaperBlockElems) + " elements)";
  p.xlabel = "per-rank state (bytes)";
  p.extra = "set format x \"%.0b %BB\"\n";
  p.ylabel = "time per call (ms)";
  for (auto& [k, s] : series) p.series.push_back(s);
  return draw(c, p,
              "Collective time against the per-rank state size at the largest world size measured (" +
                  timed_words(timing) + ").",
              "no " + std::string(cpu ? "CPU" : "GPU") + " collective rows yet");
}

Figure plot_allscan_vs_block(Context& c, bool cpu) {
  // The paper's size if swept over blocks there, else the largest size with two block sizes or more.
  std::map<double, std::set<double>> blocks_at;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && col(r, "method") == "allscan" && is_cpu_row(r) == cpu)
      blocks_at[num(r, "bytes")].insert(num(r, "block_elems"));
  double bytes = 0;
  for (auto& [b, s] : blocks_at)
    if (s.size() >= 2) bytes = b;
  if (blocks_at.count(kTable2Bytes) && blocks_at[kTable2Bytes].size() >= 2) bytes = kTable2Bytes;
  const std::string timing = shown_timing(c, cpu);
  auto keep = [&](const Row& r) {
    return col(r, "level") == "collective" && col(r, "method") == "allscan" && is_cpu_row(r) == cpu &&
           num(r, "bytes") == bytes && ms(r) > 0 && timing_of(r) == timing;
  };
  auto key = [](const Row& r) {
    return col(r, "world_size") + "|" + col(r, "gpu") + "|" + col(r, "backend") + "|" + col(r, "block_elems");
  };
  const auto rows = newest_by(c.res.rows, keep, key);
  std::set<int> worlds;
  for (auto& [k, r] : rows) worlds.insert(inum(*r, "world_size"));
  auto colour = [&](int P) { return int(std::distance(worlds.begin(), worlds.find(P))); };
  std::map<std::pair<int, std::string>, PlotSeries> series;
  for (auto& [k, r] : rows) {
    const int P = inum(*r, "world_size");
    PlotSeries fresh = measured_of("allscan", *r, "P=" + std::to_string(P), colour(P));
    PlotSeries& s = series.emplace(std::pair{P, fresh.title}, fresh).first->second;
    s.rows.push_back({num(*r, "block_elems"), ms(*r)});
  }
  PlotSpec p;
  p.name = cpu ? "cpu_allscan_vs_block" : "allscan_vs_block";
  p.title = "All-Scan time vs block size (" + bytes_str(bytes) + " state per rank)";
  p.xlabel = "All-Scan block (fp32 elements; K = state / block)";
  p.ylabel = "time per call (ms)";
  for (auto& [k, s] : series) p.series.push_back(s);
  return draw(c, p, "All-Scan time against its block size, measured (a colour per world size; " + timed_words(timing) +
                    "): small blocks pay the per-hop latency K times, large blocks lose the pipelining over the P-1 "
                    "hops.",
              "no " + std::string(cpu ? "CPU" : "GPU") + " All-Scan rows with two block sizes or more yet");
}

std::vector<Figure> plot_operator_vs_gpus(Context& c, bool cpu) {
  std::vector<Figure> figs;
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
    for (auto& [k, r] : newest_by(c.res.rows, keep, key)) {
      PlotSeries& s = add_series(series, operator_methods(c), measured_of(col(*r, "method"), *r));
      s.rows.push_back({num(*r, "world_size"), ms(*r)});
    }
    PlotSpec p;
    p.name = std::string(cpu ? "cpu_" : "") + "operator_vs_gpus_" + (cpu ? shape.tag() + "_" : "") + "L" + std::to_string(L);
    p.title = "Operator forward+backward vs " + class_label(cpu) + " (" + shape.str() + ", " + std::to_string(L) +
              " tokens per rank)";
    p.xlabel = cpu ? "CPU ranks (MPI processes)" : "number of GPUs";
    p.ylabel = "forward + backward time (ms)";
    for (auto& [k, s] : series) p.series.push_back(s);
    if (!cpu)
      for (const std::string& m : operator_methods(c)) {
        PlotSeries s = paper_series(m, "H100, Table " + std::string(L == 16384 ? "3" : "4"));
        for (int P : kPaperGpus) {
          const double v = paper_value(c.paper, "operator", P, L, m);
          if (std::isfinite(v)) s.rows.push_back({double(P), v});
        }
        if (!s.rows.empty()) p.series.push_back(s);
      }
    figs.push_back(draw(c, p,
                        "Operator forward+backward time per method against the number of " + class_label(cpu) + ", " +
                            std::to_string(L) + " tokens per rank: measured" + (cpu ? "" : ", the paper's") +
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
      PlotSeries& s = add_series(
          series, operator_methods(c),
          measured_of(m, *r, col(*r, "block_elems") != "0" && m == "zeco" ? "block " + col(*r, "block_elems") : ""));
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
    p.xlabel = cpu ? "CPU ranks (MPI processes)" : "number of GPUs";
    p.ylabel = weak ? "throughput per rank (tokens/s, forward+backward)" : "forward + backward time (ms)";
    p.y_from_zero = weak;
    if (weak) p.extra = "set format y \"%.1s%c\"\n";
    for (auto& [k, s] : series) p.series.push_back(s);
    if (!weak && std::isfinite(dp_first)) {
      PlotSeries ideal = reference_series(p_first == 1 ? std::string("ideal: dp at P=1, divided by P")
                                                       : "ideal: dp at P=" + std::to_string(p_first) + " x " +
                                                             std::to_string(p_first) + "/P");
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

std::string figure_md(const Figure& f) {
  if (!f.missing.empty()) return "- *" + f.caption + "* Not drawn: " + f.missing + ".\n";
  return "![" + f.caption + "](plots/" + f.name + ".png)\n\n" + f.caption + " ([SVG](plots/" + f.name +
         ".svg), [data](plots/" + f.name + ".dat), [script](plots/" + f.name + ".gp))\n\n";
}

}  // namespace report_detail
}  // namespace spb
