#include "report/src/compare.h"

#include <libfccp/csv.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "report/src/report_data.h"
#include "runtime/csv.h"
#include "runtime/error.h"

namespace spb {

void add_compare_command(CLI::App& app, CompareOptions& o) {
  app.add_option("base", o.base, "the baseline CSV")->required();
  app.add_option("new", o.next, "the CSV to compare with it")->required();
  app.add_option("--threshold", o.threshold, "relative change that counts (default 0.05; the rows' spread if larger)")
      ->check(CLI::NonNegativeNumber);
}

const char* verdict_name(Verdict v) { return v == Verdict::faster ? "faster" : v == Verdict::slower ? "SLOWER" : "same"; }

int Comparison::count(Verdict v) const {
  return int(std::count_if(rows.begin(), rows.end(), [v](const ComparedRow& r) { return r.verdict == v; }));
}

const std::vector<std::string>& compare_key_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> c;
    for (const auto& name : config_columns())
      if (name != "git_sha" && name != "date") c.push_back(name);
    c.push_back("bytes");  // collective rows: the per-rank size (not among the config columns)
    return c;
  }();
  return cols;
}

namespace {


// A collective row written before the `timing` column was timed back to back (timing_of): it matches a newer one.
std::string key_of(const Row& r) {
  std::string k;
  for (const auto& c : compare_key_columns()) k += (c == "timing" ? timing_of(r) : col(r, c)) + "\x1f";
  return k;
}

std::string describe(const Row& r) {
  std::string s;
  for (const auto& c : compare_key_columns())
    if (!col(r, c).empty()) s += (s.empty() ? "" : " ") + c + "=" + col(r, c);
  return s;
}

// The newest row (by date; a later row wins a tie) of each configuration, in order of first appearance.
std::vector<const Row*> newest(const std::vector<Row>& rows, std::map<std::string, const Row*>& by_key) {
  std::vector<const Row*> order;
  for (const Row& r : rows) {
    const std::string k = key_of(r);
    auto it = by_key.find(k);
    if (it == by_key.end()) {
      by_key[k] = &r;
      order.push_back(&r);
    } else if (col(*it->second, "date") <= col(r, "date")) {
      const Row* old = it->second;
      it->second = &r;
      std::replace(order.begin(), order.end(), old, &r);
    }
  }
  return order;
}

}  // namespace

double row_spread(const Row& r) {
  const double cv = num(r, "time_ms_cv");
  if (std::isfinite(cv) && cv >= 0) return cv;
  const double lo = num(r, "time_ms_min"), hi = num(r, "time_ms_max"), mean = num(r, "time_ms_mean");
  if (std::isfinite(lo) && std::isfinite(hi) && mean > 0 && hi >= lo) return (hi - lo) / (2 * mean);
  return 0;
}

Comparison compare_rows(const std::vector<Row>& base, const std::vector<Row>& next, double threshold) {
  Comparison out;
  std::map<std::string, const Row*> base_by, next_by;
  const auto base_order = newest(base, base_by);
  const auto next_order = newest(next, next_by);
  for (const Row* b : base_order) {
    auto it = next_by.find(key_of(*b));
    if (it == next_by.end()) {
      out.only_base.push_back(describe(*b));
      continue;
    }
    const Row* n = it->second;
    const double tb = num(*b, "time_ms_mean"), tn = num(*n, "time_ms_mean");
    if (!(tb > 0) || !(tn > 0)) {
      out.no_time.push_back(describe(*b));
      continue;
    }
    ComparedRow c;
    for (const auto& k : compare_key_columns()) c.config[k] = col(*b, k);
    c.base_ms = tb, c.new_ms = tn;
    c.change = tn / tb - 1;
    c.threshold = std::max({threshold, row_spread(*b), row_spread(*n)});
    // Symmetric in the ratio: slower when new/base > 1 + t, faster when base/new > 1 + t.
    c.verdict = tn > tb * (1 + c.threshold) ? Verdict::slower : tb > tn * (1 + c.threshold) ? Verdict::faster : Verdict::same;
    out.rows.push_back(c);
  }
  for (const Row* n : next_order)
    if (!base_by.count(key_of(*n))) out.only_new.push_back(describe(*n));
  return out;
}

std::vector<Row> read_results_for_compare(const std::string& path) {
  std::string header;
  try {
    io::LineReader in(path);
    const char* line = in.next_line();
    header = line ? line : "";
  } catch (const io::error::base& e) {
    throw UsageError(path + ": " + e.what());
  }
  std::set<std::string> cols;
  std::stringstream ss(header);
  for (std::string c; std::getline(ss, c, ',');) cols.insert(c);
  for (const char* need : {"level", "method", "world_size", "time_ms_mean"})
    SPB_USAGE(cols.count(need), path + ": not a spbench results CSV (no '" + need + "' column in the header line)");
  return read_csv(path);
}

int run_compare(const CompareOptions& o) {
  const auto base = read_results_for_compare(o.base);
  const auto next = read_results_for_compare(o.next);
  const Comparison c = compare_rows(base, next, o.threshold);
  auto shas = [](const std::vector<Row>& rows) {
    std::set<std::string> s;
    for (const auto& r : rows) s.insert(col(r, "git_sha"));
    std::string out;
    for (const auto& x : s) out += (out.empty() ? "" : " ") + (x.empty() ? std::string("-") : x);
    return out;
  };
  std::printf("# spbench compare\n#   base %s: %zu rows, git %s\n#   new  %s: %zu rows, git %s\n", o.base.c_str(),
              base.size(), shas(base).c_str(), o.next.c_str(), next.size(), shas(next).c_str());
  std::printf("# slower/faster: a change beyond %.1f%% or the rows' own spread (time_ms_cv), whichever is larger; "
              "times are time_ms_mean\n#\n",
              100 * o.threshold);
  std::printf("# %-10s %-9s %-7s %5s %5s %5s %4s %4s %8s %7s %5s %7s %9s %-14s %11s %11s %8s %7s  %s\n", "level",
              "method", "backend", "ranks", "batch", "heads", "dk", "dv", "tok/rank", "block", "dtype", "pass", "bytes",
              "gpu", "base_ms", "new_ms", "change", "noise", "verdict");
  for (const auto& r : c.rows) {
    auto v = [&](const char* col) { return r.config.at(col).c_str(); };
    std::printf("  %-10s %-9s %-7s %5s %5s %5s %4s %4s %8s %7s %5s %7s %9s %-14s %11.5g %11.5g %+7.1f%% %6.1f%%  %s\n",
                v("level"), v("method"), v("backend"), v("world_size"), v("batch"), v("heads"), v("dk"), v("dv"),
                v("tokens_per_rank"), v("block_elems"), v("dtype"), v("pass"), r.config.at("bytes").empty() ? "-" : v("bytes"),
                v("gpu"), r.base_ms, r.new_ms, 100 * r.change, 100 * r.threshold, verdict_name(r.verdict));
  }
  auto list = [](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    std::printf("# %s (%zu):\n", what, v.size());
    for (const auto& s : v) std::printf("#   %s\n", s.c_str());
  };
  list("only in base", c.only_base);
  list("only in new", c.only_new);
  list("no time in one of them", c.no_time);
  const int slower = c.count(Verdict::slower);
  std::printf("# faster %d, same %d, slower %d, only in base %zu, only in new %zu\n", c.count(Verdict::faster),
              c.count(Verdict::same), slower, c.only_base.size(), c.only_new.size());
  // Nothing compared is no evidence of no regression (two files of other configurations, or a run that wrote no row):
  // it fails too, and says so.
  std::printf("# %s\n", slower ? "REGRESSION: a row is slower"
                               : c.rows.empty() ? "FAILED: no row in common, nothing compared" : "no row is slower");
  return slower || c.rows.empty() ? 1 : 0;
}

}  // namespace spb
