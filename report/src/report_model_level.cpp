// spbench report: the model level (the paper's Tables 5 and 6): the measured throughput beside the paper's, its plot,
// every configuration measured, and spbench against PyTorch + fla.
#include "report/src/report_common.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <tuple>

#include "model/gla_model.h"
#include "runtime/gpu_peak.h"

namespace spb {
namespace report_detail {

// The lines of Table 5 or 6 (or of a CPU-rank model table: `cpu`, no paper): per GPU count and method, the row
// shown, the paper's number, and each one's share of dp's throughput.
std::vector<Line> model_lines(const Context& c, long long L, bool cpu, const std::string& config) {
  std::vector<const Row*> shown;
  if (config.empty()) {
    shown = model_rows_shown(c.res.rows, L, cpu);
  } else {  // one configuration's table: its newest row per method, world size and backend
    auto keep = [&](const Row& r) {
      return col(r, "level") == "model" && is_cpu_row(r) && lnum(r, "tokens_per_rank") == L &&
             tokens_per_s(r) > 0 && model_config_key(r) == config;
    };
    auto key = [](const Row& r) { return col(r, "method") + "|" + col(r, "world_size") + "|" + col(r, "backend"); };
    for (auto& [k, r] : newest_by(c.res.rows, keep, key)) shown.push_back(r);
  }
  const auto methods = operator_methods(c);  // the registered methods and any measured
  std::set<int> gpus;
  for (const Row* r : shown) gpus.insert(inum(*r, "world_size"));
  if (!cpu)
    for (auto& v : c.paper)
      if (v.level == "model" && v.seq_per_gpu == L) gpus.insert(v.gpus);
  std::vector<Line> lines;
  for (int P : gpus) {
    const double paper_dp = cpu ? NAN : paper_value(c.paper, "model", P, L, "dp");
    bool paper_row = false;
    for (auto& m : methods) paper_row |= !cpu && std::isfinite(paper_value(c.paper, "model", P, L, m));
    for (auto& m : methods) {
      Line base;
      base.gpus = P, base.method = m;
      base.paper = cpu ? NAN : paper_value(c.paper, "model", P, L, m);
      base.r_paper = base.paper / paper_dp;
      std::vector<Line> mine;
      for (const Row* r : shown)
        if (col(*r, "method") == m && inum(*r, "world_size") == P) {
          Line l = base;
          l.row = r, l.measured = tokens_per_s(*r);
          const Row* d = model_dp_row(c.res.rows, *r);
          l.r_measured = d ? l.measured / tokens_per_s(*d) : NAN;
          mine.push_back(l);
        }
      // An unmeasured line at a GPU count the paper published: its number beside ours.
      if (mine.empty() && paper_row) mine.push_back(base);
      lines.insert(lines.end(), mine.begin(), mine.end());
    }
  }
  return lines;
}

Figure plot_model_throughput(Context& c, long long L, const std::vector<Line>& lines) {
  // Each method's throughput as a share of dp's at the same world size, on a linear axis: the differences that matter
  // at the model level are of 1-3%, which a logarithmic axis of tokens/s hides.
  std::map<std::string, PlotSeries> series;
  const auto methods = operator_methods(c);
  for (const Line& l : lines) {
    if (!l.row || !std::isfinite(l.r_measured)) continue;
    PlotSeries& s = add_series(series, methods, measured_of(l.method, *l.row));
    s.rows.push_back({double(l.gpus), l.r_measured});
  }
  PlotSpec p;
  p.name = "model_throughput_L" + std::to_string(L);
  p.title = "Model-level training throughput as a share of dp's vs GPUs (GLA LM, " + std::to_string(L) +
            " tokens per GPU)";
  p.xlabel = "number of GPUs";
  p.ylabel = "throughput ÷ dp's at the same GPUs";
  p.xscale = Scale::log;
  p.yscale = Scale::linear;
  for (auto& [k, s] : series) p.series.push_back(s);
  bool paper = false;
  for (const std::string& m : methods) {
    PlotSeries s = paper_series(m, "H100, model table");
    for (int P : kPaperGpus) {
      const double v = paper_value(c.paper, "model", P, L, m) / paper_value(c.paper, "model", P, L, "dp");
      if (std::isfinite(v)) s.rows.push_back({double(P), v});
    }
    if (!s.rows.empty()) p.series.push_back(s), paper = true;
  }
  return draw(c, p,
              "Training throughput per GPU as a share of dp's at the same GPU count, " + std::to_string(L) +
                  " tokens per GPU (linear axis): measured (each row ÷ dp's row of its machine, configuration and "
                  "schedule)" + (paper ? ", the paper's model table." : "."),
              "no GPU model rows at " + std::to_string(L) + " tokens per GPU yet");
}

std::string section_model_level(Context& c, long long L, const std::string& table) {
  std::ostringstream s;
  s << "## Table " << table << ": model-level training throughput, " << L << " tokens per GPU\n\n"
    << "GLA language-model training (`spbench model`; the paper's GLA-1B: H=32, 20 layers, hidden 2048), one step = "
       "forward + backward + gradient all-reduce + AdamW; tokens per second per GPU. Each measured row is the newest of "
       "its method, world size, GPU and backend, at the paper's configuration where one was measured (its "
       "configuration is in the table). Ratios are method ÷ dp at the same world size (for measured rows: dp's row of "
       "the same machine and configuration; higher is better, dp is the ideal).\n\n";
  const auto lines = model_lines(c, L, false);
  write_table_csv(c, table == "5" ? "table5" : "table6", lines, true);
  bool measured = false;
  for (const Line& l : lines) measured |= l.row != nullptr;
  if (!measured) s << "**Not measured yet**: results/ holds no GPU rows of level `model` at this setting.\n\n";
  TableDef t;
  t.ref = "dp";
  t.predicted_in = "Table " + table + " predicted: GLA-1B training on " + kSimPredictPlatform;
  if (lines.empty()) {
    s << "The paper's numbers at this setting are " << kNotPublished << ".\n\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const Line& l : lines)
      rows.push_back({std::to_string(l.gpus), l.method, l.row ? num_cell(l.measured) : kNotMeasured,
                      l.row ? model_config_str(*l.row) : "—", l.row ? machine_of(*l.row) : "—",
                      std::isfinite(l.paper) ? num_cell(l.paper) : kNotPublished, ratio_cell(l.r_measured),
                      ratio_cell(l.r_paper), versus_cell(l, "dp")});
    s << md_table({"GPUs", "method", "measured (tokens/s/GPU)", "configuration",
                   "measured on (gpu, world size, backend, date)", "paper (tokens/s/GPU)", "÷ dp: measured",
                   "÷ dp: paper", "ours ÷ paper (ratios)"},
                  rows, "rlrllrrrl")
      << "\n";
    for (const Line& l : lines)
      if (std::find(t.methods.begin(), t.methods.end(), l.method) == t.methods.end()) t.methods.push_back(l.method);
    s << "Against the paper:\n\n" << trend_paragraph(lines, t, "throughput") << "\n";
  }
  s << predicted_in_md(c, t);
  if (!lines.empty()) s << figure_md(plot_model_throughput(c, L, lines)) << "\n";
  return s.str();
}

namespace {

// The gradients' schedule alone (dp has no scan order to set): a dp row is the reference of a row with the same.
std::string grad_schedule_of(const Row& r) { return col(r, "grad_overlap") + "|" + col(r, "shard_optimizer"); }

// A model row's --recompute level as written (`none` where the column is empty), its place in the order of the
// model's levels (model/gla_model.h, Recompute: the flag's order; a name the model does not know goes last), and its
// name as the flag takes it (`all` is written as what it remakes).
std::string recompute_of(const Row& r) { return col(r, "recompute").empty() ? "none" : col(r, "recompute"); }
int recompute_rank(const std::string& level) {
  try {
    return int(recompute_from_name(level));
  } catch (const UsageError&) {
    return int(Recompute::blocks) + 1;
  }
}
std::string recompute_flag(const std::string& level) {
  return level == recompute_name(Recompute::all) ? "all" : level;
}
// A row's commit as the tables name it: its first 7 hex digits.
std::string short_sha(const Row& r) { return col(r, "git_sha").substr(0, 7); }

}  // namespace

// MFU in the field's sense: model FLOPs/s over the GPU's datasheet dense bf16 peak. Rows with `gemm_ceiling_frac`
// carry it in `mfu`; older rows' `mfu` is the fraction of the GEMM ceiling measured in the run (`gemm_tflops`), so
// theirs is derived: mfu x gemm_tflops / the datasheet peak. NaN where neither can be had. `derived` says which.
double mfu_of(const Row& r, bool* derived) {
  if (derived) *derived = false;
  if (r.count("gemm_ceiling_frac")) return num(r, "mfu");
  double peak = num(r, "peak_tflops");
  if (!(peak > 0)) peak = datasheet_bf16_tflops(col(r, "gpu"));
  const double v = num(r, "mfu") * num(r, "gemm_tflops") / peak;
  if (derived) *derived = std::isfinite(v);
  return v;
}
// The fraction of the GEMM ceiling measured in the run: `gemm_ceiling_frac`, or an older row's `mfu`.
double ceiling_frac_of(const Row& r) { return r.count("gemm_ceiling_frac") ? num(r, "gemm_ceiling_frac") : num(r, "mfu"); }

std::string section_model_rows(Context& c) {
  std::ostringstream s;
  s << "## Every GPU model-level configuration measured\n\n";
  auto keep = [](const Row& r) { return col(r, "level") == "model" && !is_cpu_row(r) && tokens_per_s(r) > 0; };
  auto where = [](const Row& r) {
    return col(r, "gpu") + "|" + col(r, "world_size") + "|" + col(r, "tokens_per_rank") + "|" + model_config_key(r);
  };
  const auto shown = newest_by(c.res.rows, keep, [&](const Row& r) {
    return where(r) + "|" + schedule_of(r) + "|" + col(r, "method");
  });
  const auto dps = newest_by(
      c.res.rows, [&](const Row& r) { return keep(r) && col(r, "method") == "dp"; },
      [&](const Row& r) { return where(r) + "|" + grad_schedule_of(r); });
  if (shown.empty()) {
    s << "None yet: results/ holds no GPU rows of level `model`.\n\n";
    return s.str();
  }
  s << "The tables above show one row per method and world size: the paper's configuration and the default schedule "
       "(on GPUs at P > 1 the gradients summed beside the backward). "
       "Here is the newest row of every configuration and schedule measured on GPUs (`--no-grad-overlap`, "
       "`--shard-optimizer`, `--wgrad-beside`, zeco's `--overlap 2`: model/NOTES.md says what each does and which is "
       "the default and why), each beside dp's row of the same machine, world size, configuration and gradient schedule.\n\n";
  // By machine, world size, tokens, heads (the paper's 32 first), recompute, the default schedule first, and the
  // methods in their registry order.
  const auto methods = operator_methods(c);
  auto rank_of = [&](const Row& r) {
    return std::make_tuple(col(r, "gpu"), lnum(r, "world_size"), lnum(r, "tokens_per_rank"), -lnum(r, "heads"),
                           col(r, "recompute"), schedule_of(r) != "default", schedule_of(r),
                           std::find(methods.begin(), methods.end(), col(r, "method")) - methods.begin());
  };
  std::vector<const Row*> order;
  for (auto& [k, r] : shown) order.push_back(r);
  std::sort(order.begin(), order.end(), [&](const Row* a, const Row* b) { return rank_of(*a) < rank_of(*b); });
  std::vector<std::vector<std::string>> rows;
  std::ostringstream csv;
  csv << "gpu,gpus,tokens_per_gpu,heads,dk,dv,recompute,schedule,method,tokens_per_s_per_gpu,step_ms,over_dp,mfu,"
         "mfu_derived,gemm_ceiling_frac,peak_mem_gib,git_sha,code_state\n";
  bool any_derived = false;
  for (const Row* r : order) {
    const auto d = dps.find(where(*r) + "|" + grad_schedule_of(*r));
    const double over_dp = d == dps.end() ? NAN : tokens_per_s(*r) / tokens_per_s(*d->second);
    const std::string rc = recompute_of(*r);
    const std::string recomputed = rc == "none" ? "" : ", recompute " + recompute_flag(rc);
    bool derived = false;
    const double mfu = mfu_of(*r, &derived), frac = ceiling_frac_of(*r);
    any_derived |= derived;
    rows.push_back({col(*r, "gpu"), col(*r, "world_size"), col(*r, "tokens_per_rank"),
                    "H=" + col(*r, "heads") + recomputed, schedule_of(*r), col(*r, "method"),
                    num_cell(tokens_per_s(*r)) + stale_mark(*r), std::isfinite(over_dp) ? fmt("%.3fx", over_dp) : "—",
                    num_cell(ms(*r)), std::isfinite(mfu) ? fmt("%.3f", mfu) + (derived ? " (derived)" : "") : "—",
                    std::isfinite(frac) ? fmt("%.3f", frac) : "—",
                    short_sha(*r) + stale_mark(*r)});
    auto opt = [](double v, const char* f) { return std::isfinite(v) ? fmt(f, v) : std::string(); };
    csv << join({csv_field(col(*r, "gpu")), col(*r, "world_size"), col(*r, "tokens_per_rank"), col(*r, "heads"),
                 col(*r, "dk"), col(*r, "dv"), rc, csv_field(schedule_of(*r)), col(*r, "method"),
                 fmt("%.6g", tokens_per_s(*r)), fmt("%.6g", ms(*r)), opt(over_dp, "%.4g"), opt(mfu, "%.4g"),
                 std::isfinite(mfu) ? (derived ? "1" : "0") : "", opt(frac, "%.4g"), opt(num(*r, "peak_mem_gib"), "%.4g"),
                 col(*r, "git_sha"), col(*r, kCodeStateCol)},
                ",")
        << "\n";
  }
  std::ofstream(c.tables_dir + "/model_rows.csv") << csv.str();
  s << md_table({"gpu", "GPUs", "tokens per GPU", "configuration", "schedule", "method", "tokens/s/GPU", "÷ dp",
                 "step (ms)", "MFU", "of the GEMM ceiling", "code"},
                rows, "lrrlllrrrrrl")
    << "\nMFU is model FLOPs per second over the GPU's datasheet dense bf16 peak (`peak_tflops`: 989.4 TFLOP/s for the "
       "H100 SXM and the H200); \"of the GEMM ceiling\" is the same FLOPs over the GEMM throughput measured in the run "
       "(`gemm_tflops`)."
    << (any_derived ? " Rows written before the two were told apart carry the ceiling's fraction in `mfu`: their MFU "
                      "is derived (mfu x gemm_tflops / the datasheet peak) and says so."
                    : "")
    << " (`tables/model_rows.csv` has the same rows.)\n\n";
  return s.str();
}

// fla's compile mode as a cell says it ("0" and "1" are rows written before the block mode).
std::string fla_compile_mode(const Row& r) {
  const std::string mode = col(r, "compile");
  if (mode == "block") return "blocks compiled";
  if (mode == "model" || mode == "1") return "model compiled";
  return "eager";
}

// The precisions that do spbench's work: fp32 master weights and optimizer, bf16 products.
bool fla_matched_precision(const Row& r) {
  const std::string p = col(r, "precision");
  return p == "fp32-autocast-bf16" || p == "bf16-fp32-master";
}

bool fla_checkpointed(const Row& r) { return col(r, "recompute") == "blocks"; }

// What the memory plan of the current code (GlaModel::device_bytes) says a GPU model row's step needs, in GiB: its
// shape, tokens, batch and recompute level from its columns, bf16 activations and chunk states; NaN where a column
// is missing or the level is not one the model knows.
double planned_gib(const Row& r) {
  GlaModelConfig m;
  m.vocab = int(lnum(r, "vocab")), m.hidden = int(lnum(r, "hidden")), m.layers = int(lnum(r, "layers"));
  m.heads = int(lnum(r, "heads")), m.mlp = int(lnum(r, "mlp"));
  const double ek = num(r, "expand_k"), ev = num(r, "expand_v");
  if (std::isfinite(ek)) m.expand_k = ek;
  if (std::isfinite(ev)) m.expand_v = ev;
  const long long batch = lnum(r, "batch"), L = lnum(r, "tokens_per_rank");
  if (m.vocab <= 0 || m.hidden <= 0 || m.layers <= 0 || m.heads <= 0 || batch <= 0 || L <= 0) return NAN;
  try {
    m.validate();
    const Recompute level = recompute_from_name(recompute_flag(recompute_of(r)));
    return double(GlaModel::device_bytes(m, int(batch), int(L), DType::bf16, DType::bf16, level)) /
           double(1ull << 30);
  } catch (const UsageError&) {
    return NAN;
  }
}

std::string section_fla(Context& c) {
  std::ostringstream s;
  s << "## spbench vs PyTorch + fla\n\n";
  std::vector<const Row*> fla;
  for (const Row& r : c.res.baseline_rows)
    if (col(r, "level") == "model" && tokens_per_s(r) > 0) fla.push_back(&r);
  if (fla.empty()) {
    s << "No PyTorch + fla rows in results/ yet (`results/<kind>_model_fla.csv`, method `pytorch-fla`, backend "
         "`pytorch`).\n\n";
    return s.str();
  }
  s << "The same GLA model trained on one GPU by PyTorch with fla's kernels (`method` = `pytorch-fla`; not an SP "
       "method, so no method table shows it), set against spbench's dp row at world size 1 on the same kind (the "
       "newest of the default schedule, one line per `--recompute` level measured, in the flag's order: none, states, "
       "elementwise, states+elementwise, all, blocks). fla's rows with every block checkpointed "
       "(`gradient_checkpointing_enable()`, `recompute` = blocks) say so. spbench keeps fp32 master weights, gradients and AdamW moments and "
       "computes its products in bf16; fla's rows of the same work are its **matched precision**: "
       "`bf16-fp32-master` (Megatron's recipe: bf16 weights, fp32 masters and main gradients) and "
       "`fp32-autocast-bf16` (fp32 weights under bf16 autocast). spbench's lead is stated against fla's fastest "
       "matched-precision row, eager or compiled (each block on its own, `block`, or the whole model, `model`), and, "
       "as its own table, against fla's fastest pure `bf16` row (every weight, gradient and moment in bf16: a lower "
       "precision than spbench trains in). Memory is each row's own peak (the device's used memory, as the driver "
       "counts it); beside spbench's, in brackets, what its memory plan (`GlaModel::device_bytes`, the current code) "
       "says the step needs. Every cell names the commit of the call that measured it: where fla's differs from spbench's, the "
       "two sides ran in different calls, on two machines of the kind, so their ratio also holds the spread between "
       "such machines (up to 3% in the model level's rows).\n\n";
  using Key = std::tuple<std::string, long long, long long>;  // gpu, heads, tokens per rank
  std::map<Key, std::vector<const Row*>> by;
  for (const Row* r : fla) by[{col(*r, "gpu"), lnum(*r, "heads"), lnum(*r, "tokens_per_rank")}].push_back(r);
  auto opt = [](double v) { return std::isfinite(v) ? fmt("%.6g", v) : std::string(); };
  auto ratio_cell = [](double v) { return std::isfinite(v) ? fmt("%.2fx", v) : std::string("—"); };
  std::vector<std::vector<std::string>> matched_rows, bf16_rows, every_row;
  std::ostringstream csv;
  csv << "gpu,heads,tokens_per_gpu,against,fla_tokens_per_s,fla_precision,fla_compile,fla_peak_mem_gib,fla_git_sha,"
         "fla_code_state,spbench_recompute,spbench_tokens_per_s,spbench_peak_mem_gib,spbench_git_sha,"
         "spbench_code_state,ratio,mem_ratio\n";
  for (const auto& [key, rs] : by) {
    const auto& [gpu, heads, L] = key;
    std::vector<const Row*> sorted = rs;  // fastest first: each comparison takes the first row of its precisions
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Row* x, const Row* y) { return tokens_per_s(*x) > tokens_per_s(*y); });
    auto fastest = [&](auto pick) {
      const auto it = std::find_if(sorted.begin(), sorted.end(), [&](const Row* r) { return pick(*r); });
      return it == sorted.end() ? nullptr : *it;
    };
    const Row* best_matched = fastest(fla_matched_precision);
    const Row* best_bf16 = fastest([](const Row& r) { return col(r, "precision") == "bf16"; });
    for (const Row* r : sorted)
      every_row.push_back({gpu, std::to_string(heads), std::to_string(L), col(*r, "precision"), fla_compile_mode(*r),
                           fla_checkpointed(*r) ? "every block" : "none", num_cell(tokens_per_s(*r)) + stale_mark(*r),
                           num_cell(num(*r, "peak_mem_gib")), short_sha(*r)});
    // spbench's newest dp row at P = 1 per recompute level, in the flag's order: what each level trades.
    std::map<int, const Row*> ours_by_level;
    for (const Row& r : c.res.rows)
      if (col(r, "level") == "model" && col(r, "method") == "dp" && lnum(r, "world_size") == 1 && col(r, "gpu") == gpu &&
          lnum(r, "heads") == heads && lnum(r, "tokens_per_rank") == L && default_order(r) && tokens_per_s(r) > 0) {
        const Row*& ours = ours_by_level[recompute_rank(recompute_of(r))];
        if (!ours || col(*ours, "date") <= col(r, "date")) ours = &r;
      }
    if (ours_by_level.empty()) ours_by_level[0] = nullptr;
    auto against = [&](const Row* theirs, const char* name, std::vector<std::vector<std::string>>& rows) {
      if (!theirs) return;
      const double their_mem = num(*theirs, "peak_mem_gib");
      for (const auto& [rank, ours] : ours_by_level) {
        const std::string rc = ours ? recompute_of(*ours) : "none";
        const double ratio = ours ? tokens_per_s(*ours) / tokens_per_s(*theirs) : NAN;
        const double our_mem = ours ? num(*ours, "peak_mem_gib") : NAN;
        rows.push_back({gpu, std::to_string(heads), std::to_string(L),
                        ours ? num_cell(tokens_per_s(*ours)) + stale_mark(*ours) + " (" + short_sha(*ours) +
                                   ", recompute " + recompute_flag(rc) + ")"
                             : kNotMeasured,
                        num_cell(tokens_per_s(*theirs)) + stale_mark(*theirs) + " (" + col(*theirs, "precision") +
                            ", " + fla_compile_mode(*theirs) + (fla_checkpointed(*theirs) ? ", checkpointed" : "") +
                            ", " + short_sha(*theirs) + ")",
                        ratio_cell(ratio),
                        std::isfinite(our_mem) ? num_cell(our_mem) + (std::isfinite(planned_gib(*ours))
                                                                          ? " (" + num_cell(planned_gib(*ours)) + ")"
                                                                          : std::string())
                                               : "—",
                        their_mem > 0 ? num_cell(their_mem) : "—", ratio_cell(our_mem / their_mem)});
        csv << join({csv_field(gpu), std::to_string(heads), std::to_string(L), name, opt(tokens_per_s(*theirs)),
                     col(*theirs, "precision"), col(*theirs, "compile"), opt(their_mem), col(*theirs, "git_sha"),
                     col(*theirs, kCodeStateCol), ours ? rc : "", ours ? opt(tokens_per_s(*ours)) : "", opt(our_mem),
                     ours ? col(*ours, "git_sha") : "", ours ? col(*ours, kCodeStateCol) : "", opt(ratio),
                     opt(our_mem / their_mem)},
                    ",")
            << "\n";
      }
    };
    against(best_matched, "matched", matched_rows);
    against(best_bf16, "bf16", bf16_rows);
  }
  std::ofstream(c.tables_dir + "/spbench_vs_fla.csv") << csv.str();
  const std::vector<std::string> head = {"gpu", "heads", "tokens per GPU", "spbench dp, P = 1 (tokens/s/GPU)",
                                         "fla's fastest (tokens/s/GPU)", "spbench ÷ fla", "spbench peak (plan) (GiB)",
                                         "fla peak (GiB)", "spbench ÷ fla (memory)"};
  s << "**Against fla's fastest matched-precision step** (the lead):\n\n";
  if (matched_rows.empty())
    s << "No matched-precision fla row.\n\n";
  else
    s << md_table(head, matched_rows, "lrrrrrrrr") << "\n";
  s << "**Against fla's fastest pure bf16 step** (a lower precision than spbench's):\n\n";
  if (bf16_rows.empty())
    s << "No pure bf16 fla row.\n\n";
  else
    s << md_table(head, bf16_rows, "lrrrrrrrr") << "\n";
  s << "Every fla row, fastest first:\n\n"
    << md_table({"gpu", "heads", "tokens per GPU", "precision", "compile", "checkpointed", "tokens/s/GPU",
                 "peak (GiB)", "commit"},
                every_row, "lrrlllrrl")
    << "\n(`tables/spbench_vs_fla.csv` has both comparisons, with each side's `git_sha`.)\n\n";
  return s.str();
}

}  // namespace report_detail
}  // namespace spb
