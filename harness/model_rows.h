// The model level's rows and printing: a method's CSV row and its config_key, the rerun check, rank 0's header and
// table lines.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/model_run.h"
#include "runtime/csv.h"
#include "sp/method.h"

namespace spb {

// What else sets what is computed or how it is timed: the rows' config_key.
std::string model_config_key(const ModelPlan& plan, double tolerance);
// A row of `method` without its measurement: what --resume compares with the CSV's rows (ran: nullptr), and what a
// measured row or the timeline starts from (ran: the method object that ran, which knows its own communication
// backend and head groups).
ResultRow model_row(const ModelRun& run, const std::string& method, const SpMethod* ran);
// The methods to measure: without --csv all of them; with it, those whose row the CSV (opened into `csv` on rank 0)
// does not hold yet, or all of them with --no-resume.
std::vector<std::string> model_methods_to_measure(const ModelRun& run, std::unique_ptr<CsvAppender>& csv);
// Rank 0's header: every parameter of the run, then the table's column names.
void print_model_header(const ModelRun& run);
// Rank 0's line of the table for one method.
void print_method_line(const ModelRun& run, const std::string& name, const MethodResult& r);
// The method's row, appended by rank 0 (the only rank with `csv`); every rank calls this, so that a row rank 0
// cannot write stops them all here.
void append_method_row(const ModelRun& run, CsvAppender* csv, const std::string& name, const MethodResult& r);

}  // namespace spb
