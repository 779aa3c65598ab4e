// spbench collective: the driver of the collective level (DESIGN §5, §10): for each pattern, size and block size, -w
// untimed and -n timed calls on the communication stream (--timing latency: each call alone after a barrier, or
// back-to-back; time = max over ranks of the CUDA-event / wall time), a check of what every rank received, a
// fixed-width table and CSV rows with algbw and busbw.
#include "harness/collective_level.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "harness/runtime_options.h"
#include "sp/collective.h"
#include "sp/method.h"
#include "runtime/collective_errors.h"
#include "runtime/csv.h"
#include "runtime/error.h"
#include "runtime/watchdog.h"
#include "runtime/provenance.h"
#include "sp/runtime.h"
#include "runtime/stats.h"
#ifdef SPB_HAVE_CUDA
#include "zeco/all_scan_device.h"
#endif

namespace spb {

void add_collective_command(CLI::App& app, CollectiveOptions& o) {
  app.add_option("--pattern,-p", o.patterns, "patterns to run (default: all; spbench patterns lists them)")
      ->delimiter(',');
  add_runtime_options(app, o.backend, o.allscan, o.ranks_per_node, o.nodes_over_network);
  add_sim_options(app, o.sim);
  app.add_option("-b,--minbytes", o.min_bytes, "smallest per-rank state (bytes; K/M/G suffixes)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-e,--maxbytes", o.max_bytes, "largest per-rank state (bytes; K/M/G suffixes)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-f,--stepfactor", o.factor, "multiply the size by this between steps")->check(CLI::Range(2, 1024));
  app.add_option("--dv", o.dv, "elements of a state row (All-Scan blocks are whole rows)")->check(at_least(1));
  app.add_option("--attention", o.attention,
                 "gla (default): a decay a state row; gdn: Gated DeltaNet's dense dk x dk transition a head (allscan "
                 "folds with it in blocks of whole columns, allgather gathers it with the state)")
      ->check(CLI::IsMember({"gla", "gdn"}));
  app.add_option("--dk", o.dk, "with --attention gdn: the state rows of a head (default: --dv)")->check(at_least(1));
  app.add_option("--block-elems", o.block_elems, "All-Scan block size(s) in elements (0: the whole state)")
      ->delimiter(',');
  app.add_option("--warmup,-w", o.warmup, "untimed calls")->check(at_least(0));
  app.add_option("--iters,-n", o.iters, "timed calls")->check(at_least(1));
  app.add_option("--check,-c", o.check, "check what every rank received (1) or not (0)")->check(CLI::Range(0, 1));
  app.add_option("--csv", o.csv, "append result rows to this CSV");
  app.add_flag("!--no-resume", o.resume, "rerun configurations already in the CSV");
  app.add_option("--timing", o.timing,
                 "latency (default; the paper's Table 2): before every call a barrier of the hosts, then one on the "
                 "communication stream, then the call alone, timed by each rank; the max over ranks, averaged over "
                 "-n. back-to-back: the calls enqueued one after another, an event after each (nccl-tests' way; a "
                 "chain's calls pipeline into each other, so this is a throughput)")
      ->check(CLI::IsMember({"latency", "back-to-back"}));
  app.add_flag("--barrier-each", o.barrier_each, "the older name of --timing latency");
  app.add_option("--calls-per-event", o.calls_per_event,
                 "with --timing back-to-back: record an event after every G calls and time each call as the group's "
                 "time / G (nccl-tests times a whole loop; 1: an event after every call)")
      ->check(at_least(1));
  app.add_flag("--probe", o.probe, "also measure the one-hop flag latency and the NVLink pair bandwidth (GPU)");
}

std::string timing_column(const CollectiveOptions& o) {
  if (o.timing == "latency") return "latency";
  return o.calls_per_event == 1 ? "back_to_back" : "back_to_back_per" + std::to_string(o.calls_per_event);
}

namespace {

// Per-call samples in microseconds: the max over ranks (a row's time) and the mean over ranks.
struct CallTimes {
  std::vector<double> max_us, mean_us;
};

// Latency (DESIGN §10): each call alone. The hosts meet at a barrier, then the streams at the communicator's barrier
// on the communication stream (NCCL: an all-reduce of one int; MPI and the simulation: MPI_Barrier), because after
// the host barrier alone each GPU's stream starts when its own launch lands. Every rank's start event follows that
// barrier on its stream, so each rank times the call from a common start, its own wait for late peers included.
// Back-to-back (nccl-tests' way): the calls are enqueued one after another and call i lasts from the event after
// call i-1 to the event after call i, so launch skew between ranks is paid once, not per call, and a chain's calls
// overlap each other: a throughput.
CallTimes time_calls(Bootstrap& boot, Runtime& rt, CollectivePattern& pat, int iters, bool latency, int per_event) {
  Device& dev = *rt.dev;
  const Stream cs = dev.comm_stream();
  const double P = boot.size();
  // Back to back, an event after every per_event calls: a group's time over its calls is one sample (per call).
  const int groups = latency ? 1 : iters / per_event;
  std::vector<std::unique_ptr<EventHandle>> ev;
  for (int i = 0; i <= groups; ++i) ev.push_back(std::make_unique<EventHandle>(dev));
  CallTimes t;
  auto sample = [&](double us) {
    t.max_us.push_back(boot.max(us));
    t.mean_us.push_back(boot.sum(us) / P);
  };
  if (latency) {
    for (int i = 0; i < iters; ++i) {
      boot.barrier();
      rt.comm->barrier(cs);
      dev.record(ev[0]->get(), cs);
      pat.run(cs);
      dev.record(ev[1]->get(), cs);
      dev.synchronize();
      sample(dev.elapsed_ms(ev[0]->get(), ev[1]->get()) * 1e3);
    }
    return t;
  }
  boot.barrier();
  dev.record(ev[0]->get(), cs);
  for (int i = 0; i < groups; ++i) {
    for (int j = 0; j < per_event; ++j) pat.run(cs);
    dev.record(ev[size_t(i) + 1]->get(), cs);
  }
  dev.synchronize();
  for (int i = 0; i < groups; ++i)
    sample(dev.elapsed_ms(ev[size_t(i)]->get(), ev[size_t(i) + 1]->get()) * 1e3 / per_event);
  return t;
}

}  // namespace

// The two numbers that bound All-Scan from below: one hop's flag latency and one pair's bandwidth (ranks 0 and 1).
void probe_links(Bootstrap& boot, Runtime& rt, CsvAppender* csv) {
#ifdef SPB_HAVE_CUDA
  SPB_USAGE(rt.dev->is_gpu() && boot.size() >= 2, "--probe: needs --backend gpu and at least 2 ranks");
  const double lat_us = probe_flag_latency_us(rt, 0, 1);
  const size_t bytes = size_t(256) << 20;
  const double gbs = probe_pair_bandwidth_gbs(rt, 0, 1, bytes);
  if (boot.rank() != 0) return;
  std::printf("# probe: one-hop flag latency %.3f us (half a ping-pong), pair bandwidth 0->1 %.1f GB/s (%zu MiB)\n",
              lat_us, gbs, bytes >> 20);
  if (!csv) return;
  for (int which = 0; which < 2; ++which) {
    ResultRow r;
    r.set("level", std::string("collective")).set("method", std::string(which ? "pair_bandwidth" : "hop_latency"));
    r.set("backend", std::string("device")).set("world_size", 2).set("batch", 0).set("heads", 0).set("dk", 0);
    r.set("dv", 0).set("tokens_per_rank", 0).set("block_elems", 0).set("dtype", std::string("fp32"));
    r.set("pass", std::string("probe")).set("comm", rt.comm->name()).set("chunk", 0).set("blocks", 0);
    r.set("bytes", (long long)(which ? bytes : 8)).set("timing", std::string("probe"));
    r.set("nodes", rt.topo.nodes).set("ranks_per_node", rt.topo.ranks_per_node);
    const double ms = which ? double(bytes) / (gbs * 1e9) * 1e3 : lat_us / 1e3;
    r.set("time_ms_mean", ms).set("time_ms_median", ms).set("time_ms_min", ms).set("time_ms_max", ms);
    if (which) r.set("algbw_GBps", gbs).set("busbw_GBps", gbs);
    add_provenance(r, *rt.dev);
    csv->append(r);
  }
#else
  (void)boot, (void)csv;
  throw UsageError("--probe: needs --backend gpu, and this spbench was built without CUDA (" + rt.backend + ")");
#endif
}

int run_collective(Bootstrap& boot, const CollectiveOptions& opt) {
  CollectiveOptions o = opt;
  const int P = boot.size(), p = boot.rank();
  const bool dense = parse_attention(o.attention) == Attention::gdn;
  // The patterns the dense map changes; the others move the same bytes for either family.
  const std::vector<std::string> dense_patterns = {"allscan", "chain", "allgather"};
  if (o.patterns.empty()) o.patterns = dense ? dense_patterns : pattern_names();
  for (auto& name : o.patterns) {
    require_pattern(name);
    SPB_USAGE(!dense || std::find(dense_patterns.begin(), dense_patterns.end(), name) != dense_patterns.end(),
              "--pattern " + name + " --attention gdn: the pattern moves the same data for either family; run it "
              "with --attention gla (gdn changes allscan, chain and allgather)");
  }
  SPB_USAGE(o.dk == 0 || dense, "--dk: the state rows of a head matter to --attention gdn alone");
  const size_t dk = size_t(o.dk ? o.dk : o.dv);
  const RankMapType map = dense ? RankMapType::dense(dk) : RankMapType::diagonal_decay();
  const size_t row_bytes = size_t(o.dv) * 4;
  SPB_USAGE(o.min_bytes >= row_bytes && o.min_bytes <= o.max_bytes,
            "-b/-e: need " + std::to_string(row_bytes) + " <= minbytes <= maxbytes (one state row of --dv " +
                std::to_string(o.dv) + " fp32 at least)");
  for (long long b : o.block_elems) SPB_USAGE(b >= 0, "--block-elems must be >= 0 (0: the whole state)");
  SPB_USAGE(!o.barrier_each || o.timing == "latency",
            "--barrier-each: is --timing latency (its older name), and cannot go with --timing " + o.timing);
  SPB_USAGE(o.calls_per_event == 1 || o.timing == "back-to-back",
            "--calls-per-event " + std::to_string(o.calls_per_event) +
                ": groups back-to-back calls; give --timing back-to-back (--timing latency times every call alone)");
  SPB_USAGE(o.iters % o.calls_per_event == 0, "--calls-per-event " + std::to_string(o.calls_per_event) +
                                                  ": must divide --iters (" + std::to_string(o.iters) + ")");
  std::vector<size_t> sizes;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= size_t(o.factor)) {
    SPB_USAGE(bytes % row_bytes == 0, "-b/-e: " + std::to_string(bytes) +
                                          " bytes is not a whole number of state rows (--dv " + std::to_string(o.dv) +
                                          " fp32 = " + std::to_string(row_bytes) + " bytes)");
    SPB_USAGE(!dense || bytes % (row_bytes * dk) == 0,
              "-b/-e --attention gdn: " + std::to_string(bytes) + " bytes is not a whole number of heads of --dk " +
                  std::to_string(dk) + " x --dv " + std::to_string(o.dv) + " fp32");
    sizes.push_back(bytes);
    if (bytes > o.max_bytes / size_t(o.factor)) break;
  }

  o.backend = resolve_backend(o.backend);
  const Backend be = make_backend(boot, {o.backend, o.allscan, o.ranks_per_node, o.nodes_over_network, o.sim});
  const std::unique_ptr<Runtime>& rt = be.rt;
  const SimRows& sim = be.sim;
  o.allscan = be.scan;
  // The simulation moves no data: there is nothing to check.
  if (sim.on) o.check = 0;
  Device& dev = *rt->dev;
  const Stream cs = dev.comm_stream();

  std::unique_ptr<CsvAppender> csv;
  if (!o.csv.empty())
    agree_on_usage_errors(boot, [&] {
      if (p == 0)
        csv = std::make_unique<CsvAppender>(
            o.csv, sim.columns({"bytes", "algbw_GBps", "busbw_GBps", "timing", "nodes", "ranks_per_node", "attention"}));
    });
  if (p == 0) {
    std::printf("# spbench collective  backend %s (%s)  allscan %s  ranks %d (%s)  device %s\n", o.backend.c_str(),
                rt->comm->name().c_str(), o.allscan.c_str(), P, rt->topo.describe().c_str(), dev.name().c_str());
    std::printf("# bytes %zu..%zu x%d  row %d fp32  attention %s (%s rank map%s)  warm-up %d  iterations %d  check %d  "
                "timing %s\n",
                o.min_bytes, o.max_bytes, o.factor, o.dv, o.attention.c_str(), map.name(),
                dense ? (", dk " + std::to_string(dk)).c_str() : "", o.warmup, o.iters, o.check,
                timing_column(o).c_str());
    std::printf("#\n# %9s %7s %5s %10s %7s %10s %10s %10s %10s %6s %8s %8s %9s %5s\n", "pattern", "backend", "ranks",
                "bytes", "block", "mean_us", "median_us", "min_us", "max_us", "cv", "algbw", "busbw", "error", "ok");
    std::printf("# %9s %7s %5s %10s %7s %10s %10s %10s %10s %6s %8s %8s %9s %5s\n", "", "", "", "", "elems", "", "", "",
                "", "", "GB/s", "GB/s", "", "");
    std::fflush(stdout);
  }

  int wrong = 0;
  for (const std::string& name : o.patterns) {
    const bool blocked = name == "allscan";  // the only pattern whose block size is swept
    for (size_t bytes : sizes) {
      std::vector<long long> done;  // block sizes that resolve to the same one run once
      for (long long asked : blocked ? o.block_elems : std::vector<long long>{0}) {
        const long long block = asked == 0 || asked >= (long long)(bytes / 4) ? 0 : asked;  // 0: the whole state
        if (std::find(done.begin(), done.end(), block) != done.end()) continue;
        done.push_back(block);
        watchdog_set_context("collective, " + name + ", " + std::to_string(bytes) + " bytes, block " +
                             std::to_string(block));
        CollectiveConfig c{bytes / 4, size_t(o.dv), size_t(block), o.allscan, map};
        std::unique_ptr<CollectivePattern> pat;
        be.select_transport(blocked);  // the chain pattern stays NCCL's
        agree_on_usage_errors(boot, [&] { pat = require_pattern(name).make(*rt, c); });
        const std::string backend = sim.on                  ? sim.backend(name == "allscan")
                                    : !pat->backend().empty() ? pat->backend()
                                    : !dev.is_gpu()           ? "cpu"
                                                              : rt->comm->name();
        const size_t elems = bytes / 4, dv = size_t(o.dv);
        ResultRow r;
        r.set("level", std::string("collective")).set("method", name).set("backend", backend);
        r.set("attention", o.attention);
        r.set("world_size", P).set("batch", 1).set("dk", (long long)dk).set("dv", (long long)dv);
        r.set("heads", elems % (dk * dv) == 0 ? (long long)(elems / (dk * dv)) : 0LL).set("tokens_per_rank", 0);
        r.set("block_elems", blocked ? (long long)(block ? block : (long long)elems) : 0LL);
        r.set("blocks", blocked ? (long long)(elems / size_t(block ? block : elems)) : 0LL);
        r.set("dtype", std::string("fp32")).set("pass", std::string("comm")).set("comm", rt->comm->name());
        r.set("warmup", o.warmup).set("iters", o.iters).set("bytes", (long long)bytes).set("chunk", 0);
        r.set("nodes", rt->topo.nodes).set("ranks_per_node", rt->topo.ranks_per_node);
        r.set("timing", timing_column(o));
        std::vector<std::pair<std::string, std::string>> flags = {{"warmup", std::to_string(o.warmup)},
                                                                  {"iters", std::to_string(o.iters)},
                                                                  {"check", std::to_string(o.check)},
                                                                  {"allscan", o.allscan}};
        if (dense) flags.push_back({"attention", o.attention});  // (GLA's keys as before the flag)
        r.set("config_key", config_key(flags));
        add_provenance(r, dev);
        if (sim.on) sim.mark(r);
        int skip = 0;
        if (p == 0 && csv && o.resume) skip = csv->contains(r);
        boot.broadcast(&skip, sizeof skip, 0);
        if (skip) {
          if (p == 0) std::printf("# %s %zu bytes: already in %s, skipped\n", name.c_str(), bytes, o.csv.c_str());
          continue;
        }

        for (int i = 0; i < o.warmup; ++i) pat->run(cs);
        dev.synchronize();
        const CallTimes t = time_calls(boot, *rt, *pat, o.iters, o.timing == "latency", o.calls_per_event);
        const double err = o.check ? boot.max(pat->check()) : 0.0;
        // Data made of small integers and exact fp32 folds: only exp's rounding on a GPU can differ from the host.
        const bool ok = err <= 1e-5;
        wrong += !ok;
        const Summary s = summarize(t.max_us), over_ranks = summarize(t.mean_us);
        const double algbw = pat->algbw_bytes() / (s.mean * 1e-6) / 1e9, busbw = algbw * pat->busbw_factor();
        if (p == 0) {
          std::printf("  %9s %7s %5d %10zu %7lld %10.2f %10.2f %10.2f %10.2f %6.3f %8.2f %8.2f %9.2e %5s\n",
                      name.c_str(), backend.c_str(), P, bytes, blocked ? (block ? block : (long long)elems) : 0LL,
                      s.mean, s.median, s.min, s.max, s.cv, algbw, busbw, err, !o.check ? "-" : ok ? "OK" : "WRONG");
          std::fflush(stdout);
        }
        // Every rank, after every size: a row rank 0 cannot write stops them all here.
        if (!o.csv.empty() && ok) agree_on_usage_errors(boot, [&] {
          if (!csv) return;
          r.set("time_ms_mean", s.mean / 1e3).set("time_ms_median", s.median / 1e3).set("time_ms_min", s.min / 1e3);
          r.set("time_ms_max", s.max / 1e3).set("time_ms_cv", s.cv).set("algbw_GBps", algbw).set("busbw_GBps", busbw);
          r.set("time_ms_mean_over_ranks", over_ranks.mean / 1e3);
          if (o.check) r.set("err_rel_rms", err);
          csv->append(r);
        });
      }
    }
  }
  if (o.probe) probe_links(boot, *rt, csv.get());
  if (p == 0) std::printf("# wrong results: %d\n", wrong);
  return wrong ? 1 : 0;
}

}  // namespace spb
