// spbench report: the paper's Tables 2-6 with our measured numbers, the cost model's predictions and the paper's
// numbers side by side, the plots, and a section for CPU-rank rows. See report.h for what is written where. This file
// is the command: its options, and run_report, which assembles the sections (report_common.h lists where each lives).
#include "report/src/report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "report/src/report_common.h"
#include "runtime/error.h"

namespace spb {

namespace fs = std::filesystem;

void add_report_command(CLI::App& app, ReportOptions& o) {
  app.add_option("--results", o.results, "directory of result CSVs (every *.csv is read; sim/*.csv as simulated rows)");
  app.add_option("--paper", o.paper, "the paper's numbers (paper_tables.csv)");
  app.add_option("--out", o.out, "output directory (README.md, tables/, plots/)");
  app.add_flag("!--no-plots", o.plots, "write the gnuplot scripts and data but do not run gnuplot");
  app.add_option("--repo", o.repo,
                 "the git repository whose history each row's commit is checked against (default: the one holding "
                 "--results)");
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

using namespace report_detail;

namespace {

// Removes what an earlier report wrote, so nothing stale survives a regeneration.
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
  Context c{o, load_results(o.results), load_paper(o.paper), o.model_params()};
  c.plots_dir = o.out + "/plots";
  c.tables_dir = o.out + "/tables";
  std::error_code ec;
  fs::create_directories(c.plots_dir, ec);
  SPB_USAGE(!ec, "--out " + o.out + ": cannot create " + c.plots_dir + " (" + ec.message() + ")");
  fs::create_directories(c.tables_dir, ec);
  SPB_USAGE(!ec, "--out " + o.out + ": cannot create " + c.tables_dir + " (" + ec.message() + ")");
  clean(c.plots_dir, {".png", ".svg", ".gp", ".dat"});
  clean(c.tables_dir, {".csv"});

  {
    CodeStates states(o.repo.empty() ? o.results : o.repo);
    c.res.mark_code(states);
    c.code_states = states.all();
  }
  c.ref_gpu = reference_gpu(c.res.rows);
  resolve_network(c);
  // Every prediction comes from a fit on P <= kHoldOutFitMaxWorld, the fit whose hold-out the report prints.
  if (!c.ref_gpu.empty()) {
    c.gpu_fit = fit_machine(c.res.rows, c.ref_gpu, c.params);
    c.gpu_holdout = hold_out_by_world(c.res.rows, c.ref_gpu, c.params);
  }
  bool cpu_rows = false;
  for (auto& r : c.res.rows) cpu_rows |= is_cpu_row(r);
  if (cpu_rows) {
    c.cpu_fit = fit_machine(c.res.rows, "cpu", c.params);
    c.cpu_holdout = hold_out_by_world(c.res.rows, "cpu", c.params);
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
     << "- **model prediction**: the alpha-beta cost model (below), fitted to the measured rows of one machine at P <= "
     << kHoldOutFitMaxWorld << " (one node), the fit whose error on that machine's rows of larger P (held out) is "
        "printed beside its predictions; every number for more GPUs than were measured is one of these. Where a "
        "machine has no rows of P <= " << kHoldOutFitMaxWorld << ", the report says so instead of predicting.\n"
     << "- **paper**: ZeCO (NeurIPS 2025), measured on up to 256 H100 80GB; \"" << kNotPublished
     << "\" where the summary did not give the number.\n\n"
     << "Ratios are between methods on the same machine and world size (method ÷ the table's reference), so they "
        "can be compared across machines where the times cannot.\n\n";
  md << section_data(c) << section_code_changed(c);

  const TableDef t2 = collective_table(c);
  md << gpu_table(c, t2, "Table 2: collective communication, All-Gather vs All-Scan",
                  "Per-rank state 2 MiB (32 heads x 128 x 128 fp32, `bytes=2097152`), All-Scan block 16384 elements "
                  "(64 KiB, K=32); time of one collective call in ms (`spbench collective`). allgather is LASP-2's "
                  "collective, allscan ZeCO's, chain LASP-1's; ring and alltoall are listed where measured.",
                  "(ms)");
  md << section_floors(c);
  for (long long L : {16384LL, 32768LL}) {
    const TableDef t = operator_table(c, L);
    md << gpu_table(c, t,
                    std::string(L == 16384 ? "Table 3" : "Table 4") + ": operator forward+backward, " +
                        std::to_string(L) + " tokens per GPU",
                    "GLA attention with each SP method, one forward and one backward: B=1, H=16, dk=dv=128, " +
                        std::to_string(L) + " tokens per GPU, All-Scan block 16384 elements, bf16 (`spbench "
                        "operator`); time in ms. dp is the ideal (no communication).",
                    "(ms)");
  }
  md << section_model_level(c, 16384, "5") << section_model_level(c, 32768, "6") << section_model_rows(c)
     << section_fla(c);
  md << section_cost_model(c);
  md << section_simulated_nodes(c);
  md << section_beyond_one_node(c);
  md << section_simulation(c);
  md << section_paper_figures(c);

  std::set<std::string> gpu_backends;
  for (auto& r : c.res.rows)
    if (!is_cpu_row(r) && col(r, "level") != "kernel" && col(r, "pass") != "probe") gpu_backends.insert(col(r, "backend"));
  md << "## Plots\n\n" << plot_styles_md({gpu_backends.begin(), gpu_backends.end()})
     << "Each plot is drawn by gnuplot from the `.gp` script and `.dat` data beside it.\n\n";
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
  // The index of results/ that results/README.md carries between its markers (scripts/check_report.sh compares them).
  std::ofstream(o.out + "/results_index.md") << results_index_md(c);
  if (o.plots && !c.plots.empty()) render_plots(c.plots_dir, c.plots);
  if (fs::is_empty(c.plots_dir, ec)) fs::remove(c.plots_dir, ec);  // git keeps no empty directory: neither do we
  std::printf("spbench report: %s/README.md, %zu plots, %zu tables (%zu result rows, %zu timeline spans)\n",
              o.out.c_str(), c.plots.size(), size_t(std::distance(fs::directory_iterator(c.tables_dir), fs::directory_iterator())),
              c.res.rows.size() + c.res.node_rows.size(), c.res.timeline.size());
  return 0;
}

}  // namespace spb
