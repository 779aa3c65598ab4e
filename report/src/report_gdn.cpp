// spbench report: the Gated DeltaNet section (DESIGN §12): its kernels beside fla's on one GPU, its operator level
// measured, and simulated. The paper has no Gated DeltaNet numbers, so nothing here has a paper column.
#include "report/src/report_common.h"

#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace spb {
namespace report_detail {
namespace {

const std::vector<std::string> kMethodOrder = {"dp", "zeco", "lasp2", "lasp1", "ring", "ulysses"};

// A cell for a row's mean time, its older-code or unknown-commit mark beside it.
std::string time_cell(const Row& r) {
  return num_cell(ms(r)) + (code_changed(r) ? " †" : code_unknown(r) ? " ?" : "");
}

std::string shape_str(const Row& r) {
  return "H=" + col(r, "heads") + ", dk=" + col(r, "dk") + ", dv=" + col(r, "dv") + ", " + col(r, "dtype");
}

// spbench's kernels (method gdn) beside fla's (fla-gdn), per GPU, shape, length and pass.
std::string kernels(const Context& c) {
  using Key = std::tuple<std::string, std::string, long long, std::string>;  // gpu, shape, tokens, pass
  std::map<Key, const Row*> ours, fla;
  for (const Row& r : c.res.gdn_rows) {
    if (col(r, "level") != "kernel") continue;
    const Key k{col(r, "gpu"), shape_str(r), lnum(r, "tokens_per_rank"), col(r, "pass")};
    (col(r, "method") == "gdn" ? ours : fla)[k] = &r;  // the last row of a key (files in name order) stands
  }
  std::ostringstream s;
  s << "### Kernels on one GPU: spbench's beside fla's\n\n";
  if (ours.empty() && fla.empty()) return s.str() + "No kernel rows of Gated DeltaNet in results/.\n\n";
  s << "One forward (`fwd`) or forward+backward (`fwd_bwd`) of the whole sequence on one GPU, B=1, bf16 q, k, v, fp32 "
       "gates: spbench's CUDA stages (`bench_gdn_cuda`, method gdn) and fla's `chunk_gated_delta_rule` "
       "(`baselines/pytorch/fla_gdn_kernel.py`, method fla-gdn), mean ms. fla ÷ spbench above 1 means spbench is "
       "faster. fla's backward runs only with its Triton guard lifted (note `triton_guard_lifted`).\n\n";
  std::set<Key> keys;
  for (auto& [k, r] : ours) keys.insert(k);
  for (auto& [k, r] : fla) keys.insert(k);
  std::vector<std::vector<std::string>> rows;
  for (const Key& k : keys) {
    const Row* a = ours.count(k) ? ours.at(k) : nullptr;
    const Row* b = fla.count(k) ? fla.at(k) : nullptr;
    rows.push_back({std::get<0>(k), std::get<1>(k), std::to_string(std::get<2>(k)), std::get<3>(k),
                    a ? time_cell(*a) : "not measured", b ? time_cell(*b) : "not measured",
                    a && b ? ratio_cell(ms(*b) / ms(*a)) : "—", b ? col(*b, "note") : ""});
  }
  s << md_table({"gpu", "shape", "tokens", "pass", "spbench (ms)", "fla (ms)", "fla ÷ spbench", "fla's note"}, rows,
                "llrlrrrl")
    << "\n";
  return s.str();
}

// The operator level (fwd_bwd), measured or simulated: a table per (machine, shape, tokens per GPU), methods down
// and GPU counts across, each cell the mean ms and its ratio over dp at that count.
std::string operator_tables(const Context& c, bool simulated) {
  using Key = std::tuple<std::string, std::string, long long>;  // machine (gpu or platform), shape, tokens per GPU
  std::map<Key, std::map<std::pair<std::string, int>, const Row*>> tables;
  for (const Row& r : c.res.gdn_rows) {
    if (col(r, "level") != "operator" || col(r, "pass") != "fwd_bwd" || is_simulated(r) != simulated) continue;
    const std::string machine = simulated ? "simulated, `" + col(r, "platform") + "`" : col(r, "gpu");
    tables[{machine, shape_str(r), lnum(r, "tokens_per_rank")}][{col(r, "method"), inum(r, "world_size")}] = &r;
  }
  std::ostringstream s;
  s << (simulated ? "### Operator level, simulated\n\n" : "### Operator level, measured\n\n");
  if (tables.empty())
    return s.str() + (simulated ? "No simulated Gated DeltaNet rows in results/sim/.\n\n"
                                : "No measured Gated DeltaNet operator rows in results/.\n\n");
  s << "Forward+backward of one Gated DeltaNet layer through each method (`spbench operator --attention gdn"
    << (simulated ? " --backend sim`, from GDN's stage table" : "`") << "), mean ms, and ÷ dp at the same GPU count.\n\n";
  for (const auto& [key, cells] : tables) {
    std::set<std::string> methods;
    std::set<int> gpus;
    for (const auto& [mp, r] : cells) methods.insert(mp.first), gpus.insert(mp.second);
    s << "**" << std::get<0>(key) << ", " << std::get<1>(key) << ", " << std::get<2>(key) << " tokens per GPU**\n\n";
    std::vector<std::string> head = {"method"};
    for (int P : gpus) head.push_back(std::to_string(P) + (P == 1 ? " GPU" : " GPUs"));
    std::vector<std::vector<std::string>> rows;
    for (const std::string& m : ordered(methods, kMethodOrder)) {
      std::vector<std::string> row = {m};
      for (int P : gpus) {
        const auto it = cells.find({m, P});
        const auto dp = cells.find({"dp", P});
        if (it == cells.end()) {
          row.push_back("—");
          continue;
        }
        std::string cell = time_cell(*it->second);
        if (dp != cells.end() && m != "dp") cell += " (" + ratio_cell(ms(*it->second) / ms(*dp->second)) + ")";
        row.push_back(cell);
      }
      rows.push_back(row);
    }
    s << md_table(head, rows, "l" + std::string(gpus.size(), 'r')) << "\n";
  }
  return s.str();
}

}  // namespace

std::string section_gdn(const Context& c) {
  std::ostringstream s;
  s << "## Gated DeltaNet (no paper column)\n\n"
    << "The gated delta rule (DESIGN §12) through the same SP methods: its rank map is a dense dk x dk matrix a head, "
       "so zeco's All-Scan folds column blocks of the state with it and lasp2 gathers it beside the state. The paper "
       "measures GLA alone; these rows stand on their own. † marks a row of older code, ? one of an unknown commit.\n\n";
  s << kernels(c) << operator_tables(c, false) << operator_tables(c, true);
  return s.str();
}

}  // namespace report_detail
}  // namespace spb
