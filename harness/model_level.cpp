// spbench model: the driver of the model level (DESIGN §5, §9). Per method: validate, build the model once (its
// weights drawn from the seed), check the first step against a reference method, run -w warm-up steps and -n timed
// steps (time = max over ranks of the compute stream's events around forward, backward, gradient all-reduce and AdamW),
// print an nccl-tests-style table and append one row per method to the CSV.
#include "harness/model_level.h"

#include <sys/stat.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "runtime/collective_errors.h"
#include "runtime/csv.h"
#include "runtime/error.h"
#include "sp/inputs.h"
#include "sp/method.h"
#include "runtime/npy.h"
#include "runtime/gpu_peak.h"
#include "runtime/provenance.h"
#include "harness/resume.h"
#include "harness/timeline_csv.h"
#include "harness/runtime_options.h"
#include "sp/runtime.h"
#include "sp/sp_local.h"
#include "runtime/stats.h"
#include "model/gla_model.h"
#include "model/token_data.h"
#include "zeco/all_scan.h"

namespace spb {

void add_model_command(CLI::App& app, ModelOptions& o) {
  app.add_option("--method,-m", o.method, "SP method, a comma-separated list, or all (spbench methods lists them)");
  add_runtime_options(app, o.backend, o.allscan, o.ranks_per_node, o.nodes_over_network);
  app.add_option("--batch,-B", o.batch, "sequences per step B");
  // Checked here: -1 is also the value that means "not given".
  auto* t = app.add_option("--seq,-T", o.seq, "tokens of each whole sequence (split evenly over the ranks)")
                ->check(at_least(1));
  auto* l = app.add_option("--tokens-per-rank,-L", o.tokens_per_rank, "tokens per rank (instead of -T; default 16384)")
                ->check(at_least(1));
  t->excludes(l);
  app.add_option("--vocab", o.vocab, "vocabulary size (default 32000)")->check(at_least(2));
  app.add_option("--hidden", o.hidden, "hidden size (default 2048)")->check(at_least(1));
  app.add_option("--layers", o.layers, "blocks (default 20)")->check(at_least(1));
  app.add_option("--heads,-H", o.heads, "attention heads (default 32, the paper's; GLA's public 1B has 4)")->check(at_least(1));
  app.add_option("--expand-k", o.expand_k, "key dimension / hidden (default 0.5)")->check(finite_positive());
  app.add_option("--expand-v", o.expand_v, "value dimension / hidden (default 1)")->check(finite_positive());
  app.add_option("--mlp", o.mlp, "MLP intermediate size (0: GLA's, 2/3 x 4 x hidden rounded up to 256)")->check(at_least(0));
  app.add_option("--gate-rank", o.gate_rank, "the forget gate's low rank (default 16)")->check(at_least(1));
  app.add_option("--blocks,-K", o.blocks, "All-Scan blocks K (zeco); must divide B*H*dk");
  app.add_option("--overlap", o.overlap, "zeco, lasp2: as for spbench operator")->check(CLI::Range(0, 2));
  app.add_option("--head-groups", o.head_groups, "zeco: as for spbench operator")->check(at_least(0));
  app.add_option("--warmup,-w", o.warmup, "untimed training steps first (default 5)")->check(at_least(0));
  app.add_option("--steps,-n", o.steps, "timed training steps (default 100)")->check(at_least(1));
  app.add_option("--profile", o.profile,
                 "after the timed steps, N more with every stage timed: a table of where a step's time goes")
      ->check(at_least(0));
  app.add_option("--timeline", o.timeline,
                 "after the timed steps, append the compute/comm spans of every rank in --timeline-steps more steps "
                 "to this CSV (a span per block's attention and SP stages, the gradient all-reduce, the whole step)");
  app.add_option("--timeline-steps", o.timeline_steps, "steps --timeline records (default 3)")->check(CLI::Range(1, 100));
  app.add_option("--log-every", o.log_every, "a progress line every N steps (0: none)")->check(at_least(0));
  app.add_option("--seed", o.seed, "seed of the weights and of the random tokens")->check(at_least(0));
  app.add_option("--lr", o.lr, "AdamW learning rate (default 3e-4, constant)")->check(finite_positive());
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay (default 0.1)")->check(finite_positive(true));
  app.add_option("--data", o.data, "train on this file's bytes as tokens (default: random tokens)");
  app.add_option("--dump", o.dump,
                 "write config, manifest, initial params, tokens, the first step's gradients and every loss here "
                 "(tests/model/torch_reference.py checks them)");
  app.add_option("--csv", o.csv, "append result rows to this CSV");
  app.add_flag("--recompute{all}", o.recompute,
               "less memory: the norms' outputs made again in the backward (SwiGLU's output is at every level); with "
               "--recompute (=all), also one attention object for every block, its forward run again there; "
               "--recompute=elementwise keeps each block's attention (its chunk states)")
      ->check(CLI::IsMember({"none", "elementwise", "all"}));
  app.add_flag("--grad-overlap,!--no-grad-overlap", o.grad_overlap,
               "at P > 1, sum each block's gradients over the ranks as soon as its backward is done, on the "
               "communication stream beside the blocks still to go (the default on GPUs, unless --shard-optimizer or "
               "--overlap 2); --no-grad-overlap: one all-reduce after the backward")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--shard-optimizer", o.shard_optimizer,
               "at P > 1, ZeRO stage 1: reduce-scatter the gradients, AdamW on each rank's 1/P of the weights, "
               "all-gather the updated bf16 weights (default: all-reduce, AdamW on every weight on every rank)");
  app.add_flag("--wgrad-beside", o.wgrad_beside,
               "the weight gradients' products on a second stream, beside the backward's chain of input gradients "
               "(default: in line, on the compute stream)");
  app.add_option("--check,-c", o.check, "check the first step against a reference method (1) or not (0)")
      ->check(CLI::Range(0, 1));
  app.add_option("--tolerance", o.tolerance, "largest relative error that passes (default 1e-5 cpu, 5e-3 gpu)")
      ->check(finite_positive());
  app.add_flag("!--no-resume", o.resume, "rerun configurations already in the CSV");
}

namespace {

GlaModelConfig model_config(const ModelOptions& o) {
  GlaModelConfig c;
  c.vocab = o.vocab, c.hidden = o.hidden, c.layers = o.layers, c.heads = o.heads;
  c.expand_k = o.expand_k, c.expand_v = o.expand_v, c.mlp = o.mlp, c.gate_rank = o.gate_rank;
  return c;
}

// The method whose first step every other method's is compared with: LASP-1's serial chain, the plainest way to the
// whole sequence's states (and LASP-2 for LASP-1 itself). dp has no reference past one rank: its ranks train
// independent sequences.
std::string reference_method(const std::string& method, int P) {
  if (method == "dp") return P == 1 ? "lasp1" : "";
  return method == "lasp1" ? "lasp2" : "lasp1";
}

// The bf16 GEMM ceiling of this GPU in TFLOP/s: the best of a few 8192-cubed products of the model kernels' gemm,
// measured in the same run. It is the denominator of `gemm_ceiling_frac`, not of MFU (which divides by the datasheet
// peak, runtime/gpu_peak.h): under the power cap it drifts from run to run. NaN on CPU ranks, whose plain loops have
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

// Rank 0 writes what tests/model/torch_reference.py reads (tests/model/README.md).
struct Dump {
  std::string dir;
  std::vector<float> tokens, losses;
  void config(const GlaModelConfig& c, const ModelOptions& o, int T, const AdamWConfig& adam) const {
    FILE* f = std::fopen((dir + "/config.csv").c_str(), "w");
    SPB_USAGE(f, "--dump " + dir + ": cannot write config.csv");
    std::fprintf(f, "key,value\nvocab,%d\nhidden,%d\nlayers,%d\nheads,%d\ndk,%d\ndv,%d\nkey_dim,%d\nvalue_dim,%d\n",
                 c.vocab, c.hidden, c.layers, c.heads, c.dk(), c.dv(), c.key_dim(), c.value_dim());
    std::fprintf(f, "mlp,%d\ngate_rank,%d\nbatch,%d\nseq,%d\nsteps,%d\n", c.mlp_size(), c.gate_rank, o.batch, T,
                 o.warmup + o.steps);
    std::fprintf(f, "lr,%.9g\nbeta1,%.9g\nbeta2,%.9g\nadam_eps,%.9g\nweight_decay,%.9g\nnorm_eps,%.9g\n", adam.lr,
                 adam.beta1, adam.beta2, adam.eps, adam.weight_decay, c.norm_eps);
    std::fprintf(f, "gate_normaliser,%.9g\n", c.gate_normaliser);
    std::fclose(f);
  }
  void manifest(const std::vector<ParamInfo>& info) const {
    FILE* f = std::fopen((dir + "/manifest.csv").c_str(), "w");
    SPB_USAGE(f, "--dump " + dir + ": cannot write manifest.csv");
    std::fprintf(f, "name,offset,rows,cols\n");
    for (const ParamInfo& p : info) std::fprintf(f, "%s,%zu,%zu,%zu\n", p.name.c_str(), p.offset, p.rows, p.cols);
    std::fclose(f);
  }
};

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

}  // namespace

namespace {

// What run_model measures: the options (backend resolved) and what follows from them.
struct ModelPlan {
  ModelOptions o;
  GlaModelConfig mc;
  int T = 0, L = 0;  // tokens of a whole sequence, of a rank
  Recompute recompute = Recompute::none;
  SpConfig sp;
  std::vector<std::string> methods, left_out;  // left_out: by `all`, the methods that cannot run this configuration
};

// The options, validated the same way on every rank (or agreed on), and what follows from them; every file rank 0
// will write checked. Nothing is allocated yet.
ModelPlan validated_plan(const Bootstrap& boot, const ModelOptions& opt) {
  const int P = boot.size();
  ModelPlan plan;
  ModelOptions& o = plan.o;
  o = opt;
  o.backend = resolve_backend(o.backend);
  plan.mc = model_config(o);
  const GlaModelConfig& mc = plan.mc;
  mc.validate();
  SPB_USAGE(o.batch >= 1, "--batch/-B must be >= 1");
  const long long T_asked =
      o.tokens_per_rank != -1 ? (long long)o.tokens_per_rank * P : o.seq != -1 ? o.seq : 16384LL * P;
  SPB_USAGE(T_asked <= INT_MAX, "--tokens-per-rank/-L: " + std::to_string(o.tokens_per_rank) + " tokens on each of " +
                                    std::to_string(P) + " ranks make " + std::to_string(T_asked) +
                                    " tokens, more than the 2147483647 a sequence may have");
  const int T = plan.T = int(T_asked);
  SPB_USAGE(T >= 1 && (o.tokens_per_rank == -1 || o.tokens_per_rank >= 1), "-T/-L must be >= 1");
  SPB_USAGE((long long)o.batch * (T / P) <= INT_MAX,
            "--batch/-B x tokens per rank: " + std::to_string(o.batch) + " x " + std::to_string(T / P) +
                " tokens on a rank, more than 2147483647");
  SPB_USAGE(T % P == 0, "--seq/-T: " + std::to_string(T) + " tokens is not divisible by the world size " +
                            std::to_string(P) + " (every rank holds T/P tokens)");
  plan.L = T / P;
  plan.recompute = recompute_from_name(o.recompute);
  SPB_USAGE(o.blocks >= 1, "--blocks/-K must be >= 1");
  plan.sp = SpConfig{GlaShape{o.batch, plan.L, mc.heads, mc.dk(), mc.dv()}, o.blocks, o.allscan, SpOverlap(o.overlap),
                     o.head_groups};
  require_distinct_methods(o.method);
  plan.methods = methods_to_run(o.method, plan.sp, P, &plan.left_out);
  for (const std::string& m : plan.methods)
    if (m == "zeco") (void)SpLocalGla::head_groups_for(plan.sp);
  SPB_USAGE(o.dump.empty() || plan.methods.size() == 1, "--dump: give a single --method");
  // With --overlap 2 the chunk states kernel holds nearly every SM while it waits for the scan, and the scan would
  // queue behind a gradient bucket whose all-reduce needs SMs too: the two may wait on each other.
  SPB_USAGE(o.grad_overlap <= 0 || o.overlap != 2,
            "--grad-overlap with --overlap 2: the states kernel waits for the scan on the communication stream, where "
            "a gradient all-reduce may stand before it; use one of the two");
  SPB_USAGE(o.grad_overlap <= 0 || !o.shard_optimizer,
            "--grad-overlap with --shard-optimizer: the overlap all-reduces each block's gradients, the sharded "
            "optimizer reduce-scatters them all after the backward; use one of the two");
  SPB_USAGE(o.dump.empty() || !o.shard_optimizer,
            "--dump with --shard-optimizer: the dump is written by rank 0 alone, and a sharded optimizer's weights and "
            "gradients must be gathered by every rank; dump without it");
  check_outputs(boot, {{"--csv", o.csv}, {"--timeline", o.timeline}, {"--dump", o.dump, true}});
  // --data is read whole: a directory, a device (/dev/zero never ends) or a pipe is refused before it is opened.
  if (!o.data.empty())
    agree_on_usage_errors(boot, [&] {
      struct stat st;
      SPB_USAGE(stat(o.data.c_str(), &st) != 0 || S_ISREG(st.st_mode),
                "--data " + o.data + (S_ISDIR(st.st_mode) ? ": is a directory" : ": not a regular file (a device or pipe)") +
                    "; give a file of bytes");
    });
  return plan;
}

// Memory: the model's own tensors plus the SP methods' chunk states (hs per block, or one block's with
// --recompute=all, and one dhs for every block: GlaModel::device_bytes), against what the device has free; every rank
// agrees before any allocation. Returns GiB per rank.
double check_memory(const Bootstrap& boot, Runtime& rt, const ModelPlan& plan) {
  const ModelOptions& o = plan.o;
  const GlaModelConfig& mc = plan.mc;
  const int P = boot.size(), L = plan.L;
  const Recompute recompute = plan.recompute;
  Device& dev = *rt.dev;
  const bool gpu = dev.is_gpu();
  const size_t model_bytes = GlaModel::device_bytes(mc, o.batch, L, rt.kern->act_dtype(),
                                                    rt.kern->chunk_state_type(), recompute, o.shard_optimizer ? P : 1);
  const double need_gib = double(model_bytes) / double(1ull << 30);
  const double free_gib = boot.min(double(dev.free_memory_bytes()) / double(1ull << 30));
  // A GPU's memory is its own; CPU ranks share their node's, each needing all of it.
  const int sharing = gpu ? 1 : int(boot.max(double(boot.local_size())));
  SPB_USAGE(need_gib * sharing < 0.95 * free_gib,
            "the model needs about " + std::to_string(int(std::ceil(need_gib))) + " GiB per rank (" +
                std::to_string(mc.layers) + " layers, " + std::to_string((long long)o.batch * L) +
                " tokens per rank) and " +
                (gpu ? "a GPU has " : sharing > 1 ? "the " + std::to_string(sharing) + " ranks of a node have " : "a rank has ") +
                std::to_string(int(free_gib)) + " GiB free: " +
                (recompute == Recompute::all ? "use fewer tokens per rank (-L) or more ranks"
                 : recompute == Recompute::elementwise
                     ? "try --recompute (the attention's too), fewer tokens per rank (-L) or more ranks"
                     : "try --recompute=elementwise or --recompute, fewer tokens per rank (-L) or more ranks"));

  return need_gib;
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
struct StepTimes {
  std::vector<double> max, mean;  // per timed step: over ranks
  double loss = 0, peak_gib = 0;  // the last step's loss; the most memory a rank used
};
StepTimes timed_steps(const Bootstrap& boot, GlaModel& model, const ModelPlan& plan, const std::string& name,
                      const AdamWConfig& adam, const std::function<std::vector<int32_t>(int)>& tokens_of,
                      const TokenData& data, Dump& dump, EventHandle& e0, EventHandle& e1) {
  const ModelOptions& o = plan.o;
  const int P = boot.size(), p = boot.rank(), T = plan.T, L = plan.L;
  Device& dev = *model.runtime().dev;
  const Stream st = dev.compute_stream();
  StepTimes t;
  const int total = o.warmup + o.steps;
  for (int s = 0; s < total; ++s) {
    const std::vector<int32_t> toks = tokens_of(s);
    if (!o.dump.empty() && p == 0)
      for (int32_t x : data.window(s, 0, T)) dump.tokens.push_back(float(x));
    dev.synchronize();
    boot.barrier();
    dev.record(e0.get(), st);
    t.loss = model.forward_backward(toks);
    if (s == 0 && !o.dump.empty())
      agree_on_usage_errors(boot, [&] {
        if (p != 0) return;
        const std::vector<float> g = model.download_grads();
        write_npy(o.dump + "/grads_step1.npy", {g.size()}, g.data());
      });
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
  t.peak_gib = std::max(t.peak_gib, boot.max(double(dev.used_memory_bytes()) / double(1ull << 30)));
  return t;
}

}  // namespace

int run_model(Bootstrap& boot, const ModelOptions& opt) {
  const int P = boot.size(), p = boot.rank();
  const ModelPlan plan = validated_plan(boot, opt);
  const ModelOptions& o = plan.o;
  const GlaModelConfig& mc = plan.mc;
  const int T = plan.T, L = plan.L;
  const Recompute recompute = plan.recompute;
  const SpConfig& sp = plan.sp;
  const std::vector<std::string>& methods = plan.methods;
  const std::vector<std::string>& left_out = plan.left_out;  // by `all`: the methods that cannot run this configuration
  std::unique_ptr<TokenData> data;
  agree_on_usage_errors(boot, [&] { data = std::make_unique<TokenData>(o.data, mc.vocab, o.batch, T, o.seed); });

  auto rt = make_runtime(boot, o.backend, o.ranks_per_node, o.nodes_over_network);
  Device& dev = *rt->dev;
  const bool gpu = dev.is_gpu();
  const bool grad_overlap =
      P > 1 && (o.grad_overlap > 0 ||
                (o.grad_overlap == 0 && grad_overlap_by_default(gpu, P, o.shard_optimizer, o.overlap)));
  const DType act = rt->kern->act_dtype();
  const double tol = o.tolerance > 0 ? o.tolerance : gpu ? 5e-3 : 1e-5;
  std::string scan_backend;
  agree_on_usage_errors(boot, [&] { scan_backend = resolve_allscan(o.allscan, gpu, rt->topo); });
  const AdamWConfig adam{o.lr, 0.9f, 0.95f, 1e-8f, o.weight_decay};

  const double need_gib = check_memory(boot, *rt, plan);
  const GlaShape& local = sp.local;

  const double ceiling = gemm_ceiling_tflops(dev);
  const double peak = gpu ? datasheet_bf16_tflops(dev.name()) : NAN;  // NaN: MFU left empty
  GlaModel model(*rt, mc, o.batch, L, methods.front(), sp, recompute, o.seed);
  model.set_grad_overlap(grad_overlap);
  model.set_shard_optimizer(o.shard_optimizer);
  model.set_wgrad_beside(o.wgrad_beside);
  const double flops_tok = model.flops_per_token();

  // What else sets what is computed or how it is timed (the rows' config_key).
  auto real = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", x);
    return std::string(b);
  };
  const std::string key = config_key({{"seed", std::to_string(o.seed)},
                                      {"lr", real(o.lr)},
                                      {"weight_decay", real(o.weight_decay)},
                                      {"data", o.data},
                                      {"gate_rank", std::to_string(mc.gate_rank)},
                                      {"wgrad_beside", std::to_string(o.wgrad_beside)},
                                      {"check", std::to_string(o.check)},
                                      {"tolerance", real(tol)},
                                      {"warmup", std::to_string(o.warmup)},
                                      {"steps", std::to_string(o.steps)},
                                      {"allscan", o.allscan}});

  // `backend` as at the operator level: what carried the attention's communication.
  auto row_for = [&](const std::string& method, const SpMethod* ran) {
    const std::string plain = !gpu ? "cpu" : rt->comm->name();
    std::string backend =
        method == "zeco" && (is_device_allscan(scan_backend) || is_node_aware_allscan(scan_backend)) ? scan_backend
                                                                                                      : plain;
    if (ran) backend = ran->comm_backend().empty() ? plain : ran->comm_backend();
    ResultRow r;
    r.set("level", std::string("model")).set("method", method).set("backend", backend);
    r.set("world_size", P).set("batch", o.batch).set("heads", mc.heads).set("dk", mc.dk()).set("dv", mc.dv());
    r.set("tokens_per_rank", L).set("chunk", kChunk).set("dtype", std::string(dtype_name(act)));
    r.set("blocks", method == "zeco" ? o.blocks : 0);
    r.set("block_elems", method == "zeco" ? (long long)(local.state_rows() / o.blocks * local.dv) : 0LL);
    r.set("overlap", method == "zeco" || method == "lasp2" ? o.overlap : 0);
    r.set("head_groups", ran ? ran->head_groups() : 1);
    r.set("grad_overlap", grad_overlap ? 1 : 0).set("shard_optimizer", o.shard_optimizer && P > 1 ? 1 : 0);
    r.set("wgrad_beside", o.wgrad_beside ? 1 : 0);
    r.set("pass", std::string("step")).set("comm", rt->comm->name()).set("warmup", o.warmup).set("iters", o.steps);
    r.set("layers", mc.layers).set("hidden", mc.hidden).set("vocab", mc.vocab).set("expand_k", mc.expand_k);
    r.set("expand_v", mc.expand_v).set("mlp", mc.mlp_size()).set("steps", o.steps).set("seed", (long long)o.seed);
    r.set("recompute", std::string(recompute_name(recompute)));
    r.set("params", (long long)model.param_count()).set("flops_per_token", flops_tok);
    r.set("gemm_tflops", ceiling).set("peak_tflops", peak);
    r.set("nodes", rt->topo.nodes).set("ranks_per_node", rt->topo.ranks_per_node);
    r.set("config_key", key);
    add_provenance(r, dev);
    return r;
  };
  std::unique_ptr<CsvAppender> csv;
  std::vector<std::string> todo = methods;
  if (!o.csv.empty()) {
    todo = methods_to_measure(
        boot, o.csv,
        {"layers", "hidden", "vocab", "expand_k", "expand_v", "mlp", "steps", "seed", "loss", "peak_mem_gib", "mfu",
         "recompute", "tokens_per_s", "gemm_tflops", "peak_tflops", "gemm_ceiling_frac", "params", "flops_per_token",
         "nodes", "ranks_per_node", "head_groups", "grad_overlap", "shard_optimizer", "wgrad_beside"},
        o.resume, methods, [&](const CsvAppender& c, const std::string& m) { return c.contains(row_for(m, nullptr)); },
        "P=" + std::to_string(P) + " L=" + std::to_string(L), csv);
    if (todo.empty()) return 0;
  }

  if (p == 0) {
    std::printf("# spbench model  backend %s (%s, allscan %s)  ranks %d (%s)  device %s\n", o.backend.c_str(),
                rt->comm->name().c_str(), o.allscan.c_str(), P, rt->topo.describe().c_str(), dev.name().c_str());
    std::printf("# GLA LM: vocab %d  hidden %d  layers %d  heads %d (dk %d, dv %d)  mlp %d  gate rank %d  params %.4g M"
                "  (%.4g M without the embedding)\n",
                mc.vocab, mc.hidden, mc.layers, mc.heads, mc.dk(), mc.dv(), mc.mlp_size(), mc.gate_rank,
                model.param_count() / 1e6, (model.param_count() - model.embedding_params()) / 1e6);
    char peak_note[96];
    if (!gpu) std::snprintf(peak_note, sizeof peak_note, "none on CPU ranks");
    else if (std::isnan(peak)) std::snprintf(peak_note, sizeof peak_note, "unknown for this GPU: mfu left empty");
    else std::snprintf(peak_note, sizeof peak_note, "%.1f TFLOP/s", peak);
    std::printf("# model FLOPs per token %.4g (6 x non-embedding params + attention)  bf16 GEMM ceiling %.1f TFLOP/s"
                "  datasheet dense bf16 peak (MFU's denominator) %s\n",
                flops_tok, ceiling, peak_note);
    std::printf("# B %d  T %d (%d per rank)  K %d  recompute %s  gradients summed %s%s  data %s  warm-up %d  "
                "steps %d  seed %llu  lr %g  tolerance %.0e  memory about %.1f GiB per rank\n",
                o.batch, T, L, o.blocks, recompute_name(recompute),
                P == 1 ? "over one rank: no communication"
                : o.shard_optimizer
                    ? "by a reduce-scatter after the backward (AdamW on each rank's 1/P, the weights all-gathered)"
                : grad_overlap ? "by an all-reduce per block, beside the backward"
                               : "by one all-reduce after the backward",
                o.wgrad_beside ? " (the weight gradients' products beside the backward)" : "",
                o.data.empty() ? "random tokens" : o.data.c_str(), o.warmup, o.steps, (unsigned long long)o.seed,
                double(o.lr), tol, need_gib);
    for (const std::string& m : left_out) std::printf("# left out of all: %s\n", m.c_str());
    std::printf("#\n# %8s %5s %11s %9s %10s %10s %10s %10s %12s %6s %8s %9s %6s\n", "method", "ranks", "tokens/rank",
                "loss", "mean_ms", "median_ms", "min_ms", "max_ms", "tok/s/GPU", "mfu", "mem_GiB", "error", "check");
    std::fflush(stdout);
  }

  int wrong = 0;
  EventHandle e0(dev), e1(dev);
  auto tokens_of = [&](int step) { return data->window(step, p * L, (p + 1) * L); };
  for (const std::string& name : todo) {
    const double err =
        reference_step(boot, model, name, o.check ? reference_method(name, P) : "", tokens_of(0), o.seed);
    const bool ok = std::isnan(err) || err <= tol;

    Dump dump{o.dump, {}, {}};
    // Rank 0 writes the dump; every rank agrees on whether it could (here and at each write below).
    if (!o.dump.empty())
      agree_on_usage_errors(boot, [&] {
        if (p != 0) return;
        std::error_code ec;
        std::filesystem::create_directories(o.dump, ec);
        SPB_USAGE(!ec, "--dump " + o.dump + ": cannot create the directory (" + ec.message() + ")");
        dump.config(mc, o, T, adam);
        dump.manifest(model.params_info());
        const std::vector<float> params = model.download_params();
        write_npy(o.dump + "/params.npy", {params.size()}, params.data());
      });

    const int total = o.warmup + o.steps;
    const StepTimes timed = timed_steps(boot, model, plan, name, adam, tokens_of, *data, dump, e0, e1);
    const std::vector<double>&step_max = timed.max, &step_mean = timed.mean;
    const double loss = timed.loss, peak_gib = timed.peak_gib;
    if (!o.timeline.empty() && ok)
      timeline_steps(model, o.timeline_steps, total, tokens_of, adam, timeline_prefix(row_for(name, &model.method(0))),
                     o.timeline);
    if (o.profile) profile_steps(model, o.profile, total + (o.timeline.empty() ? 0 : o.timeline_steps + 1), tokens_of,
                                 adam, ceiling, p == 0);
    model.method(0).finish();
    if (!o.dump.empty())
      agree_on_usage_errors(boot, [&] {
        if (p != 0) return;
        write_npy(o.dump + "/tokens.npy", {size_t(total), size_t(o.batch), size_t(T) + 1}, dump.tokens.data());
        write_npy(o.dump + "/losses.npy", {size_t(total)}, dump.losses.data());
      });

    wrong += !ok;
    const Summary sm = summarize(step_max);
    const double tps = o.batch * L / (sm.mean / 1e3);
    const double mfu = flops_tok * tps / (peak * 1e12);            // the field's MFU (datasheet peak)
    const double ceiling_frac = flops_tok * tps / (ceiling * 1e12);  // of the GEMM ceiling measured in this run
    if (p == 0) {
      char e[16] = "-";
      if (!std::isnan(err)) std::snprintf(e, sizeof e, "%.2e", err);
      std::printf("  %8s %5d %11d %9.5f %10.3f %10.3f %10.3f %10.3f %12.0f %6.3f %8.2f %9s %6s\n", name.c_str(), P, L,
                  loss, sm.mean, sm.median, sm.min, sm.max, tps, mfu, peak_gib, e,
                  std::isnan(err) ? "-" : ok ? "OK" : "WRONG");
      std::fflush(stdout);
    }
    // Every rank, after every method: a row rank 0 cannot write stops them all here.
    if (!o.csv.empty() && ok) agree_on_usage_errors(boot, [&] {
      if (!csv) return;
      ResultRow r = row_for(name, &model.method(0));
      r.set("time_ms_mean", sm.mean).set("time_ms_median", sm.median).set("time_ms_min", sm.min);
      r.set("time_ms_max", sm.max).set("time_ms_cv", sm.cv).set("time_ms_mean_over_ranks", summarize(step_mean).mean);
      r.set("err_rel_rms", err).set("tokens_per_s_per_gpu", tps).set("tokens_per_s", tps * P);
      r.set("loss", loss).set("peak_mem_gib", peak_gib).set("mfu", mfu).set("gemm_ceiling_frac", ceiling_frac);
      csv->append(r);
    });
  }
  if (p == 0) {
    std::printf("# wrong results: %d%s\n", wrong, wrong ? "  (a wrong result is not written to the CSV)" : "");
    std::fflush(stdout);
  }
  return wrong ? 1 : 0;
}

}  // namespace spb
