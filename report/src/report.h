// spbench report: results/*.csv and the paper's numbers into report/ (tables, plots, the simulation's predictions).
//
// Output (deterministic: the same inputs give byte-identical text files; no dates or hosts but the rows' own):
//   OUT/README.md             the report: one table per paper table, the simulation, the plots, the CPU-rank section
//   OUT/results_index.md      per results file its machine, level, commits, rows and code state: the generated part of
//                             results/README.md (scripts/check_report.sh checks that they agree)
//   OUT/tables/*.csv          the tables' numbers, machine-readable
//   OUT/plots/NAME.{dat,gp}   each plot's data and gnuplot script; NAME.{png,svg} drawn from them by gnuplot
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace spb {

struct ReportOptions {
  std::string results = "results";                      // directory of result CSVs
  std::string paper = "report/paper/paper_tables.csv";  // the paper's published numbers (see its README)
  std::string out = "report";                           // where the report goes
  bool plots = true;                                    // run gnuplot (the .gp and .dat files are written anyway)
  // The git repository whose history each row's commit is checked against (report_data.h CodeStates); "" for the one
  // that holds `results`.
  std::string repo;
};

void add_report_command(CLI::App& app, ReportOptions& o);
int run_report(const ReportOptions& o);

}  // namespace spb
