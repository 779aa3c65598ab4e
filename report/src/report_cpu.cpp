// spbench report: the CPU-rank section (operator, model and collective tables of rows measured on CPU ranks).
#include "report/src/report_common.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace spb {
namespace report_detail {

// The CPU-rank model rows: a table per (configuration, tokens per rank), with the last step's loss (equal losses
// across world sizes and methods are the SP equivalence that the model level's tests check).
std::string section_cpu_model(const Context& c) {
  std::set<std::pair<std::string, long long>> configs;
  std::map<std::string, const Row*> example;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "model" && is_cpu_row(r) && tokens_per_s(r) > 0) {
      configs.insert({model_config_key(r), lnum(r, "tokens_per_rank")});
      example[model_config_key(r)] = &r;
    }
  std::ostringstream s;
  std::set<std::string> ids;
  for (auto& [config, L] : configs) {
    const auto lines = model_lines(c, L, true, config);
    s << "### Model-level training, " << model_config_str(*example[config]) << ", " << L << " tokens per rank\n\n"
      << "Tokens per second per rank of one training step (`spbench model` on CPU ranks), and the last step's loss: "
         "every method and world size trains the same model on the same tokens, so a correct SP method ends with dp's "
         "loss (the SP equivalence).\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const Line& l : lines)
      rows.push_back({std::to_string(l.gpus), l.method, num_cell(l.measured), machine_of(*l.row),
                      num_cell(num(*l.row, "loss")), ratio_cell(l.r_measured)});
    s << md_table({"ranks", "method", "measured (tokens/s per rank)", "measured on (gpu, world size, backend, date)",
                   "loss (last step)", "÷ dp: measured"},
                  rows, "rlrlrr")
      << "\n";
    const Row& e = *example[config];
    std::string id = "cpu_model_B" + col(e, "batch") + "_H" + col(e, "heads") + "_hidden" + col(e, "hidden") +
                     "_layers" + col(e, "layers") + "_L" + std::to_string(L);
    if (!ids.insert(id).second) id += "_" + std::to_string(ids.size());
    write_table_csv(c, id, lines, true);
  }
  return s.str();
}

std::string section_cpu(Context& c, const std::vector<Figure>& figs) {
  std::ostringstream s;
  s << "## CPU ranks: the pipeline works (not comparable with the paper)\n\n";
  bool any = false;
  for (auto& r : c.res.rows) any |= is_cpu_row(r);
  if (!any) {
    s << "No CPU-rank rows in results/.\n\n";
    return s.str();
  }
  s << "Rows measured on CPU ranks (MPI processes, fp32, small shapes). They exercise every method, the checks and "
       "this report; their times say nothing about GPUs.\n\n";
  // Operator: one table per (shape, tokens per rank).
  std::set<std::pair<Shape, long long>> configs;
  for (auto& r : c.res.rows)
    if (operator_row(r, true)) configs.insert({shape_of(r), lnum(r, "tokens_per_rank")});
  for (auto& [shape, L] : configs) {
    TableDef t;
    t.id = "cpu_operator_" + shape.tag() + "_L" + std::to_string(L);
    t.ref = "dp";
    t.cpu = true;
    t.methods = operator_methods(c);
    t.setting = [shape = shape, L = L](const Row& r) {
      const Shape sh = shape_of(r);
      return operator_row(r, true) && !(sh < shape) && !(shape < sh) && is(r, "tokens_per_rank", double(L));
    };
    s << "### Operator forward+backward, " << shape.str() << ", " << L << " tokens per rank\n\n";
    const auto lines = build_lines(c, t);
    write_table_csv(c, t.id, lines);
    s << render_lines(lines, t.ref, "(ms)", false) << "\n";
  }
  s << section_cpu_model(c);
  // Collective: the paper's size where measured, else the largest size measured at two world sizes or more.
  std::map<double, std::set<int>> worlds_at;
  for (auto& r : c.res.rows)
    if (col(r, "level") == "collective" && is_cpu_row(r)) worlds_at[num(r, "bytes")].insert(inum(r, "world_size"));
  if (!worlds_at.empty()) {
    double bytes = worlds_at.rbegin()->first;
    for (auto& [b, w] : worlds_at)
      if (w.size() >= 2) bytes = b;
    if (worlds_at.count(kTable2Bytes)) bytes = kTable2Bytes;
    TableDef t;
    t.id = "cpu_collective";
    t.ref = "allscan";
    t.cpu = true;
    t.methods = collective_methods(c, true);
    const std::string timing = shown_timing(c, true);
    t.setting = [bytes, timing](const Row& r) {
      return col(r, "level") == "collective" && num(r, "bytes") == bytes && timing_of(r) == timing &&
             (col(r, "method") != "allscan" || is(r, "block_elems", kPaperBlockElems) ||
              bytes <= 4 * kPaperBlockElems);
    };
    s << "### Collectives, " << bytes_str(bytes) << " state per rank, All-Scan block " << kPaperBlockElems
      << " elements\n\n" << "Calls " << timed_words(timing) << " (`timing` " << timing << ").\n\n";
    const auto lines = build_lines(c, t);
    write_table_csv(c, t.id, lines);
    s << render_lines(lines, t.ref, "(ms)", false) << "\n";
  }
  s << "### Plots of the CPU rows\n\n";
  for (auto& f : figs) s << figure_md(f);
  s << "\n";
  return s.str();
}

}  // namespace report_detail
}  // namespace spb
