// spbench report: results/*.csv and the paper's numbers into report/ (tables, plots, the cost model's predictions).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace spb {

struct ReportOptions {
  std::string results = "results";                      // directory of result CSVs
  std::string paper = "../shared/paper/paper_tables.csv";  // the paper's published numbers
  std::string out = "report";                           // where the report goes
};

void add_report_command(CLI::App& app, ReportOptions& o);
int run_report(const ReportOptions& o);

}  // namespace spb
