// spbench compare BASE.csv NEW.csv: regression tracking between two runs.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace spb {

struct CompareOptions {
  std::string base, next;
  double threshold = 0.05;  // relative; the rows' own spread is used where it is larger
};

void add_compare_command(CLI::App& app, CompareOptions& o);
int run_compare(const CompareOptions& o);  // 0: nothing slower; 1: a row is slower

}  // namespace spb
