#include "harness/compare.h"

#include "harness/error.h"

namespace spb {
void add_compare_command(CLI::App& app, CompareOptions& o) {
  app.add_option("base", o.base, "the baseline CSV")->required();
  app.add_option("new", o.next, "the CSV to compare with it")->required();
  app.add_option("--threshold", o.threshold, "relative slowdown that counts (default 0.05)");
}
int run_compare(const CompareOptions&) { throw UsageError("spbench compare: not built yet"); }
}  // namespace spb
