// spbench report: the overlap timelines (results/*timeline*.csv) and the exposed communication they show.
#include "report/src/report_common.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <tuple>

namespace spb {
namespace report_detail {

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
      s.kind = SeriesKind::bars;
      s.style = pass ? "with boxxyerror fs solid 0.2 border " + colour_spec(colour_of[col(*r, "span")]) + " " +
                           colour_spec(colour_of[col(*r, "span")])
                     : bars_style(colour_of[col(*r, "span")]);
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
    p.xscale = p.yscale = Scale::linear;
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

}  // namespace report_detail
}  // namespace spb
