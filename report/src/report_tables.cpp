// spbench report: the paper's Tables 2-4 (collective and operator level), measured beside the paper's numbers, and
// the All-Scan against its floor.
#include "report/src/report_common.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

namespace spb {
namespace report_detail {

// Each measured All-Scan next to the floor the link probes give it: the state over one link's bandwidth
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
  const std::string timing = shown_timing(c, false);
  bool any = false;
  for (auto& [gpu, p] : probe) {
    if (p.first <= 0 || p.second <= 0) continue;
    s << "Link probes on " << gpu << " (`spbench collective --probe`, ranks 0 and 1): one-hop flag latency "
      << num_cell(p.first) << " us, pair bandwidth " << num_cell(p.second)
      << " GB/s. Floor of a K-block pipeline over P-1 hops = (K + P - 2) x block bytes / bandwidth + (P-1) x latency "
         "(K = 1: the chain, (P-1) x (latency + state / bandwidth)); for the packet protocols (device-ll, "
         "device-ll16), which pipeline word by word whatever K, the floor of any All-Scan: state / bandwidth + (P-1) x "
         "latency. Measured: the rows timed "
      << (timing == kLatency ? "as latency (one call after a barrier)"
                             : "back to back (a throughput: no latency row yet)")
      << ", `time_ms_mean`.\n\n"
      << "| GPUs | backend | state | block (elements) | measured (us) | floor (us) | measured / floor |\n"
      << "| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n";
    std::map<std::tuple<double, std::string, double, double>, const Row*> newest;
    for (auto& r : c.res.rows)
      if (col(r, "level") == "collective" && col(r, "method") == "allscan" && col(r, "gpu") == gpu &&
          timing_of(r) == timing && (num(r, "bytes") == kTable2Bytes || num(r, "bytes") == kTable2Bytes / 2)) {
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

// --- sections ---------------------------------------------------------------------------------------------------------
std::string section_data(const Context& c) {
  std::ostringstream s;
  s << "## Data\n\n";
  if (c.res.files.empty() && c.res.timeline_files.empty())
    s << "No result CSVs in `results/` yet: every table below shows the paper's numbers only, and no plot is drawn. "
         "Run a sweep (see the repository's README) and regenerate.\n\n";
  if (!c.res.file_rows.empty())
    s << "The files of `results/` (the same index is in `results/README.md`; a timeline file's rows are spans):\n\n"
      << results_index_md(c) << "\n";
  for (auto& [name, why] : c.res.skipped) s << "- `results/" << name << "`: skipped, " << why << "\n";
  std::map<std::tuple<std::string, std::string, std::string>, int> counts;  // (level, gpu, backend)
  for (auto& r : c.res.rows) counts[{col(r, "level"), col(r, "gpu"), col(r, "backend")}]++;
  for (auto& r : c.res.node_rows) counts[{col(r, "level"), col(r, "gpu"), col(r, "backend") + " (several nodes)"}]++;
  for (auto& r : c.res.sim_rows)
    counts[{col(r, "level"), col(r, "gpu"), col(r, "backend") + " (simulated, `" + col(r, "platform") + "`)"}]++;
  if (!counts.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (auto& [k, n] : counts) rows.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::to_string(n)});
    s << "\n" << md_table({"level", "gpu", "backend", "rows"}, rows, "lllr");
  }
  s << "\n";
  return s.str();
}

std::string section_code_changed(const Context& c) {
  std::ostringstream s;
  s << "## Rows of older code\n\n"
    << "Each row is checked against the code it measures: the source paths of its level (below) must not have changed "
       "between the row's commit (`git_sha`, a `-dirty` suffix stripped and said) and HEAD (`git diff -M "
       "--diff-filter=a SHA HEAD -- PATHS`; the folders' Markdown notes, files added since, and files moved whole or "
       "with only their `#include` lines or line comments changed left out). A measured "
       "number whose code changed since is marked **†** (and its \"measured on\" cell says \"code changed since\"), "
       "one whose commit is not in the repository **?** (\"commit unknown\"); in the plots such a series' legend "
       "ends in \"†\" or \"?\", and the mark stands beside each of its points. "
       "`tables/*.csv` carry each row's `git_sha` and `code_state` (current, changed, unknown).\n\n";
  std::vector<std::vector<std::string>> paths;
  for (const auto& m : measured_paths()) {
    std::vector<std::string> q;
    for (const auto& p : m.paths) q.push_back("`" + p + "`");
    paths.push_back({m.level, join(q, ", ")});
  }
  s << md_table({"level", "the source paths its numbers depend on"}, paths)
    << "\nA path after `!` does not count, though a folder listed before it holds it.\n\nLeft out on purpose: the harness's option parsing and CSV writing (`harness/`, `runtime/csv*`, "
       "`runtime/error*`, `cli/`) and the report itself, which time nothing, so that a fix there does not mark every "
       "row. A change there that moves a timing (where a timer starts, what a warm-up does) would need its path listed "
       "here (report/src/report_data.cpp, `measured_paths`).\n\n";
  // Per (commit, level): the rows and files it holds.
  std::map<std::pair<std::string, std::string>, std::pair<int, std::set<std::string>>> held;
  auto count = [&](const std::vector<Row>& v) {
    for (const Row& r : v) {
      if (is_simulated(r)) continue;  // (Gated DeltaNet's simulated rows: its section marks them)
      auto& h = held[{col(r, "git_sha"), code_level_of(r)}];
      h.first++;
      h.second.insert(c.res.file_of(r));
    }
  };
  count(c.res.rows), count(c.res.node_rows), count(c.res.baseline_rows), count(c.res.gdn_rows);
  for (const Row& r : c.res.timeline) {
    auto& h = held[{col(r, "git_sha"), "timeline"}];
    h.first++;
    for (const auto& [name, n] : c.res.timeline_files) h.second.insert(name);  // timeline rows keep no file
  }
  std::vector<std::vector<std::string>> rows;
  int stale = 0, unknown = 0;
  for (const auto& [key, st] : c.code_states) {
    if (st.kind == CodeState::current) continue;
    const auto it = held.find(key);
    const int n = it == held.end() ? 0 : it->second.first;
    if (n == 0) continue;
    std::vector<std::string> files;
    if (it != held.end())
      for (const auto& f : it->second.second)
        if (!f.empty()) files.push_back("`" + f + "`");
    const bool changed = st.kind == CodeState::changed;
    (changed ? stale : unknown) += n;
    rows.push_back({changed ? "†" : "?", st.sha.empty() ? "—" : "`" + st.short_sha() + "`" + (st.dirty ? " (-dirty: "
                    "uncommitted changes beside it)" : ""), key.second, std::to_string(n), join(files, ", "),
                    changed ? "code changed since: " + join(st.changed_paths, ", ") : "commit unknown: " + st.why});
  }
  if (rows.empty()) {
    s << "Every row is of the current code of its level.\n\n";
    return s.str();
  }
  s << stale << " rows of code changed since, " << unknown << " of unknown code:\n\n"
    << md_table({"", "commit", "level", "rows", "files", "what changed since (HEAD)"}, rows, "lllrll") << "\n";
  return s.str();
}

std::string results_index_md(const Context& c) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, file_rows] : c.res.file_rows) {
    std::set<std::string> levels, code_levels, shas, kinds, states, hosts, drivers, platforms;
    for (const Row& r : file_rows) {
      if (is_simulated(r)) platforms.insert(col(r, "platform"));
      if (!col(r, "host").empty()) hosts.insert(col(r, "host"));
      // Rows written before the driver's version was read carry the CUDA driver API's version as "cuda-X".
      const std::string& d = col(r, "driver");
      if (!d.empty()) drivers.insert(d.rfind("cuda-", 0) == 0 ? "CUDA driver API " + d.substr(5) + " (driver version not recorded)" : d);
      const std::string level = level_of(r).empty() && name.find("timeline") != std::string::npos ? "timeline"
                                                                                                   : level_of(r);
      levels.insert(level);
      code_levels.insert(level == "timeline" ? level : code_level_of(r));  // a simulated row: sim-<level>
      shas.insert(col(r, "git_sha").substr(0, 12));
      kinds.insert(col(r, "gpu"));
    }
    // The code state of each (commit, level) in the file, as the report judged it.
    for (const auto& sha : shas)
      for (const auto& level : code_levels)
        for (const auto& [key, st] : c.code_states)
          if (key.second == level && key.first.substr(0, 12) == sha)
            states.insert(st.kind == CodeState::current ? "current" : st.kind == CodeState::changed
                                                                          ? "code changed since " + st.short_sha()
                                                                          : "commit unknown");
    std::vector<std::string> q;
    for (const auto& x : shas) q.push_back(x.empty() ? "—" : "`" + x + "`");
    // A file of the simulation (results/sim/) says so, and on which SimGrid platform(s) its rows were simulated.
    std::string machine = join({kinds.begin(), kinds.end()}, ", ");
    if (!platforms.empty())
      machine += "; `simulated`, platform `" + join({platforms.begin(), platforms.end()}, "`, `") + "`";
    rows.push_back({"`" + name + "`", machine, join({levels.begin(), levels.end()}, ", "),
                    join(q, ", "), std::to_string(file_rows.size()), join({states.begin(), states.end()}, "; "),
                    hosts.empty() ? "—" : join({hosts.begin(), hosts.end()}, ", "),
                    drivers.empty() ? "—" : join({drivers.begin(), drivers.end()}, ", ")});
  }
  if (rows.empty()) return "No results files.\n";
  return md_table({"file", "machine (gpu column)", "level", "commit(s)", "rows", "code (against HEAD)", "host",
                   "driver"},
                  rows, "llllrlll");
}

std::string gpu_table(Context& c, const TableDef& t, const std::string& heading, const std::string& setting,
                      const std::string& value) {
  std::ostringstream s;
  s << "## " << heading << "\n\n" << setting << "\n\n";
  const auto lines = build_lines(c, t);
  write_table_csv(c, t.id, lines);
  if (lines.empty()) {
    s << "Nothing at this setting yet: no GPU rows, and the paper's numbers are " << kNotPublished << ".\n\n";
  } else {
    s << render_lines(lines, t.ref, value) << "\n";
    s << "Against the paper:\n\n" << trend_paragraph(lines, t) << "\n";
  }
  s << predicted_in_md(c, t);
  return s.str();
}

std::string shown_timing(const Context& c, bool cpu) {
  for (const Row& r : c.res.rows)
    if (col(r, "level") == "collective" && is_cpu_row(r) == cpu && timing_of(r) == kLatency) return kLatency;
  return kBackToBack;
}

std::string timed_words(const std::string& timing) {
  return timing == kLatency ? "timed as latency: one call after a barrier"
                            : timing == kBackToBack ? "timed back to back: a throughput" : "timed " + timing;
}

TableDef collective_table(const Context& c, const std::string& timing) {
  TableDef t2;
  const bool latency = timing == kLatency;
  t2.id = latency ? "table2" : "table2_back_to_back";
  t2.ref = "allscan";
  // Back-to-back calls measure a throughput: not the paper's timing, so none of its numbers beside them.
  t2.paper_level = latency ? "collective" : "";
  t2.paper_seq = kTable2Seq;
  t2.methods = collective_methods(c, false);
  t2.setting = [timing](const Row& r) {
    return col(r, "level") == "collective" && num(r, "bytes") == kTable2Bytes && is(r, "dv", 128) &&
           timing_of(r) == timing && (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems));
  };
  t2.predicted_in = "Table 2 predicted: the collective call on " + std::string(kSimPredictPlatform) +
                    (latency ? ", latency (the paper's timing)" : ", back-to-back calls (a throughput)");
  return t2;
}

std::string section_table2(Context& c) {
  std::ostringstream s;
  s << "## Table 2: collective communication, All-Gather vs All-Scan\n\n"
    << "Per-rank state 2 MiB (32 heads x 128 x 128 fp32, `bytes=2097152`), All-Scan block 16384 elements (64 KiB, "
       "K=32); time of one collective call in ms (`spbench collective`). allgather is LASP-2's collective, allscan "
       "ZeCO's, chain LASP-1's; ring and alltoall are listed where measured. Two timings (`--timing`, the `timing` "
       "column): **latency**, the paper's: before every call a barrier of the hosts, then one on the communication "
       "stream, then the call alone, each rank timing its own; a call's time is the slowest rank's, and the table "
       "shows the mean over the iterations (`time_ms_mean`). **back-to-back**: the calls enqueued one after another "
       "with an event after each (nccl-tests' way), so a chain's calls overlap: a throughput, in a table of its own "
       "and not set against the paper (rows written before the column was timed so).\n\n";
  const TableDef lat = collective_table(c, kLatency), b2b = collective_table(c, kBackToBack);
  s << "### Latency (the paper's timing)\n\n";
  const auto lines = build_lines(c, lat);
  write_table_csv(c, lat.id, lines);
  if (std::none_of(lines.begin(), lines.end(), [](const Line& l) { return l.row != nullptr; }))
    s << "No GPU row of the latency timing at this setting yet (`spbench collective --timing latency`, the default): "
         "the paper's numbers alone.\n\n";
  s << render_lines(lines, lat.ref, "(ms)") << "\nAgainst the paper:\n\n" << trend_paragraph(lines, lat) << "\n";
  s << "### Back-to-back calls (a throughput, not compared with the paper)\n\n";
  const auto back = build_lines(c, b2b);
  write_table_csv(c, b2b.id, back);
  if (back.empty()) {
    s << "No GPU row timed back to back at this setting.\n\n";
  } else {
    s << render_lines(back, b2b.ref, "(ms)", false, "GPUs") << "\nRatios ÷ " << b2b.ref << ", back to back:\n\n"
      << ratio_paragraph(back, b2b) << "\n";
  }
  s << predicted_in_md(c, lat);
  return s.str();
}

TableDef operator_table(const Context& c, long long L) {
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
  t.predicted_in = "Table " + std::string(L == 16384 ? "3" : "4") + " predicted: operator forward+backward on " +
                   kSimPredictPlatform;
  return t;
}

}  // namespace report_detail
}  // namespace spb
