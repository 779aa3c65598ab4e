#include "harness/model_rows.h"

#include <cmath>
#include <cstdio>

#include "harness/resume.h"
#include "runtime/collective_errors.h"
#include "runtime/provenance.h"
#include "zeco/all_scan.h"

namespace spb {

std::string model_config_key(const ModelPlan& plan, double tolerance) {
  const ModelOptions& o = plan.o;
  auto real = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", x);
    return std::string(b);
  };
  return config_key({{"seed", std::to_string(o.seed)},
                     {"lr", real(o.lr)},
                     {"weight_decay", real(o.weight_decay)},
                     {"data", o.data},
                     {"gate_rank", std::to_string(plan.mc.gate_rank)},
                     {"wgrad_beside", std::to_string(o.wgrad_beside)},
                     {"check", std::to_string(o.check)},
                     {"tolerance", real(tolerance)},
                     {"warmup", std::to_string(o.warmup)},
                     {"steps", std::to_string(o.steps)},
                     {"allscan", o.allscan}});
}

ResultRow model_row(const ModelRun& run, const std::string& method, const SpMethod* ran) {
  const ModelPlan& plan = run.plan;
  const ModelOptions& o = plan.o;
  const GlaModelConfig& mc = plan.mc;
  const GlaShape& local = plan.sp.local;
  const Runtime& rt = run.rt;
  const int P = run.boot.size();
  // `backend` as at the operator level: what carried the attention's communication.
  const std::string plain = !rt.dev->is_gpu() ? "cpu" : rt.comm->name();
  std::string backend = method == "zeco" && (is_device_allscan(run.scan_backend) ||
                                             is_node_aware_allscan(run.scan_backend))
                            ? run.scan_backend
                            : plain;
  if (ran) backend = ran->comm_backend().empty() ? plain : ran->comm_backend();
  if (run.sim.on) backend = run.sim.backend(method == "zeco");
  ResultRow r;
  r.set("level", std::string("model")).set("method", method).set("backend", backend);
  r.set("world_size", P).set("batch", o.batch).set("heads", mc.heads).set("dk", mc.dk()).set("dv", mc.dv());
  r.set("tokens_per_rank", plan.L).set("chunk", kChunk).set("dtype", std::string(dtype_name(rt.kern->act_dtype())));
  r.set("blocks", method == "zeco" ? o.blocks : 0);
  r.set("block_elems", method == "zeco" ? (long long)(local.state_rows() / o.blocks * local.dv) : 0LL);
  r.set("overlap", method == "zeco" || method == "lasp2" ? o.overlap : 0);
  r.set("head_groups", ran ? ran->head_groups() : 1);
  r.set("grad_overlap", run.grad_overlap ? 1 : 0).set("shard_optimizer", o.shard_optimizer && P > 1 ? 1 : 0);
  r.set("wgrad_beside", o.wgrad_beside ? 1 : 0);
  r.set("pass", std::string("step")).set("comm", rt.comm->name()).set("warmup", o.warmup).set("iters", o.steps);
  r.set("layers", mc.layers).set("hidden", mc.hidden).set("vocab", mc.vocab).set("expand_k", mc.expand_k);
  r.set("expand_v", mc.expand_v).set("mlp", mc.mlp_size()).set("steps", o.steps).set("seed", (long long)o.seed);
  r.set("recompute", std::string(recompute_name(plan.recompute)));
  r.set("params", (long long)run.model->param_count()).set("flops_per_token", run.flops_per_token);
  r.set("gemm_tflops", run.ceiling_tflops).set("peak_tflops", run.peak_tflops);
  r.set("nodes", rt.topo.nodes).set("ranks_per_node", rt.topo.ranks_per_node);
  r.set("config_key", run.key);
  add_provenance(r, *rt.dev);
  if (run.sim.on) run.sim.mark(r);
  return r;
}

std::vector<std::string> model_methods_to_measure(const ModelRun& run, std::unique_ptr<CsvAppender>& csv) {
  const ModelOptions& o = run.plan.o;
  if (o.csv.empty()) return run.plan.methods;
  return methods_to_measure(
      run.boot, o.csv,
      run.sim.columns({"layers", "hidden", "vocab", "expand_k", "expand_v", "mlp", "steps", "seed", "loss",
                       "peak_mem_gib", "mfu", "recompute", "tokens_per_s", "gemm_tflops", "peak_tflops",
                       "gemm_ceiling_frac", "params", "flops_per_token", "nodes", "ranks_per_node", "head_groups",
                       "grad_overlap", "shard_optimizer", "wgrad_beside"}),
      o.resume, run.plan.methods,
      [&](const CsvAppender& c, const std::string& m) { return c.contains(model_row(run, m, nullptr)); },
      "P=" + std::to_string(run.boot.size()) + " L=" + std::to_string(run.plan.L), csv);
}

void print_model_header(const ModelRun& run) {
  const ModelOptions& o = run.plan.o;
  const GlaModelConfig& mc = run.plan.mc;
  const GlaModel& model = *run.model;
  Device& dev = *run.rt.dev;
  const int P = run.boot.size();
  std::printf("# spbench model  backend %s (%s, allscan %s)  ranks %d (%s)  device %s\n", o.backend.c_str(),
              run.rt.comm->name().c_str(), o.allscan.c_str(), P, run.rt.topo.describe().c_str(), dev.name().c_str());
  std::printf("# GLA LM: vocab %d  hidden %d  layers %d  heads %d (dk %d, dv %d)  mlp %d  gate rank %d  params %.4g M"
              "  (%.4g M without the embedding)\n",
              mc.vocab, mc.hidden, mc.layers, mc.heads, mc.dk(), mc.dv(), mc.mlp_size(), mc.gate_rank,
              model.param_count() / 1e6, (model.param_count() - model.embedding_params()) / 1e6);
  const double peak = run.peak_tflops;
  char peak_note[96];
  if (!dev.is_gpu() && !run.sim.on) std::snprintf(peak_note, sizeof peak_note, "none on CPU ranks");
  else if (std::isnan(peak)) std::snprintf(peak_note, sizeof peak_note, "unknown for this GPU: mfu left empty");
  else std::snprintf(peak_note, sizeof peak_note, "%.1f TFLOP/s", peak);
  std::printf("# model FLOPs per token %.4g (6 x non-embedding params + attention)  bf16 GEMM ceiling %.1f TFLOP/s"
              "  datasheet dense bf16 peak (MFU's denominator) %s\n",
              run.flops_per_token, run.ceiling_tflops, peak_note);
  std::printf("# B %d  T %d (%d per rank)  K %d  recompute %s  gradients summed %s%s  data %s  warm-up %d  "
              "steps %d  seed %llu  lr %g  tolerance %.0e  memory about %.1f GiB per rank\n",
              o.batch, run.plan.T, run.plan.L, o.blocks, recompute_name(run.plan.recompute),
              P == 1 ? "over one rank: no communication"
              : o.shard_optimizer
                  ? "by a reduce-scatter after the backward (AdamW on each rank's 1/P, the weights all-gathered)"
              : run.grad_overlap ? "by an all-reduce per block, beside the backward"
                                 : "by one all-reduce after the backward",
              o.wgrad_beside ? " (the weight gradients' products beside the backward)" : "",
              o.data.empty() ? "random tokens" : o.data.c_str(), o.warmup, o.steps, (unsigned long long)o.seed,
              double(o.lr), run.tolerance, run.need_gib);
  for (const std::string& m : run.plan.left_out) std::printf("# left out of all: %s\n", m.c_str());
  if (!o.stage_times.empty())
    std::printf("# stage times: every kernel call of the timed steps, appended to %s\n", o.stage_times.c_str());
  std::printf("#\n# %8s %5s %11s %9s %10s %10s %10s %10s %12s %6s %8s %9s %6s\n", "method", "ranks", "tokens/rank",
              "loss", "mean_ms", "median_ms", "min_ms", "max_ms", "tok/s/GPU", "mfu", "mem_GiB", "error", "check");
  std::fflush(stdout);
}

void print_method_line(const ModelRun& run, const std::string& name, const MethodResult& r) {
  char e[16] = "-";
  if (!std::isnan(r.err)) std::snprintf(e, sizeof e, "%.2e", r.err);
  std::printf("  %8s %5d %11d %9.5f %10.3f %10.3f %10.3f %10.3f %12.0f %6.3f %8.2f %9s %6s\n", name.c_str(),
              run.boot.size(), run.plan.L, r.steps.loss, r.time.mean, r.time.median, r.time.min, r.time.max,
              r.tokens_per_s_per_gpu, r.mfu, r.steps.peak_gib, e, std::isnan(r.err) ? "-" : r.ok ? "OK" : "WRONG");
  std::fflush(stdout);
}

void append_method_row(const ModelRun& run, CsvAppender* csv, const std::string& name, const MethodResult& r) {
  agree_on_usage_errors(run.boot, [&] {
    if (!csv) return;
    const int P = run.boot.size();
    ResultRow row = model_row(run, name, &run.model->method(0));
    row.set("time_ms_mean", r.time.mean).set("time_ms_median", r.time.median).set("time_ms_min", r.time.min);
    row.set("time_ms_max", r.time.max).set("time_ms_cv", r.time.cv);
    row.set("time_ms_mean_over_ranks", summarize(r.steps.mean).mean);
    row.set("err_rel_rms", r.err).set("tokens_per_s_per_gpu", r.tokens_per_s_per_gpu);
    row.set("tokens_per_s", r.tokens_per_s_per_gpu * P);
    row.set("loss", r.steps.loss).set("peak_mem_gib", r.steps.peak_gib).set("mfu", r.mfu);
    row.set("gemm_ceiling_frac", r.ceiling_frac);
    csv->append(row);
  });
}

}  // namespace spb
