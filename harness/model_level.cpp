// spbench model: the driver of the model level (DESIGN §5, §9). Per method: validate, build the model once (its
// weights drawn from the seed), check the first step against a reference method, run -w warm-up steps and -n timed
// steps (time = max over ranks of the compute stream's events around forward, backward, gradient all-reduce and AdamW),
// print an nccl-tests-style table and append one row per method to the CSV. Under --backend sim (DESIGN §10) the
// model's kernels and the GLA stages advance the simulated streams by the model stage table's times (the kernels
// backend/backend.h makes), the communication runs in the simulation, and no weights, tokens or check are made.
// The flags and their validation are in model_plan.cpp, the --dump files in model_dump.cpp, the rows and the
// printing in model_rows.cpp; this file holds the measuring loop.
#include "harness/model_level.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "backend/backend.h"
#include "harness/model_dump.h"
#include "harness/model_plan.h"
#include "harness/model_rows.h"
#include "harness/model_run.h"
#include "harness/timeline_csv.h"
#include "model/stage_clock.h"
#include "runtime/collective_errors.h"
#include "runtime/error.h"
#include "runtime/gpu_peak.h"
#include "runtime/stats.h"
#include "runtime/watchdog.h"
#include "sp/inputs.h"
#include "sp/timeline.h"

namespace spb {
namespace {

// The method whose first step every other method's is compared with: LASP-1's serial chain, the plainest way to the
// whole sequence's states (and LASP-2 for LASP-1 itself). dp has no reference past one rank: its ranks train
// independent sequences.
std::string reference_method(const std::string& method, int P) {
  if (method == "dp") return P == 1 ? "lasp1" : "";
  return method == "lasp1" ? "lasp2" : "lasp1";
}

// The bf16 GEMM ceiling of this GPU in TFLOP/s: the best of a few 8192-cubed products of the model kernels' gemm,
// measured in the same run. It is the denominator of `gemm_ceiling_frac`, not of MFU (which divides by the datasheet

// no ceiling worth the name.
// The operands are two different matrices of uniform random values with every mantissa bit in play, like the step's
// activations and weights: under the GPU's power cap a product of few distinct values (zeros, or a handful of short
// fractions) draws less power, holds a higher clock and runs about 10% faster than any product in the step can.
double gemm_ceiling_tflops(Device& dev) {
  if (!dev.is_gpu()) return NAN;
  auto mk = make_model_kernels(dev);
  const int n = 8192;
  const size_t elems = size_t(n) * n, a = dtype_size(mk->act_dtype());
  Buffer A(dev, elems * a), Bm(dev, elems * a), C(dev, elems * a);
  const Stream st = dev.compute_stream();
  std::vector<float> host(elems);
  for (int m = 0; m < 2; ++m) {
    for (size_t i = 0; i < elems; ++i)  // uniform in [-1, 1), 24 random bits
      host[i] = float(int64_t(splitmix64(m * elems + i) >> 40) - (int64_t(1) << 23)) * 0x1.0p-23f;
    dev.upload_as((m == 0 ? A : Bm).get(), mk->act_dtype(), host.data(), host.size());
  }
  EventHandle e0(dev), e1(dev);
  double best = 0;
  for (int i = 0; i < 8; ++i) {
    dev.record(e0.get(), st);
    mk->gemm(false, true, n, n, n, 1, A.get(), Bm.get(), 0, C.get(), mk->act_dtype(), st);
    dev.record(e1.get(), st);
    dev.synchronize();
    if (i >= 2) best = std::max(best, 2.0 * n * n * double(n) / (dev.elapsed_ms(e0.get(), e1.get()) * 1e9));
  }
  return best;
}

// `steps` more training steps with every span recorded (record_timeline); rank 0 appends every rank's spans to
// `path`. The steps follow `first_step` (record_timeline's first, unkept one included).
template <class Tokens>
void timeline_steps(GlaModel& model, int steps, int first_step, const Tokens& tokens_of, const AdamWConfig& adam,
                    const std::string& prefix, const std::string& path) {
  Runtime& rt = model.runtime();
  record_timeline(rt, steps, prefix, path, [&](int it) {
    TimelineSpan whole(rt, "step", Lane::compute);
    model.forward_backward(tokens_of(first_step + it + 1));
    model.optimizer_step(adam);
  });
}

// `steps` more training steps with every stage of the model timed (StageClock), and the table of where a step's
// time goes: each stage's ms per step, its share, and for the dense products their TFLOP/s against the GEMM ceiling.
template <class Tokens>
void profile_steps(GlaModel& model, int steps, int first_step, const Tokens& tokens_of, const AdamWConfig& adam,
                   double ceiling, bool print) {
  StageClock clock(*model.runtime().dev, model.runtime().dev->compute_stream());
  model.set_clock(&clock);
  for (int s = 0; s < steps; ++s) {
    model.forward_backward(tokens_of(first_step + s));
    model.optimizer_step(adam);
    clock.end_step();
  }
  model.set_clock(nullptr);
  if (!print) return;
  double total = 0;
  for (const auto& st : clock.stages()) total += st.ms;
  total /= clock.steps();
  std::printf("#\n# profile of rank 0, %d steps: %.2f ms per step\n# %-30s %10s %7s %10s %9s\n", clock.steps(), total,
              "stage", "ms/step", "share", "TFLOP/s", "ceiling");
  for (const auto& st : clock.stages()) {
    const double ms = st.ms / clock.steps();
    char tf[32] = "", of[32] = "";
    if (st.flops > 0) {
      const double t = st.flops / (st.ms * 1e9);
      std::snprintf(tf, sizeof tf, "%.1f", t);
      if (ceiling > 0) std::snprintf(of, sizeof of, "%.0f%%", 100 * t / ceiling);
    }
    std::printf("  %-30s %10.3f %6.1f%% %10s %9s\n", st.name.c_str(), ms, 100 * ms / total, tf, of);
  }
  std::fflush(stdout);
}

// The reference step: from the same weights and tokens, the first step of `name` against that of `ref` (none when
// empty): the larger relative difference of the loss and the gradient norm, NaN without a reference. Leaves the
// model reset, running `name`.
double reference_step(const Bootstrap& boot, GlaModel& model, const std::string& name, const std::string& ref,
                      const std::vector<int32_t>& tokens, uint64_t seed) {
  // Each method starts from the same weights, the same AdamW state and the same tokens; the reference method's
  // first step (no update) runs before the method's own objects are made.
  model.reset(seed);
  double ref_loss = 0, ref_norm = 0;
  if (!ref.empty()) {
    model.set_method(ref);
    ref_loss = model.forward_backward(tokens), ref_norm = model.grad_norm();
  }
  agree_on_usage_errors(boot, [&] { model.set_method(name); });
  if (boot.rank() == 0 && !model.method(0).notice().empty()) std::printf("# %s\n", model.method(0).notice().c_str());
  if (ref.empty()) return NAN;
  const double loss = model.forward_backward(tokens), norm = model.grad_norm();
  if (boot.rank() == 0)
    std::printf("# %s first step against %s: loss %.7g vs %.7g, gradient norm %.7g vs %.7g\n", name.c_str(),
                ref.c_str(), loss, ref_loss, norm, ref_norm);
  return std::max(std::abs(loss - ref_loss) / std::abs(ref_loss), std::abs(norm - ref_norm) / ref_norm);
}

// Timed steps after one another, each timed as the max over ranks of the compute stream's events around forward,
// backward, gradient sum and AdamW (-w warm-up steps first, not kept); rank 0 adds each step's tokens and loss to the
// dump, and the first step's gradients.
// record(on): called with true before the first timed step and false after the last (--stage-times).
StepTimes timed_steps(const Bootstrap& boot, GlaModel& model, const ModelPlan& plan, const std::string& name,
                      const AdamWConfig& adam, const std::function<std::vector<int32_t>(int)>& tokens_of,
                      const TokenData* data, ModelDump& dump, EventHandle& e0, EventHandle& e1,
                      const std::function<void(bool)>& record) {
  const ModelOptions& o = plan.o;
  const int P = boot.size(), p = boot.rank(), T = plan.T, L = plan.L;
  Device& dev = *model.runtime().dev;
  const Stream st = dev.compute_stream();
  StepTimes t;
  const int total = o.warmup + o.steps;
  for (int s = 0; s < total; ++s) {
    if (s == o.warmup) record(true);
    const std::vector<int32_t> toks = tokens_of(s);
    if (!o.dump.empty() && p == 0)
      for (int32_t x : data->window(s, 0, T)) dump.tokens.push_back(float(x));
    dev.synchronize();
    boot.barrier();
    dev.record(e0.get(), st);
    t.loss = model.forward_backward(toks);
    if (s == 0 && !o.dump.empty()) dump.write_first_grads(boot, model);
    model.optimizer_step(adam);
    dev.record(e1.get(), st);
    dev.synchronize();
    const double ms = dev.elapsed_ms(e0.get(), e1.get());
    if (s == 0) t.peak_gib = boot.max(double(dev.used_memory_bytes()) / double(1ull << 30));
    dump.losses.push_back(float(t.loss));
    SPB_USAGE(std::isfinite(t.loss), "the loss of step " + std::to_string(s + 1) + " is not finite (--lr " +
                                       std::to_string(o.lr) + " too large?)");
    const double mx = boot.max(ms), mean = boot.sum(ms) / P;
    if (s >= o.warmup) t.max.push_back(mx), t.mean.push_back(mean);
    if (p == 0 && o.log_every && ((s + 1) % o.log_every == 0 || s + 1 == total)) {
      std::printf("# %s step %d/%d%s  loss %.4f  step %.2f ms  %.0f tokens/s/GPU\n", name.c_str(), s + 1, total,
                  s < o.warmup ? " (warm-up)" : "", t.loss, mx, o.batch * L / (mx / 1e3));
      std::fflush(stdout);
    }
  }
  record(false);
  t.peak_gib = std::max(t.peak_gib, boot.max(double(dev.used_memory_bytes()) / double(1ull << 30)));
  return t;
}

// What every method's measurement shares, made once and in this order on every rank (the memory check is a
// collective): the gradient sum's schedule, the tolerance, the memory check (before any allocation), the GEMM
// ceiling, then the model over the backend's model kernels.
ModelRun prepare_model_run(const Bootstrap& boot, const ModelPlan& plan, Backend& be, const TokenData* data) {
  const ModelOptions& o = plan.o;
  const int P = boot.size();
  Runtime& rt = *be.rt;
  // The simulation stands for GPUs: their default schedule and datasheet peak.
  const bool gpu = rt.dev->is_gpu() || be.sim.on;
  ModelRun run{boot, plan, be, rt, data, be.sim};
  run.stages = be.stages.get();
  run.grad_overlap = P > 1 && (o.grad_overlap > 0 || (o.grad_overlap == 0 &&
                                                      grad_overlap_by_default(gpu, P, o.shard_optimizer, o.overlap)));
  run.tolerance = o.tolerance > 0 ? o.tolerance : gpu ? 5e-3 : 1e-5;
  run.scan_backend = be.scan;
  run.adam = AdamWConfig{o.lr, 0.9f, 0.95f, 1e-8f, o.weight_decay};
  run.need_gib = check_model_memory(boot, rt, plan, gpu);
  run.ceiling_tflops = gemm_ceiling_tflops(*rt.dev);
  run.peak_tflops = gpu ? datasheet_bf16_tflops(rt.dev->name()) : NAN;
  run.model = std::make_unique<GlaModel>(rt, std::move(be.model_kernels), plan.mc, o.batch, plan.L,
                                         plan.methods.front(), plan.sp, plan.recompute, o.seed);
  run.model->set_grad_overlap(run.grad_overlap);
  run.model->set_shard_optimizer(o.shard_optimizer);
  run.model->set_wgrad_beside(o.wgrad_beside);
  run.flops_per_token = run.model->flops_per_token();
  run.key = model_config_key(plan, run.tolerance);
  return run;
}

// The reference step, the dump's first files, -w + -n timed steps, --timeline's and --profile's steps after them
// (the timeline only of a correct method), the dump's last files.
MethodResult measure_method(const ModelRun& run, const std::string& name, EventHandle& e0, EventHandle& e1) {
  const ModelOptions& o = run.plan.o;
  const int P = run.boot.size(), p = run.boot.rank(), L = run.plan.L;
  GlaModel& model = *run.model;
  auto tokens_of = [&](int step) { return run.rank_tokens(step); };
  MethodResult r;
  run.be.select_transport(name == "zeco");
  r.err = reference_step(run.boot, model, name, o.check ? reference_method(name, P) : "", tokens_of(0), o.seed);
  r.ok = std::isnan(r.err) || r.err <= run.tolerance;

  ModelDump dump{o.dump, {}, {}};
  if (!o.dump.empty()) dump.write_start(run.boot, model, run.plan.mc, o, run.plan.T, run.adam);
  const int total = o.warmup + o.steps;
  auto record = [&](bool on) {
    if (run.stages) run.stages->set_recording(on);
  };
  r.steps = timed_steps(run.boot, model, run.plan, name, run.adam, tokens_of, run.data, dump, e0, e1, record);
  // every rank's calls of both recorders, one row per stage and shape
  if (run.stages) run.stages->append_rows(run.boot, o.steps, model_row(run, name, &model.method(0)));
  if (!o.timeline.empty() && r.ok)
    timeline_steps(model, o.timeline_steps, total, tokens_of, run.adam,
                   timeline_prefix(model_row(run, name, &model.method(0))), o.timeline);
  if (o.profile) profile_steps(model, o.profile, total + (o.timeline.empty() ? 0 : o.timeline_steps + 1), tokens_of,
                               run.adam, run.ceiling_tflops, p == 0);
  model.method(0).finish();
  if (!o.dump.empty()) dump.write_steps(run.boot, total, o.batch, run.plan.T);

  r.time = summarize(r.steps.max);
  r.tokens_per_s_per_gpu = o.batch * L / (r.time.mean / 1e3);
  r.mfu = run.flops_per_token * r.tokens_per_s_per_gpu / (run.peak_tflops * 1e12);
  r.ceiling_frac = run.flops_per_token * r.tokens_per_s_per_gpu / (run.ceiling_tflops * 1e12);
  return r;
}

}  // namespace

int run_model(Bootstrap& boot, const ModelOptions& opt) {
  const int p = boot.rank();
  ModelPlan plan = validated_model_plan(boot, opt);
  const ModelOptions& o = plan.o;
  std::unique_ptr<TokenData> data;
  if (o.backend != "sim")
    agree_on_usage_errors(boot,
                          [&] { data = std::make_unique<TokenData>(o.data, plan.mc.vocab, o.batch, plan.T, o.seed); });
  Backend be = make_backend(boot, {o.backend, o.allscan, o.ranks_per_node, o.nodes_over_network, o.sim,
                                   /*model_kernels=*/true, o.stage_times});
  plan.o.allscan = plan.sp.allscan = be.allscan;  // the simulation runs a device protocol as the chain
  const bool gpu = be.rt->dev->is_gpu() || be.sim.on;  // the simulation stands for GPUs
  if (o.plan) {
    print_memory_plan(boot, *be.rt, plan, gpu);
    return 0;
  }
  choose_auto_recompute(boot, *be.rt, plan, gpu);
  const ModelRun run = prepare_model_run(boot, plan, be, data.get());

  std::unique_ptr<CsvAppender> csv;
  const std::vector<std::string> todo = model_methods_to_measure(run, csv);
  if (todo.empty()) return 0;
  if (p == 0) print_model_header(run);

  int wrong = 0;
  EventHandle e0(*run.rt.dev), e1(*run.rt.dev);
  for (const std::string& name : todo) {
    watchdog_set_context("model, " + name + ", " + std::to_string(plan.L) + " tokens per rank");
    const MethodResult r = measure_method(run, name, e0, e1);
    wrong += !r.ok;
    if (p == 0) print_method_line(run, name, r);
    if (!o.csv.empty() && r.ok) append_method_row(run, csv.get(), name, r);  // on every rank: a collective
  }
  if (p == 0) {
    std::printf("# wrong results: %d%s\n", wrong, wrong ? "  (a wrong result is not written to the CSV)" : "");
    std::fflush(stdout);
  }
  return wrong ? 1 : 0;
}

}  // namespace spb
