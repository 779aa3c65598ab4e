// spbench model: the driver of the model level (DESIGN §5, §9). Per method: validate, build the model once (its
// weights drawn from the seed), check the first step against a reference method, run -w warm-up steps and -n timed
// steps (time = max over ranks of the compute stream's events around forward, backward, gradient all-reduce and AdamW),
// print an nccl-tests-style table and append one row per method to the CSV. Under --backend sim (DESIGN §10) the
// model's kernels and the GLA stages advance the simulated streams by the model stage table's times
// (the kernels backend/backend.h makes), the communication runs in the simulation, and no weights, tokens or check are made.
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
#include "runtime/watchdog.h"
#include "sp/inputs.h"
#include "sp/method.h"
#include "runtime/npy.h"
#include "runtime/gpu_peak.h"
#include "runtime/provenance.h"
#include "harness/resume.h"
#include "harness/timeline_csv.h"
#include "backend/backend.h"
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
  add_sim_options(app, o.sim);
  app.get_option("--sim-stages")
      ->description("--backend sim: the GPU's model stage times, the model's kernels and the GLA stages at its shapes "
                    "(results/<kind>_model_stages.csv, spbench model --stage-times)");
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
  app.add_option("--stage-times", o.stage_times,
                 "append the time of every kernel call in the timed steps, the model's (sim/model_stage_table.h) and "
                 "the SP method's GLA stages (sim/stage_table.h), as rows of level `stage` to this CSV; not with "
                 "--csv, whose times the events around each call would change");
  app.add_flag("--recompute{all}", o.recompute,
               "what the backward makes again instead of keeping it (SwiGLU's output is at every level): states (the "
               "attention's gates, their cumsum and its chunk states, one buffer each for every block), elementwise "
               "(the norms' outputs), states+elementwise, or --recompute (=all: the norms' outputs and one attention "
               "object for every block, its forward run again); auto (the default): states where a block's chunk "
               "states are larger than its k and v (dk dv / 64 > dk + dv), else none")
      ->check(CLI::IsMember({"auto", "none", "states", "elementwise", "states+elementwise", "all"}));
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

// Rank 0 writes what tests/model/torch_reference.py reads (tests/model/README.md); every rank agrees on whether it
// could, at each of the three writes (write_start, write_first_grads, write_steps), so every rank calls each of them.
struct Dump {
  std::string dir;
  std::vector<float> tokens, losses;  // every step's: the whole sequences (rank 0 alone keeps them), the loss
  // Before the first step: the directory, config.csv, manifest.csv and the initial params.npy.
  void write_start(const Bootstrap& boot, const GlaModel& model, const GlaModelConfig& c, const ModelOptions& o, int T,
                   const AdamWConfig& adam) const {
    agree_on_usage_errors(boot, [&] {
      if (boot.rank() != 0) return;
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      SPB_USAGE(!ec, "--dump " + dir + ": cannot create the directory (" + ec.message() + ")");
      config(c, o, T, adam);
      manifest(model.params_info());
      const std::vector<float> params = model.download_params();
      write_npy(dir + "/params.npy", {params.size()}, params.data());
    });
  }
  // After the first step's backward, before its update: grads_step1.npy.
  void write_first_grads(const Bootstrap& boot, const GlaModel& model) const {
    agree_on_usage_errors(boot, [&] {
      if (boot.rank() != 0) return;
      const std::vector<float> g = model.download_grads();
      write_npy(dir + "/grads_step1.npy", {g.size()}, g.data());
    });
  }
  // After the last of `steps` steps of `batch` sequences of T tokens: tokens.npy (each sequence's T inputs and its
  // last target, as TokenData::window gives them) and losses.npy.
  void write_steps(const Bootstrap& boot, int steps, int batch, int T) const {
    agree_on_usage_errors(boot, [&] {
      if (boot.rank() != 0) return;
      write_npy(dir + "/tokens.npy", {size_t(steps), size_t(batch), size_t(T) + 1}, tokens.data());
      write_npy(dir + "/losses.npy", {size_t(steps)}, losses.data());
    });
  }

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
  plan.recompute = o.recompute == "auto" ? recompute_auto(mc) : recompute_from_name(o.recompute);
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
  SPB_USAGE(o.stage_times.empty() || o.csv.empty(),
            "--stage-times: give no --csv (the events around every kernel call change the times its rows would hold)");
  SPB_USAGE(o.stage_times.empty() || o.backend != "sim",
            "--backend sim: no --stage-times (the simulation replays stage times, it does not measure them)");
  SPB_USAGE(o.backend != "sim" || (o.dump.empty() && o.data.empty() && o.timeline.empty() && o.profile == 0),
            "--backend sim: no --dump, --data, --timeline or --profile (the simulation moves no data)");
  if (o.backend == "sim") o.check = 0;  // no values to compare
  check_outputs(boot, {{"--csv", o.csv}, {"--timeline", o.timeline}, {"--stage-times", o.stage_times},
                       {"--dump", o.dump, true}});
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

// Memory: the model's own tensors plus the SP methods' chunk states and gc (per block, or one block's with
// --recompute=all, states or states+elementwise, and one dhs for every block: GlaModel::device_bytes), against what
// the device has free; every rank agrees before any allocation. Returns GiB per rank.
double check_memory(const Bootstrap& boot, Runtime& rt, const ModelPlan& plan, bool gpu) {
  const ModelOptions& o = plan.o;
  const GlaModelConfig& mc = plan.mc;
  const int P = boot.size(), L = plan.L;
  const Recompute recompute = plan.recompute;
  Device& dev = *rt.dev;
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
                (recompute == Recompute::all || recompute == Recompute::states_elementwise
                     ? "use fewer tokens per rank (-L) or more ranks"
                     : std::string("try --recompute=") +
                           (recompute == Recompute::none ? "states, --recompute=elementwise or --recompute=" : "") +
                           "states+elementwise, fewer tokens per rank (-L) or more ranks"));

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
// record(on): called with true before the first timed step and false after the last (--stage-times).
StepTimes timed_steps(const Bootstrap& boot, GlaModel& model, const ModelPlan& plan, const std::string& name,
                      const AdamWConfig& adam, const std::function<std::vector<int32_t>(int)>& tokens_of,
                      const TokenData* data, Dump& dump, EventHandle& e0, EventHandle& e1,
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

// What measuring every method reads: the plan, the backend, the tokens and the model, and what follows from them once.
struct ModelRun {
  const Bootstrap& boot;
  const ModelPlan& plan;
  const Backend& be;
  Runtime& rt;            // be.rt's
  const TokenData* data;  // none under --backend sim: the simulated kernels read no tokens
  const SimRows& sim;     // what a simulated run's rows say (sim.on: --backend sim)
  std::unique_ptr<GlaModel> model;  // built once, reset for every method (reference_step)
  AdamWConfig adam;
  bool grad_overlap = false;    // the gradients summed beside the backward
  double tolerance = 0;         // the largest relative error of the first step that passes
  std::string scan_backend;     // the All-Scan zeco runs (resolve_allscan)
  double need_gib = 0;          // the model's memory per rank (check_memory)
  double ceiling_tflops = NAN;  // the GEMM ceiling measured in this run (gemm_ceiling_tflops)
  double peak_tflops = NAN;     // the datasheet's dense bf16 peak, MFU's denominator; NaN: MFU left empty
  double flops_per_token = 0;
  std::string key;  // the rows' config_key
  StageRecording* stages = nullptr;  // --stage-times: the recorders around the model's kernels and rt.kern (be's)

  // This rank's tokens of training step `step` (none under --backend sim).
  std::vector<int32_t> rank_tokens(int step) const {
    const int p = boot.rank(), L = plan.L;
    return data ? data->window(step, p * L, (p + 1) * L) : std::vector<int32_t>();
  }
};

// What else sets what is computed or how it is timed: the rows' config_key.
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
  run.need_gib = check_memory(boot, rt, plan, gpu);
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


// A row of `method` without its measurement: what --resume compares with the CSV's rows (ran: nullptr), and what a
// measured row or the timeline starts from (ran: the method object that ran, which knows its own communication
// backend and head groups).
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

// The methods to measure: without --csv all of them; with it, those whose row the CSV (opened into `csv` on rank 0)
// does not hold yet, or all of them with --no-resume.
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

// Rank 0's header: every parameter of the run, then the table's column names.
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

// One method measured: its first step against the reference method's, the timed steps, the rates that follow.
struct MethodResult {
  double err = NAN;  // the first step's relative error against the reference method; NaN: not checked
  bool ok = true;    // err within the tolerance, or not checked; a wrong result is not written to the CSV
  StepTimes steps;
  Summary time;  // of the steps' max over ranks
  double tokens_per_s_per_gpu = 0;
  double mfu = NAN;           // the field's MFU (of the datasheet peak)
  double ceiling_frac = NAN;  // of the GEMM ceiling measured in this run
};

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

  Dump dump{o.dump, {}, {}};
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

// Rank 0's line of the table for one method.
void print_method_line(const ModelRun& run, const std::string& name, const MethodResult& r) {
  char e[16] = "-";
  if (!std::isnan(r.err)) std::snprintf(e, sizeof e, "%.2e", r.err);
  std::printf("  %8s %5d %11d %9.5f %10.3f %10.3f %10.3f %10.3f %12.0f %6.3f %8.2f %9s %6s\n", name.c_str(),
              run.boot.size(), run.plan.L, r.steps.loss, r.time.mean, r.time.median, r.time.min, r.time.max,
              r.tokens_per_s_per_gpu, r.mfu, r.steps.peak_gib, e, std::isnan(r.err) ? "-" : r.ok ? "OK" : "WRONG");
  std::fflush(stdout);
}

// The method's row, appended by rank 0 (the only rank with `csv`); every rank calls this, so that a row rank 0
// cannot write stops them all here.
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

}  // namespace

int run_model(Bootstrap& boot, const ModelOptions& opt) {
  const int p = boot.rank();
  ModelPlan plan = validated_plan(boot, opt);
  const ModelOptions& o = plan.o;
  std::unique_ptr<TokenData> data;
  if (o.backend != "sim")
    agree_on_usage_errors(boot,
                          [&] { data = std::make_unique<TokenData>(o.data, plan.mc.vocab, o.batch, plan.T, o.seed); });
  Backend be = make_backend(boot, {o.backend, o.allscan, o.ranks_per_node, o.nodes_over_network, o.sim,
                                   /*model_kernels=*/true, o.stage_times});
  plan.o.allscan = plan.sp.allscan = be.allscan;  // the simulation runs a device protocol as the chain
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
