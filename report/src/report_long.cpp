// spbench report: long contexts, simulated. GLA-1B at 65536 tokens per GPU with --recompute=blocks on
// the prediction platform at 8..256 GPUs (results/sim/dgx-h100_model_long.csv, `scripts/sim.sh long`): a step per
// method beside dp's, and what a 1M- and an 8M-token sequence cost. The paper has no such table, so no paper column;
// the rows are apart from Tables 5 and 6's by their tokens per GPU (65536) and recompute level.
#include "report/src/report_common.h"

#include <fstream>
#include <sstream>

namespace spb {
namespace report_detail {
namespace {

constexpr long long kLongTokens = 65536;  // per GPU
const std::vector<std::string> kLongMethods = {"dp", "zeco", "lasp2", "lasp1"};

// A GLA-1B row at 65536 tokens per GPU, B = 1, blocks remade, the default schedule.
bool long_row(const Row& r) {
  return col(r, "level") == "model" && is(r, "tokens_per_rank", double(kLongTokens)) && is(r, "batch", 1) &&
         paper_model_config(r) && col(r, "recompute") == "blocks" && default_order(r) && ms(r) > 0;
}

// "1M", "16M", "512K": a power-of-two count of tokens.
std::string tokens_str(long long n) {
  if (n >= (1LL << 20) && n % (1LL << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= (1LL << 10) && n % (1LL << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

// What one step of a P-GPU sequence costs with `r`: "1.057 s a step, 16.9 GPU-s, 992 K tokens/s".
std::string cost_str(const Row& r) {
  const double s = ms(r) / 1e3, P = num(r, "world_size");
  return fmt("%.3f s a step", s) + stale_mark(r) + ", " + fmt("%.1f GPU-s", s * P) + ", " +
         fmt("%.2fM tokens/s", double(kLongTokens) * P / s / 1e6);
}

}  // namespace

std::string section_long_context(Context& c) {
  std::ostringstream s;
  s << "## Long contexts: 512K- to 16M-token sequences, simulated (no paper column)\n\n";
  // Per (GPUs, method) the newest simulated row on the prediction platform.
  std::map<int, std::map<std::string, const Row*>> at;
  auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "world_size") + "|" + col(r, "backend"); };
  auto keep = [](const Row& r) { return col(r, "platform") == kSimPredictPlatform && long_row(r); };
  for (auto& [k, r] : newest_by(c.res.sim_rows, keep, key)) {
    const Row*& slot = at[inum(*r, "world_size")][col(*r, "method")];
    if (!slot || ms(*r) < ms(*slot)) slot = r;
  }
  if (at.empty())
    return s.str() + "No simulated rows of GLA-1B at " + int_str(double(kLongTokens)) +
           " tokens per GPU with `--recompute=blocks` in results/sim/ (`scripts/sim.sh long` writes them).\n\n";
  s << "GLA-1B (H=32, 20 layers, hidden 2048), B=1, " << int_str(double(kLongTokens))
    << " tokens per GPU with `--recompute=blocks` (each block's input kept, the block remade in its backward), one "
       "training step on `"
    << kSimPredictPlatform
    << "`, simulated from one H200's stage table at that length (`results/nvidia-h200_model_stages.csv`; rows in "
       "`results/sim/dgx-h100_model_long.csv`, `scripts/sim.sh long`). The sequence is 65536 x GPUs tokens; dp trains "
       "that many sequences of 65536 tokens instead (the ideal). Step in ms (`time_ms_mean`), ÷ dp at the same GPU "
       "count in brackets. H200 compute on the H100 cluster's network, and no hold-out at this length: a prediction, "
       "not a verdict. † marks a row of older code.\n\n";
  // The measured anchor: dp on one H200 at the same setting.
  const auto measured = newest_by(
      c.res.rows,
      [](const Row& r) { return long_row(r) && !is_cpu_row(r) && col(r, "method") == "dp" && is(r, "world_size", 1); },
      [](const Row& r) { return col(r, "gpu"); });
  for (auto& [gpu, r] : measured)
    s << "Measured on one " << gpu << " at that setting: dp " << fmt("%.1f", ms(*r)) << " ms a step" << stale_mark(*r)
      << " (`results/" << c.res.file_of(*r) << "`).\n\n";

  std::set<std::string> names;
  for (auto& [P, m] : at)
    for (auto& [name, r] : m) names.insert(name);
  const std::vector<std::string> methods = ordered(names, kLongMethods);
  std::vector<std::string> head = {"GPUs", "tokens"};
  for (const std::string& m : methods) head.push_back(m + (m == "dp" ? " (ms)" : " (ms, ÷ dp)"));
  std::vector<std::vector<std::string>> rows;
  std::ostringstream csv;
  csv << "gpus,tokens,method,backend,step_ms,over_dp,tokens_per_s_per_gpu,git_sha,code_state\n";
  for (auto& [P, m] : at) {
    const long long tokens = kLongTokens * P;
    std::vector<std::string> row = {std::to_string(P), tokens_str(tokens)};
    const Row* dp = m.count("dp") ? m.at("dp") : nullptr;
    for (const std::string& name : methods) {
      const auto it = m.find(name);
      if (it == m.end()) {
        row.push_back("—");
        continue;
      }
      const Row& r = *it->second;
      const double over = dp ? ms(r) / ms(*dp) : NAN;
      std::string cell = fmt("%.1f", ms(r)) + stale_mark(r);
      if (name != "dp" && dp) cell += " (" + fmt("%.2fx", over) + ")";
      row.push_back(cell);
      csv << join({std::to_string(P), std::to_string(tokens), name, col(r, "backend"), fmt("%.6g", ms(r)),
                   std::isfinite(over) ? fmt("%.4g", over) : "", fmt("%.6g", tokens_per_s(r)), col(r, "git_sha"),
                   col(r, kCodeStateCol)},
                  ",")
          << "\n";
    }
    rows.push_back(row);
  }
  std::ofstream(c.tables_dir + "/sim_long_context.csv") << csv.str();
  s << md_table(head, rows, "rr" + std::string(methods.size(), 'r')) << "\n";

  // A 1M- and an 8M-token sequence: 16 and 128 GPUs of 65536 tokens each.
  s << "What one training step of a sequence costs (its GPUs x 65536 tokens), each method: the step, the GPU time "
       "(GPUs x step) and the sequence's tokens a second:\n\n";
  for (const long long tokens : {1LL << 20, 8LL << 20}) {
    const int P = int(tokens / kLongTokens);
    s << "- **" << tokens_str(tokens) << " tokens (" << P << " GPUs):** ";
    const auto it = at.find(P);
    if (it == at.end()) {
      s << "not simulated (no row at " << P << " GPUs).\n";
      continue;
    }
    std::vector<std::string> parts;
    for (const std::string& name : methods) {
      const auto r = it->second.find(name);
      if (r == it->second.end()) continue;
      parts.push_back(name == "dp" ? "dp (" + std::to_string(P) + " sequences of 65536 tokens instead) " +
                                         cost_str(*r->second)
                                   : name + " " + cost_str(*r->second));
    }
    s << join(parts, "; ") << ".\n";
  }
  s << "\n";
  return s.str();
}

}  // namespace report_detail
}  // namespace spb
