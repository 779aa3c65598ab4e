// The model level's flags and their validation (harness/model_plan.h).
#include "harness/model_plan.h"

#include <sys/stat.h>

#include <climits>
#include <cmath>

#include "harness/resume.h"
#include "harness/runtime_options.h"
#include "runtime/collective_errors.h"
#include "runtime/error.h"
#include "sp/sp_local.h"

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
               "(the norms' outputs), states+elementwise, --recompute (=all: the norms' outputs and one attention "
               "object for every block, its forward run again), or blocks (each block's input alone kept, the whole "
               "block made again in its backward); auto (the default): the fastest that fits, from states where a "
               "block's chunk states are larger than its k and v (dk dv / 64 > dk + dv), else none, on to "
               "states+elementwise and blocks")
      ->check(CLI::IsMember({"auto", "none", "states", "elementwise", "states+elementwise", "all", "blocks"}));
  app.add_flag("--plan", o.plan,
               "print what the step would hold at every --recompute level against the memory free, and which one "
               "auto picks; train nothing");
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

}  // namespace

ModelPlan validated_model_plan(const Bootstrap& boot, const ModelOptions& opt) {
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

std::vector<Recompute> auto_recompute_levels(const GlaModelConfig& c) {
  const Recompute rule = recompute_auto(c);
  std::vector<Recompute> levels{rule};
  if (rule == Recompute::none) levels.push_back(Recompute::elementwise);
  levels.insert(levels.end(), {Recompute::states_elementwise, Recompute::blocks});
  return levels;
}

namespace {

// What the plan's step holds at `level` on this runtime, and what a rank may use: GiB; every rank agrees.
struct MemoryFit {
  double need_gib, free_gib;
  int sharing;  // ranks of a node that share its memory (CPU ranks), each needing all of it; 1 on a GPU
  bool fits() const { return need_gib * sharing < 0.95 * free_gib; }
};
MemoryFit memory_fit(const Bootstrap& boot, Runtime& rt, const ModelPlan& plan, Recompute level, bool gpu) {
  const size_t bytes = GlaModel::device_bytes(plan.mc, plan.o.batch, plan.L, rt.kern->act_dtype(),
                                              rt.kern->chunk_state_type(), level,
                                              plan.o.shard_optimizer ? boot.size() : 1);
  return {double(bytes) / double(1ull << 30), boot.min(double(rt.dev->free_memory_bytes()) / double(1ull << 30)),
          gpu ? 1 : int(boot.max(double(boot.local_size())))};
}

}  // namespace

void choose_auto_recompute(const Bootstrap& boot, Runtime& rt, ModelPlan& plan, bool gpu) {
  if (plan.o.recompute != "auto") return;
  const std::vector<Recompute> levels = auto_recompute_levels(plan.mc);
  // memory_fit is collective: every rank asks the same levels in the same order, and rank 0 alone prints.
  const MemoryFit first = memory_fit(boot, rt, plan, levels.front(), gpu);
  for (const Recompute r : levels)
    if (r == levels.front() ? first.fits() : memory_fit(boot, rt, plan, r, gpu).fits()) {
      plan.recompute = r;
      if (boot.rank() == 0 && r != levels.front())
        std::printf("# --recompute=auto: %s, the fastest level that fits (%s needs about %.1f GiB per rank, %.1f "
                    "GiB free)\n",
                    recompute_name(r), recompute_name(levels.front()), first.need_gib, first.free_gib);
      return;
    }
  plan.recompute = levels.back();  // none fits: the memory check names the smallest
}

void print_memory_plan(const Bootstrap& boot, Runtime& rt, const ModelPlan& plan, bool gpu) {
  const std::vector<Recompute> auto_levels = auto_recompute_levels(plan.mc);
  const std::vector<Recompute>& all_levels = recompute_levels();  // in the enum's order: fit[size_t(r)] is r's
  std::vector<MemoryFit> fit;
  for (const Recompute r : all_levels) fit.push_back(memory_fit(boot, rt, plan, r, gpu));
  if (boot.rank() != 0) return;
  const Recompute* pick = nullptr;
  for (const Recompute& r : auto_levels)
    if (fit[size_t(r)].fits()) {
      pick = &r;
      break;
    }
  std::printf("# spbench model --plan  %d layers  hidden %d  heads %d  vocab %d  B %d  %d tokens per rank  %s\n"
              "# what a rank's step holds (GlaModel::device_bytes; the CUDA context, cuBLAS's workspaces and the "
              "allocator's rounding come on top), against %.1f GiB free%s\n",
              plan.mc.layers, plan.mc.hidden, plan.mc.heads, plan.mc.vocab, plan.o.batch, plan.L,
              rt.dev->name().c_str(), fit.front().free_gib,
              fit.front().sharing > 1 ? (" shared by " + std::to_string(fit.front().sharing) + " ranks").c_str() : "");
  std::printf("%22s %10s %6s\n", "recompute", "GiB", "fits");
  for (size_t i = 0; i < fit.size(); ++i)
    std::printf("%22s %10.2f %6s%s\n", recompute_name(all_levels[i]), fit[i].need_gib, fit[i].fits() ? "yes" : "no",
                pick && *pick == all_levels[i] ? "  <- auto" : "");
  if (!pick) std::printf("# no level fits: fewer tokens per rank (-L) or more ranks\n");
  std::fflush(stdout);
}

double check_model_memory(const Bootstrap& boot, Runtime& rt, const ModelPlan& plan, bool gpu) {
  const ModelOptions& o = plan.o;
  const GlaModelConfig& mc = plan.mc;
  const int L = plan.L;
  const Recompute recompute = plan.recompute;
  const MemoryFit fit = memory_fit(boot, rt, plan, recompute, gpu);
  const double need_gib = fit.need_gib, free_gib = fit.free_gib;
  const int sharing = fit.sharing;
  SPB_USAGE(fit.fits(),
            "the model needs about " + std::to_string(int(std::ceil(need_gib))) + " GiB per rank (" +
                std::to_string(mc.layers) + " layers, " + std::to_string((long long)o.batch * L) +
                " tokens per rank) and " +
                (gpu ? "a GPU has " : sharing > 1 ? "the " + std::to_string(sharing) + " ranks of a node have " : "a rank has ") +
                std::to_string(int(free_gib)) + " GiB free: " +
                (recompute == Recompute::blocks
                     ? "use fewer tokens per rank (-L) or more ranks"
                     : std::string("try --recompute=") +
                           (recompute == Recompute::none ? "states, --recompute=elementwise, --recompute=" : "") +
                           (recompute == Recompute::all || recompute == Recompute::states_elementwise
                                ? ""
                                : "states+elementwise, --recompute=") +
                           "blocks, fewer tokens per rank (-L) or more ranks"));

  return need_gib;
}

}  // namespace spb
