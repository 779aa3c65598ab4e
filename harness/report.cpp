#include "harness/report.h"

#include "harness/error.h"

namespace spb {
void add_report_command(CLI::App& app, ReportOptions& o) {
  app.add_option("--results", o.results, "directory of result CSVs");
  app.add_option("--paper", o.paper, "the paper's numbers (paper_tables.csv)");
  app.add_option("--out", o.out, "output directory");
}
int run_report(const ReportOptions&) { throw UsageError("spbench report: not built yet"); }
}  // namespace spb
