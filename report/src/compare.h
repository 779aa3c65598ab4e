// spbench compare BASE.csv NEW.csv: regression tracking between two runs (typically two commits on one machine).
//
// Rows are matched on their configuration (csv.h's config_columns() without git_sha, plus `bytes` for collective
// rows); where a file holds several rows of one configuration the newest `date` is compared. A row is slower when
// its time_ms_mean grew by more than the threshold: the larger of --threshold (default 5%) and the rows' own spread
// (time_ms_cv, or (max - min) / (2 mean) where no cv was recorded). Faster is the same margin the other way. The
// table is fixed-width, rows present in one file only are listed, and the exit code is 1 when any row is slower.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

namespace spb {

struct CompareOptions {
  std::string base, next;
  double threshold = 0.05;  // relative; the rows' own spread is used where it is larger
};

void add_compare_command(CLI::App& app, CompareOptions& o);
int run_compare(const CompareOptions& o);  // 0: nothing slower; 1: a row is slower, or no row in common

// The comparison itself, for tests and tools.
enum class Verdict { faster, same, slower };
const char* verdict_name(Verdict v);

struct ComparedRow {
  std::map<std::string, std::string> config;  // the matching columns
  double base_ms = 0, new_ms = 0;
  double change = 0;     // new / base - 1
  double threshold = 0;  // what counted as noise for this row
  Verdict verdict = Verdict::same;
};

struct Comparison {
  std::vector<ComparedRow> rows;                   // in the base file's order
  std::vector<std::string> only_base, only_new;    // configurations, as "col=value ..." text
  std::vector<std::string> no_time;                // matched, but a side has no time_ms_mean
  int count(Verdict v) const;
};

// The columns rows are matched on.
const std::vector<std::string>& compare_key_columns();
// Relative spread of one row's time: time_ms_cv, else (max - min) / (2 mean), else 0.
double row_spread(const std::map<std::string, std::string>& row);
Comparison compare_rows(const std::vector<std::map<std::string, std::string>>& base,
                        const std::vector<std::map<std::string, std::string>>& next, double threshold);
// Reads a results CSV for comparison; a UsageError names the file when it is not one.
std::vector<std::map<std::string, std::string>> read_results_for_compare(const std::string& path);

}  // namespace spb
