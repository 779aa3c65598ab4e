// spbench operator: the driver of the operator level (DESIGN §4-5). Per configuration: validate (the plan), make the
// backend and the inputs, run the method's forward+backward -w times untimed and -n times timed (time = max over ranks
// of the compute stream's events, the slowest rank sets the step), check the last iteration against the single-device
// run of the same sequence, print an nccl-tests-style table and append the rows to the CSV (write). run_operator
// calls the sections below in that order.
#include "harness/operator_level.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include "runtime/collective_errors.h"
#include "runtime/csv.h"
#include "runtime/error.h"
#include "runtime/watchdog.h"
#include "sp/inputs.h"
#include "sp/method.h"
#include "runtime/npy.h"
#include "runtime/provenance.h"
#include "harness/resume.h"
#include "harness/timeline_csv.h"
#include "harness/runtime_options.h"
#include "sp/runtime.h"
#include "sp/sp_local.h"
#include "sp/sp_run.h"
#include "runtime/stats.h"
#include "sp/timeline.h"
#include "kernels/gla/gla.h"
#include "zeco/all_scan.h"

namespace spb {

void add_operator_command(CLI::App& app, OperatorOptions& o) {
  app.add_option("--method,-m", o.method, "SP method, a comma-separated list, or all (spbench methods lists them)");
  add_runtime_options(app, o.backend, o.allscan, o.ranks_per_node, o.nodes_over_network);
  add_sim_options(app, o.sim);
  auto* b = app.add_option("--batch,-B", o.batch, "batch size B");
  // Checked here, not only in validate(): -1 is also the value that means "not given".
  auto* t = app.add_option("--seq,-T", o.seq, "tokens of the whole sequence (split evenly over the ranks)")
                ->check(at_least(1));
  auto* l = app.add_option("--tokens-per-rank,-L", o.tokens_per_rank, "tokens per rank (instead of -T)")
                ->check(at_least(1));
  auto* h = app.add_option("--heads,-H", o.heads, "heads H");
  auto* k = app.add_option("--dk", o.dk, "key/query head dimension");
  auto* v = app.add_option("--dv", o.dv, "value head dimension");
  t->excludes(l);
  app.add_option("--blocks,-K", o.blocks, "All-Scan blocks K (zeco); must divide B*H*dk");
  app.add_option("--overlap", o.overlap,
                 "zeco, lasp2: 0 = fold the incoming state into the chunk states after the communication (default); "
                 "1 = output from local states during the communication, corrected after; 2 = the chunk states "
                 "beside the communication, taking the incoming state as it arrives")
      ->check(CLI::Range(0, 2));
  app.add_option("--head-groups", o.head_groups,
                 "zeco, in order: split the heads into this many groups, each scanned while another group computes "
                 "(0 = the default: 1, one scan of the whole state)")
      ->check(at_least(0));
  app.add_option("--warmup,-w", o.warmup, "untimed iterations")->check(at_least(0));
  app.add_option("--iters,-n", o.iters, "timed iterations")->check(at_least(1));
  app.add_option("--seed", o.seed, "seed of the random inputs")->check(at_least(0));
  app.add_option("--attention", o.attention,
                 "the attention family: gla (Gated Linear Attention, the paper's) or gdn (Gated DeltaNet; every "
                 "method, in order: --overlap 0)")
      ->check(CLI::IsMember({"gla", "gdn"}));
  app.add_option("--gates", o.gates, "model: logsigmoid(randn)/16; strong: logsigmoid(randn)")
      ->check(CLI::IsMember({"model", "strong"}));
  app.add_flag("--h0", o.h0, "a random initial state");
  app.add_flag("--dht", o.dht, "a random final-state gradient");
  auto* in = app.add_option("--inputs", o.inputs, "directory with q,k,v,g[,do,h0,dht].npy of the whole sequence");
  for (auto* shape_flag : {b, t, l, h, k, v}) in->excludes(shape_flag);
  app.add_option("--outputs", o.outputs, "directory to write o,ht,dq,dk,dv,dg,dh0.npy of the whole sequence");
  app.add_option("--csv", o.csv, "append result rows to this CSV");
  app.add_option("--check,-c", o.check, "check against the single-device run (1) or not (0)")
      ->check(CLI::Range(0, 1));
  app.add_option("--tolerance", o.tolerance, "largest relative RMS error that passes (default 1e-5 cpu, 5e-3 gpu)")
      ->check(finite_positive());
  app.add_flag("!--no-resume", o.resume, "rerun configurations already in the CSV");
  app.add_option("--timeline", o.timeline,
                 "append the compute/comm spans of every rank in --timeline-iters more iterations to this CSV");
  app.add_option("--stage-times", o.stage_times,
                 "append the time of every kernel stage call in the timed iterations (rows of level `stage`: what the "
                 "simulated build replays, sim/stage_table.h) to this CSV; not with --csv, whose times the events "
                 "around each stage would change");
  app.add_option("--timeline-iters", o.timeline_iters, "iterations --timeline records (default 5)")
      ->check(CLI::Range(1, 1000));
}

namespace {

// --- plan: the options validated, the shapes and the methods ---------------------------------------------------------

// The head groups `method` runs with (the `head_groups` column): zeco's (SpLocalGla::head_groups_for, as
// zeco/method_zeco.cpp asks for them); every other method has one group.
int head_groups_of(const std::string& method, const OperatorOptions& o, const GlaShape& local) {
  if (method != "zeco") return 1;
  return SpLocalGla::head_groups_for(SpConfig{local, o.blocks, o.allscan, SpOverlap(o.overlap), o.head_groups});
}

// The shape of the whole sequence, validated the same way on every rank.
GlaShape whole_shape(const OperatorOptions& o, int P) {
  GlaShape s;
  s.B = o.batch, s.H = o.heads, s.dk = o.dk, s.dv = o.dv;
  const long long T = o.tokens_per_rank != -1 ? (long long)o.tokens_per_rank * P : o.seq != -1 ? o.seq : 128LL * P;
  SPB_USAGE(T <= INT_MAX, "--tokens-per-rank/-L: " + std::to_string(o.tokens_per_rank) + " tokens on each of " +
                              std::to_string(P) + " ranks make " + std::to_string(T) +
                              " tokens, more than the 2147483647 a sequence may have");
  s.T = int(T);
  return s;
}

void validate(const GlaShape& s, const OperatorOptions& o, int P) {
  auto positive = [](int x, const char* flag) {
    SPB_USAGE(x >= 1, std::string(flag) + " must be >= 1 (got " + std::to_string(x) + ")");
  };
  positive(s.B, "--batch/-B");
  positive(s.H, "--heads/-H");
  positive(s.dk, "--dk");
  positive(s.dv, "--dv");
  if (o.tokens_per_rank != -1) positive(o.tokens_per_rank, "--tokens-per-rank/-L");
  positive(s.T, "--seq/-T");
  SPB_USAGE(P <= s.T, "the world size " + std::to_string(P) + " is larger than the sequence (" + std::to_string(s.T) +
                          " tokens): every rank needs at least one token");
  SPB_USAGE(s.T % P == 0, "--seq/-T: " + std::to_string(s.T) + " tokens is not divisible by the world size " +
                              std::to_string(P) + " (every rank holds T/P tokens)");
  positive(o.blocks, "--blocks/-K");
  SPB_USAGE((long long)s.B * s.H <= INT_MAX, "--batch/-B x --heads/-H: " + std::to_string(s.B) + " x " +
                                                 std::to_string(s.H) + " (batch, head) pairs, more than 2147483647");
  require_method(o.method);
  GlaShape local = s;
  local.T = s.T / P;
  (void)head_groups_of(o.method, o, local);  // a bad --head-groups is a usage error on every rank
}

// The host memory the inputs of the whole sequence, the single-device reference and its result take on every rank,
// against what this node has available for all of its ranks: refused before any of it is allocated.
void check_host_memory(const Bootstrap& boot, const GlaShape& s, const OperatorOptions& o) {
  const double elems = double(s.B) * s.T * s.H * (3.0 * s.dk + 2.0 * s.dv);  // q, k, g, v, do (and their gradients)
  const double need = elems * 4 * (o.check ? 3 : 1) / double(1ull << 30);
  agree_on_usage_errors(boot, [&] {
    const double avail = node_available_bytes() / double(1ull << 30);
    const int ranks = boot.local_size();
    char msg[512];
    std::snprintf(msg, sizeof msg,
                  "-B %d -T %d -H %d --dk %d --dv %d: the inputs of the whole sequence and their reference need about "
                  "%.1f GiB on each rank, %.1f GiB for the %d ranks of this node, which has %.1f GiB available; use a "
                  "smaller shape",
                  s.B, s.T, s.H, s.dk, s.dv, need, need * ranks, ranks, avail);
    SPB_USAGE(avail <= 0 || need * ranks < 0.9 * avail, msg);
  });
}

// What run_operator measures: the options (backend resolved) and what follows from them.
struct OperatorPlan {
  OperatorOptions o;
  GlaShape whole, local;  // the whole sequence's shape, a rank's
  SpConfig cfg;
  std::vector<std::string> methods, left_out;  // left_out: by `all`, the methods that cannot run this configuration
  bool simulated = false;  // --backend sim: no inputs, no data; times alone, nothing to check
};

// The options, validated the same way on every rank (or agreed on), and what follows from them; every file rank 0
// will write checked, and the host memory the inputs and references take. Nothing is allocated yet.
OperatorPlan validated_plan(const Bootstrap& boot, const OperatorOptions& opt) {
  const int P = boot.size();
  OperatorPlan plan{opt};
  OperatorOptions& o = plan.o;
  o.backend = resolve_backend(o.backend);
  GlaShape& whole = plan.whole;
  if (!o.inputs.empty()) agree_on_usage_errors(boot, [&] { whole = npy_problem_shape(o.inputs); });
  else whole = whole_shape(o, P);
  require_distinct_methods(o.method);
  for (const std::string& m : split_method_list(o.method)) {
    OperatorOptions one = o;
    one.method = m;
    validate(whole, one, P);
  }
  plan.local = whole;
  plan.local.T = whole.T / P;
  plan.cfg = SpConfig{plan.local, o.blocks, o.allscan, SpOverlap(o.overlap), o.head_groups};
  plan.cfg.attention = parse_attention(o.attention);
  SPB_USAGE(plan.cfg.attention == Attention::gla || o.outputs.empty(),
            "--outputs: GLA's tensors only so far (Gated DeltaNet's gates are [B, T, H])");
  plan.methods = methods_to_run(o.method, plan.cfg, P, &plan.left_out);
  SPB_USAGE(o.outputs.empty() || plan.methods.size() == 1, "--outputs: give a single --method");
  plan.simulated = o.backend == "sim";
  SPB_USAGE(!plan.simulated || (o.outputs.empty() && o.inputs.empty() && o.timeline.empty() && o.stage_times.empty()),
            "--backend sim: no --inputs, --outputs, --timeline or --stage-times (the simulation moves no data)");
  SPB_USAGE(o.stage_times.empty() || o.csv.empty(),
            "--stage-times: give no --csv (the events around every stage call change the times its rows would hold)");
  check_outputs(boot, {{"--csv", o.csv}, {"--timeline", o.timeline}, {"--stage-times", o.stage_times},
                       {"--outputs", o.outputs, true}});
  if (plan.simulated) o.check = 0;
  if (!plan.simulated) check_host_memory(boot, whole, o);
  return plan;
}

// --- run: the backend, the inputs on the device, the rows, the timed iterations --------------------------------------

// What measuring every method reads: the plan, the backend, the inputs, and what follows from them once.
struct OperatorRun {
  Bootstrap& boot;
  const OperatorPlan& plan;
  Backend& be;
  double tol = 0;   // the largest relative RMS error that passes
  std::string key;  // the rows' config_key
  HostTensors in, mine;  // the whole sequence's inputs (every rank's), this rank's slice of them
  std::unique_ptr<DeviceTensors> d;
  SpForwardArgs fa;
  SpBackwardArgs ba;
  // The references, each computed once for every method that needs it (reference()).
  std::unique_ptr<HostResult> ref_whole, ref_own;

  Runtime& rt() const { return *be.rt; }
  // The single-device run this rank's outputs are checked against: of its own tokens alone (a method whose ranks
  // run independent sequences) or its slice of the whole sequence's.
  const HostResult& reference(bool independent);
};

const HostResult& OperatorRun::reference(bool independent) {
  const GlaShape &whole = plan.whole, &local = plan.local;
  const int p = boot.rank();
  auto& r = independent ? ref_own : ref_whole;
  if (!r)
    r = std::make_unique<HostResult>(
        independent ? single_device(rt(), local, mine)
                    : slice_result(single_device(rt(), whole, in), whole, p * local.T, (p + 1) * local.T));
  return *r;
}

// What else sets what is computed or how it is timed: the rows' config_key.
std::string operator_config_key(const OperatorOptions& o, double tol) {
  char tol_str[32];
  std::snprintf(tol_str, sizeof tol_str, "%.9g", tol);
  std::vector<std::pair<std::string, std::string>> flags = {{"seed", std::to_string(o.seed)},
                     {"gates", o.gates},
                     {"h0", std::to_string(o.h0)},
                     {"dht", std::to_string(o.dht)},
                     {"inputs", o.inputs},
                     {"check", std::to_string(o.check)},
                     {"tolerance", tol_str},
                     {"warmup", std::to_string(o.warmup)},
                     {"iters", std::to_string(o.iters)},
                     {"allscan", o.allscan}};
  if (o.attention != "gla") flags.push_back({"attention", o.attention});  // (GLA's keys as before the flag)
  return config_key(flags);
}

// A row of `method` at `pass` without its measurement. `backend`: cpu, or what carried the communication on GPUs:
// the communicator (nccl) or zeco's device All-Scan; on either, zeco's node-aware All-Scan (host-hier,
// host-logdepth) when it ran. Before a method exists (the rerun check, ran: nullptr) it is what the options ask for;
// a row written after the run says what ran.
ResultRow operator_row(const OperatorRun& run, const std::string& method, const char* pass,
                       const SpMethod* ran = nullptr) {
  const OperatorOptions& o = run.plan.o;
  const GlaShape &whole = run.plan.whole, &local = run.plan.local;
  const Runtime& rt = run.rt();
  const SimRows& sim = run.be.sim;
  const bool uses_scan = method == "zeco";
  const std::string plain = !rt.dev->is_gpu() ? "cpu" : rt.comm->name();  // the communicator itself carried it
  const std::string& scan = run.be.scan;
  std::string backend = uses_scan && (is_device_allscan(scan) || is_node_aware_allscan(scan)) ? scan : plain;
  if (ran) backend = ran->comm_backend().empty() ? plain : ran->comm_backend();
  if (sim.on) backend = sim.backend(uses_scan);
  ResultRow r;
  r.set("level", std::string("operator")).set("method", method).set("attention", o.attention);
  r.set("backend", backend);
  r.set("world_size", run.boot.size()).set("batch", whole.B).set("heads", whole.H).set("dk", whole.dk);
  r.set("dv", whole.dv).set("tokens_per_rank", local.T).set("chunk", kChunk);
  r.set("dtype", std::string(dtype_name(rt.kern->act_dtype())));
  r.set("blocks", uses_scan ? o.blocks : 0);
  r.set("overlap", method == "zeco" || method == "lasp2" ? o.overlap : 0);
  r.set("head_groups", ran ? ran->head_groups() : head_groups_of(method, o, local));
  r.set("block_elems", uses_scan ? (long long)(local.state_rows() / o.blocks * local.dv) : 0LL);
  r.set("pass", std::string(pass)).set("comm", rt.comm->name()).set("warmup", o.warmup).set("iters", o.iters);
  r.set("nodes", rt.topo.nodes).set("ranks_per_node", rt.topo.ranks_per_node);
  r.set("config_key", run.key);
  add_provenance(r, *rt.dev);
  if (sim.on) sim.mark(r);
  return r;
}

// Inputs of the whole sequence on every rank (each rank checks its slice against the whole-sequence reference),
// this rank's slice uploaded, and the method's arguments over them.
void prepare_inputs(OperatorRun& run) {
  const OperatorPlan& plan = run.plan;
  const OperatorOptions& o = plan.o;
  const int p = run.boot.rank();
  if (!plan.simulated) {
    agree_on_usage_errors(run.boot, [&] {
      const Attention a = plan.cfg.attention;
      run.in = o.inputs.empty() ? generate_inputs(plan.whole, o.seed,
                                                  o.gates == "strong" ? GateKind::strong : GateKind::model, o.h0, o.dht,
                                                  a)
                                : read_inputs(o.inputs, plan.whole, o.seed, a);
    });
    run.mine = local_slice(run.in, plan.whole, p * plan.local.T, (p + 1) * plan.local.T);
  }
  Device& dev = *run.rt().dev;
  const DType act = run.rt().kern->act_dtype();
  run.d = std::make_unique<DeviceTensors>(dev, plan.local, act, plan.cfg.attention);
  if (!plan.simulated) upload_inputs(dev, act, *run.d, run.mine);
  run.fa = forward_args(*run.d, run.mine);
  run.ba = backward_args(*run.d, run.mine);
}

// Rank 0's header: every parameter of the run, then the table's column names.
void print_operator_header(const OperatorRun& run) {
  const OperatorOptions& o = run.plan.o;
  const GlaShape &whole = run.plan.whole, &local = run.plan.local;
  const Runtime& rt = run.rt();
  std::printf("# spbench operator  backend %s (%s, allscan %s)  ranks %d (%s)  device %s\n", o.backend.c_str(),
              rt.comm->name().c_str(), o.allscan.c_str(), run.boot.size(), rt.topo.describe().c_str(),
              rt.dev->name().c_str());
  std::printf("# attention %s  B %d  T %d (%d per rank)  H %d  dk %d  dv %d  chunk %d  K %d  dtype %s\n",
              o.attention.c_str(), whole.B, whole.T, local.T, whole.H, whole.dk, whole.dv, kChunk, o.blocks,
              dtype_name(rt.kern->act_dtype()));
  std::printf("# warm-up %d  iterations %d  seed %llu  gates %s  h0 %s  dht %s  inputs %s  tolerance %.0e\n", o.warmup,
              o.iters, (unsigned long long)o.seed, o.gates.c_str(), run.in.h0.empty() ? "no" : "yes",
              run.in.dht.empty() ? "no" : "yes", o.inputs.empty() ? "random" : o.inputs.c_str(), run.tol);
  for (const std::string& m : run.plan.left_out) std::printf("# left out of all: %s\n", m.c_str());
  std::printf("#\n# %8s %5s %11s %8s %10s %10s %10s %10s %6s %9s %6s\n", "method", "ranks", "tokens/rank", "pass",
              "mean_ms", "median_ms", "min_ms", "max_ms", "cv", "error", "check");
  std::fflush(stdout);
}

// The timed iterations of one method: per iteration the max over ranks of the forward's and the forward+backward's
// time, and the mean over ranks of the latter.
struct IterationTimes {
  std::vector<double> fwd_max, all_max, all_mean;
};

// -w untimed and -n timed iterations of `method` (--stage-times: the timed ones recorded, their rows appended).
IterationTimes time_method(OperatorRun& run, const std::string& name, SpMethod& method, EventHandle& e0,
                           EventHandle& e1, EventHandle& e2) {
  const OperatorOptions& o = run.plan.o;
  Bootstrap& boot = run.boot;
  Device& dev = *run.rt().dev;
  const Stream st = dev.compute_stream();
  for (int i = 0; i < o.warmup; ++i) {
    method.forward(run.fa);
    method.backward(run.fa, run.ba);
  }
  dev.synchronize();
  IterationTimes t;
  if (run.be.stages) run.be.stages->set_recording(true);
  for (int i = 0; i < o.iters; ++i) {
    boot.barrier();
    dev.record(e0.get(), st);
    method.forward(run.fa);
    dev.record(e1.get(), st);
    method.backward(run.fa, run.ba);
    dev.record(e2.get(), st);
    dev.synchronize();
    const double f = dev.elapsed_ms(e0.get(), e1.get()), a = dev.elapsed_ms(e0.get(), e2.get());
    t.fwd_max.push_back(boot.max(f));
    t.all_max.push_back(boot.max(a));
    t.all_mean.push_back(boot.sum(a) / boot.size());
  }
  method.finish();
  if (run.be.stages) {
    run.be.stages->set_recording(false);
    run.be.stages->append_rows(boot, o.iters, operator_row(run, name, "fwd_bwd", &method));
  }
  return t;
}

// --- check: the method's outputs against the single-device run -------------------------------------------------------

struct MethodCheck {
  Errors err;
  bool ok = true;  // within the tolerance, or not checked; a wrong result is not written to the CSV
};

MethodCheck check_method(OperatorRun& run, const SpMethod& method) {
  MethodCheck c;
  if (!run.plan.o.check) return c;
  const bool indep = method.independent_sequences();
  const Runtime& rt = run.rt();
  c.err = compare(run.boot, run.reference(indep),
                  download_result(*rt.dev, rt.kern->act_dtype(), run.plan.local, *run.d), indep);
  c.ok = c.err.all() <= run.tol;
  return c;
}

// --- write: the table's lines, the CSV rows, the timeline and the .npy outputs ---------------------------------------

// `iters` more iterations with every span recorded (record_timeline); rank 0 appends every rank's spans to `path`.
void write_timeline(Runtime& rt, SpMethod& m, const SpForwardArgs& fa, const SpBackwardArgs& ba, const std::string& path,
                    const std::string& prefix, int iters) {
  record_timeline(rt, iters, prefix, path, [&](int) {
    {
      TimelineSpan whole(rt, "forward", Lane::compute);
      m.forward(fa);
    }
    TimelineSpan whole(rt, "backward", Lane::compute);
    m.backward(fa, ba);
  });
}

// Gathers each rank's tokens into the whole sequence on rank 0 and writes the .npy files there. Collective: a file
// rank 0 cannot write is the same UsageError on every rank, after every gather.
void write_outputs(const Bootstrap& boot, const std::string& dir, const GlaShape& whole, const GlaShape& local,
                   const HostResult& r, const HostTensors& in) {
  std::string failed;  // rank 0's first write error; the gathers go on so that no rank waits in one
  auto write_npy = [&](const std::string& path, const std::vector<size_t>& shape, const float* data) {
    if (!failed.empty()) return;
    try {
      spb::write_npy(path, shape, data);
    } catch (const UsageError& e) {
      failed = std::string("--outputs ") + e.what();
    }
  };
  auto tokens = [&](const std::vector<float>& x, int D, const char* name) {
    std::vector<char> all = boot.gather(x.data(), x.size() * 4);
    if (boot.rank() != 0 || !failed.empty()) return;
    const float* parts = reinterpret_cast<const float*>(all.data());
    const size_t row = size_t(whole.H) * D, per_b = size_t(local.T) * row;
    std::vector<float> out(x.size() * boot.size());
    for (int p = 0; p < boot.size(); ++p)
      for (int b = 0; b < whole.B; ++b)
        std::copy(parts + (size_t(p) * whole.B + b) * per_b, parts + (size_t(p) * whole.B + b + 1) * per_b,
                  out.begin() + (size_t(b) * whole.T + size_t(p) * local.T) * row);
    write_npy(dir + "/" + name, {size_t(whole.B), size_t(whole.T), size_t(whole.H), size_t(D)}, out.data());
  };
  tokens(r.o, whole.dv, "o.npy");
  tokens(r.dq, whole.dk, "dq.npy");
  tokens(r.dk, whole.dk, "dk.npy");
  tokens(r.dv, whole.dv, "dv.npy");
  tokens(r.dg, whole.dk, "dg.npy");
  if (in.do_generated) tokens(in.d_o, whole.dv, "do.npy");  // so the gradients can be reproduced elsewhere
  std::vector<char> hts = boot.gather(r.ht.data(), r.ht.size() * 4);
  if (boot.rank() == 0) {
    const std::vector<size_t> st = {size_t(whole.B), size_t(whole.H), size_t(whole.dk), size_t(whole.dv)};
    write_npy(dir + "/ht.npy", st, reinterpret_cast<const float*>(hts.data()) + (boot.size() - 1) * r.ht.size());
    write_npy(dir + "/dh0.npy", st, r.dh0.data());
  }
  agree_on_usage_errors(boot, [&] { SPB_USAGE(failed.empty(), failed); });
}

// Rank 0's lines for both passes (fwd, fwd_bwd) and, where the result is right, their rows, appended by rank 0 (the
// only rank with `csv`) after every rank has come here: a row rank 0 cannot write stops them all.
void write_method_rows(const OperatorRun& run, CsvAppender* csv, const std::string& name, const SpMethod& method,
                       const IterationTimes& t, const MethodCheck& c) {
  const OperatorOptions& o = run.plan.o;
  const int P = run.boot.size(), p = run.boot.rank();
  const char* passes[2] = {"fwd", "fwd_bwd"};
  std::vector<ResultRow> rows;
  const std::vector<double>* times[2] = {&t.fwd_max, &t.all_max};
  for (int i = 0; i < 2; ++i) {
    const Summary s = summarize(*times[i]);
    const double e = i == 0 ? c.err.fwd() : c.err.all();
    if (p == 0)
      std::printf("  %8s %5d %11d %8s %10.4f %10.4f %10.4f %10.4f %6.3f %9.2e %6s\n", name.c_str(), P,
                  run.plan.local.T, passes[i], s.mean, s.median, s.min, s.max, s.cv, e,
                  !o.check ? "-" : c.ok ? "OK" : "WRONG");
    if (csv && c.ok) {
      ResultRow r = operator_row(run, name, passes[i], &method);
      r.set("time_ms_mean", s.mean).set("time_ms_median", s.median).set("time_ms_min", s.min);
      r.set("time_ms_max", s.max).set("time_ms_cv", s.cv);
      if (i == 1) r.set("time_ms_mean_over_ranks", summarize(t.all_mean).mean);
      if (o.check) r.set("err_rel_rms", e);
      rows.push_back(r);
    }
  }
  if (!o.csv.empty())
    agree_on_usage_errors(run.boot, [&] {
      for (const ResultRow& r : rows) csv->append(r);
    });
  if (p == 0) {
    const Errors& err = c.err;
    if (o.check) {
      char dbeta[32] = "";  // Gated DeltaNet's betas
      if (run.plan.cfg.attention == Attention::gdn) std::snprintf(dbeta, sizeof dbeta, "  dbeta %.2e", err.dbeta);
      std::printf("# %s errors vs the single-device run (relative RMS, max over ranks): o %.2e  ht %.2e  dq %.2e  "
                  "dk %.2e  dv %.2e  dg %.2e%s  dh0 %.2e\n",
                  name.c_str(), err.o, err.ht, err.dq, err.dk, err.dv, err.dg, dbeta, err.dh0);
    }
    std::fflush(stdout);
  }
}

}  // namespace

int run_operator(Bootstrap& boot, const OperatorOptions& opt) {
  const int p = boot.rank();
  OperatorPlan plan = validated_plan(boot, opt);
  OperatorOptions& o = plan.o;
  // Gated DeltaNet's zeco runs the host chain alone (zeco/method_zeco.cpp), so `auto` means it here already: the
  // backend then resolves the scan that runs (the rows' backend column, and under the simulation NCCL's sends, not
  // the device All-Scan's writes or a rail scan, which refuses a dense map).
  if (plan.cfg.attention == Attention::gdn && o.allscan == "auto") o.allscan = "host";
  Backend be = make_backend(boot, {o.backend, o.allscan, o.ranks_per_node, o.nodes_over_network, o.sim,
                                   /*model_kernels=*/false, o.stage_times});
  o.allscan = plan.cfg.allscan = be.allscan;  // the simulation runs a device protocol as the chain
  OperatorRun run{boot, plan, be};
  run.tol = o.tolerance > 0 ? o.tolerance : be.rt->dev->is_gpu() ? 5e-3 : 1e-5;
  run.key = operator_config_key(o, run.tol);

  // A rerun skips the methods whose rows the CSV already holds.
  std::unique_ptr<CsvAppender> csv;
  std::vector<std::string> todo = plan.methods;
  if (!o.csv.empty()) {
    todo = methods_to_measure(
        boot, o.csv, be.sim.columns({"head_groups", "nodes", "ranks_per_node", "attention"}), o.resume, plan.methods,
        [&](const CsvAppender& c, const std::string& m) {
          return c.contains(operator_row(run, m, "fwd")) && c.contains(operator_row(run, m, "fwd_bwd"));
        },
        "P=" + std::to_string(boot.size()) + " T/P=" + std::to_string(plan.local.T), csv);
    if (todo.empty()) return 0;
  }
  prepare_inputs(run);
  if (p == 0) print_operator_header(run);

  int wrong = 0;
  Device& dev = *be.rt->dev;
  EventHandle e0(dev), e1(dev), e2(dev);
  for (const std::string& name : todo) {
    watchdog_set_context("operator, " + name + ", " + std::to_string(plan.local.T) + " tokens per rank");
    std::unique_ptr<SpMethod> method;
    be.select_transport(name == "zeco");
    agree_on_usage_errors(boot, [&] { method = require_method(name).make(*be.rt, plan.cfg); });
    if (p == 0 && !method->notice().empty()) std::printf("# %s\n", method->notice().c_str());
    poison_outputs(dev, *run.d);  // so the check also proves every element was written
    const IterationTimes t = time_method(run, name, *method, e0, e1, e2);
    const MethodCheck c = check_method(run, *method);
    wrong += !c.ok;
    if (!o.timeline.empty() && c.ok)
      write_timeline(*be.rt, *method, run.fa, run.ba, o.timeline,
                     timeline_prefix(operator_row(run, name, "fwd_bwd", method.get())), o.timeline_iters);
    if (!o.outputs.empty())
      write_outputs(boot, o.outputs, plan.whole, plan.local,
                    download_result(dev, be.rt->kern->act_dtype(), plan.local, *run.d), run.in);
    write_method_rows(run, csv.get(), name, *method, t, c);
  }
  if (p == 0) {
    std::printf("# wrong results: %d%s\n", wrong, wrong ? "  (a wrong result is not written to the CSV)" : "");
    std::fflush(stdout);
  }
  return wrong ? 1 : 0;
}

}  // namespace spb
