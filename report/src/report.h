// spbench report: results/*.csv and the paper's numbers into report/ (tables, plots, the cost model's predictions).
//
// Output (deterministic: the same inputs give byte-identical text files; no dates or hosts but the rows' own):
//   OUT/README.md             the report: one table per paper table, the cost model, the plots, the CPU-rank section
//   OUT/results_index.md      per results file its machine, level, commits, rows and code state: the generated part of
//                             results/README.md (scripts/check_report.sh checks that they agree)
//   OUT/tables/*.csv          the tables' numbers, machine-readable
//   OUT/plots/NAME.{dat,gp}   each plot's data and gnuplot script; NAME.{png,svg} drawn from them by gnuplot
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "report/src/cost_model.h"

namespace spb {

struct ReportOptions {
  std::string results = "results";                      // directory of result CSVs
  std::string paper = "report/paper/paper_tables.csv";  // the paper's published numbers (see its README)
  std::string out = "report";                           // where the report goes
  bool plots = true;                                    // run gnuplot (the .gp and .dat files are written anyway)
  // The git repository whose history each row's commit is checked against (report_data.h CodeStates); "" for the one
  // that holds `results`.
  std::string repo;
  // The cost model's parameters that are not fitted (report/src/cost_model.h).
  int gpus_per_node = 8;
  double net_gbps = 400, net_latency_us = 5;  // the link between nodes
  bool net_given = false;                      // --net-gbps or --net-latency-us was given
  std::string constants;                       // --constants FILE (cost_model.h read_link_constants), "" for none
  // Share of a pass's local compute that can hide zeco's/lasp2's collective: 0 by default, as in their default order
  // (the incoming state is folded into the chunk states before the output; --overlap 1 of spbench operator hides it).
  double overlap = 0.0;
  ModelParams model_params() const;
};

void add_report_command(CLI::App& app, ReportOptions& o);
int run_report(const ReportOptions& o);

}  // namespace spb
