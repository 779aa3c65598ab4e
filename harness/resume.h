// A rerun skips what its CSV already holds (DESIGN §6): the operator and model levels open their CSV on rank 0 and
// agree, before anything runs, on which of the requested methods still need measuring.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/csv.h"

namespace spb {

// A file (or, with `dir`, a directory of files) that rank 0 alone writes, named by its flag.
struct OutputPath {
  std::string flag, path;
  bool dir = false;
};
// Rank 0 checks every non-empty path (check_output_file / check_output_dir) and every rank agrees on the verdict:
// called before anything is measured, so that a file that cannot be written stops every rank at once.
// MemAvailable of this node (/proc/meminfo), in bytes; 0 where it cannot be read.
double node_available_bytes();
// UsageError when a comma-separated --method list names a method twice (its rows would be written twice).
void require_distinct_methods(const std::string& list);

void check_outputs(const Bootstrap& boot, const std::vector<OutputPath>& outputs);

// Opens `path` on rank 0 (the schema plus `extra` columns; UsageError on every rank when it cannot) into `csv`, and
// returns the methods for which `in_csv(csv, method)` is false (every method where !resume), the same on every rank;
// rank 0 prints "# <method> <where>: already in <path>, skipped" for the others.
std::vector<std::string> methods_to_measure(const Bootstrap& boot, const std::string& path,
                                            const std::vector<std::string>& extra, bool resume,
                                            const std::vector<std::string>& methods,
                                            const std::function<bool(const CsvAppender&, const std::string&)>& in_csv,
                                            const std::string& where, std::unique_ptr<CsvAppender>& csv);

}  // namespace spb
