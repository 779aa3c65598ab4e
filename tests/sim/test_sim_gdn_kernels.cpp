// Gated DeltaNet's stage table (sim/stage_table_gdn.h) and its replay (sim/sim_gdn_kernels.cpp): each GDN method's
// forward and backward on CPU ranks through the recorders (GdnKernels' and GlaKernels': zeco's column blocks are
// copy_4d), written as `spbench operator --attention gdn --stage-times` writes its rows; then the same method over
// the simulated kernels, both read from that table, makes the same calls (every stage, key and count this rank
// recorded) and each takes the table's time on the simulated device. The method code is the one the CPU ran: only
// the kernels are the simulation's. A key the table lacks is a UsageError naming the stage, the key and the file.
// dp, zeco (K = 1 and 2), lasp2, lasp1, ring and ulysses, at 1 and 2 ranks. A dense product or identity the table
// lacks (one GPU records none: only ring calls them, at P > 1) replays apply's or transpose's rows.
#include <cstdio>
#include <functional>
#include <map>

#include "../mpi_test_main.h"
#include "runtime/csv.h"
#include "runtime/error.h"
#include "sim/sim_runtime.h"
#include "sim/stage_table_gdn.h"
#include "sp/runtime.h"
#include "sp/sp_run.h"

namespace spb {
namespace {

constexpr int kTokensPerRank = 100;  // a partial chunk on every rank

GlaShape local_shape() {
  GlaShape s;
  s.B = 1, s.T = kTokensPerRank, s.H = 2, s.dk = 8, s.dv = 8;
  return s;
}

SpConfig config(int blocks) {
  SpConfig c{local_shape(), blocks, "host"};
  c.attention = Attention::gdn;
  return c;
}

using Calls = std::map<std::pair<std::string, std::string>, size_t>;  // (stage, shape): calls

Calls calls_of(const std::vector<StageSample>& samples) {
  Calls c;
  for (const StageSample& s : samples) c[{s.stage, s.shape}] += s.ms.size();
  return c;
}

// One forward and backward of `method` on `rt` over tensors of `act` (inputs drawn where `computes`), after one
// unrecorded: what `set_recording` turns on sees the second.
template <class SetRecording>
void run_method(Runtime& rt, const std::string& method, int blocks, DType act, bool computes, SetRecording&& rec) {
  const int p = rt.rank(), P = rt.world();
  GlaShape whole = local_shape();
  whole.T = kTokensPerRank * P;
  HostTensors mine;
  mine.attention = Attention::gdn;
  DeviceTensors d(*rt.dev, local_shape(), act, Attention::gdn);
  if (computes) {
    const HostTensors in = generate_inputs(whole, 17, GateKind::model, true, true, Attention::gdn);
    mine = local_slice(in, whole, p * kTokensPerRank, (p + 1) * kTokensPerRank);
    upload_inputs(*rt.dev, act, d, mine);
  } else {  // no data, but h0 and dht given as recorded (zeco copies them into its column blocks)
    mine.h0.resize(local_shape().state_elems()), mine.dht.resize(local_shape().state_elems());
  }
  auto m = find_method(method)->make(rt, config(blocks));
  const SpForwardArgs fa = forward_args(d, mine);
  const SpBackwardArgs ba = backward_args(d, mine);
  for (int i = 0; i < 2; ++i) {
    rec(i == 1);
    m->forward(fa);
    m->backward(fa, ba);
    rt.dev->synchronize();
  }
  rec(false);
  m->finish();
}

// Both recorders around a runtime's kernels; take() merges their samples.
struct Recorders {
  RecordingKernels* gla = nullptr;
  RecordingGdnKernels* gdn = nullptr;
  void wrap(Runtime& rt) {
    auto k = std::make_unique<RecordingKernels>(std::move(rt.kern), *rt.dev);
    gla = k.get();
    rt.kern = std::move(k);
    auto g = std::make_unique<RecordingGdnKernels>(std::move(rt.gdn), *rt.dev);
    gdn = g.get();
    rt.gdn = std::move(g);
  }
  void set_recording(bool on) { gla->set_recording(on), gdn->set_recording(on); }
  std::vector<StageSample> take() {
    std::vector<StageSample> all = gla->take(), more = gdn->take();
    all.insert(all.end(), more.begin(), more.end());
    return all;
  }
};

// `method` on CPU ranks, recorded and written by rank 0 to `path` as the operator level writes its stage rows.
// Returns this rank's samples.
std::vector<StageSample> record(const std::string& method, int blocks, const std::string& path) {
  Bootstrap& boot = *test::boot();
  auto rt = make_runtime(boot, "cpu");
  Recorders rec;
  rec.wrap(*rt);
  run_method(*rt, method, blocks, rt->kern->act_dtype(), /*computes=*/true, [&](bool on) { rec.set_recording(on); });
  std::vector<StageSample> mine = rec.take();
  {
    std::unique_ptr<CsvAppender> csv;
    if (boot.rank() == 0) {
      std::remove(path.c_str());
      csv = std::make_unique<CsvAppender>(path, stage_columns());
    }
    ResultRow base;
    base.set("level", std::string("operator")).set("method", method).set("attention", std::string("gdn"));
    base.set("world_size", boot.size());
    append_stage_rows(boot, mine, 1, base, csv.get());
  }
  boot.barrier();  // the file is whole before any rank reads it
  return mine;
}

// A runtime of simulated kernels over `table` on a device with a clock moved by hand; MPI carries the messages (they
// take no simulated time: SimComm is tested on its own).
std::unique_ptr<Runtime> sim_runtime(const StageTable& table, SimDevice** dev_out) {
  Bootstrap& boot = *test::boot();
  auto dev = std::make_unique<SimDevice>(make_manual_clock(), SimGpu{});
  SimDevice& d = *dev;
  *dev_out = &d;
  auto rt = std::unique_ptr<Runtime>(new Runtime{boot, "sim", std::move(dev), make_sim_kernels(d, table),
                                                 make_mpi_communicator(boot), nullptr, resolve_topology(boot)});
  rt->gdn = make_sim_gdn_kernels(d, table, DType::f32);
  return rt;
}

void replay(const std::string& method, int blocks) {
  Bootstrap& boot = *test::boot();
  const std::string what = method + " K=" + std::to_string(blocks) + " P=" + std::to_string(boot.size());
  const std::string path = "sim_gdn_kernels_" + method + std::to_string(blocks) + "_np" +
                           std::to_string(boot.size()) + ".csv";
  const std::vector<StageSample> recorded = record(method, blocks, path);
  const StageTable table(path);
  for (const auto& row : read_csv(path)) EXPECT_EQ(row.at("attention"), "gdn") << what;

  SimDevice* dev = nullptr;
  auto rt = sim_runtime(table, &dev);
  Recorders rec;  // around the simulated kernels: each call's events on the simulated device give its time
  rec.wrap(*rt);
  EXPECT_NO_THROW(run_method(*rt, method, blocks, DType::f32, /*computes=*/false,
                             [&](bool on) { rec.set_recording(on); }))
      << what;
  const std::vector<StageSample> replayed = rec.take();
  Calls want = calls_of(recorded), got = calls_of(replayed);
  if (method == "ulysses") {  // its activations' copies move bf16 in the simulation, fp32 on CPU ranks: count them
    auto copies = [](Calls& c) {
      size_t n = 0;
      for (auto it = c.begin(); it != c.end();)
        if (it->first.first == "copy_4d") n += it->second, it = c.erase(it);
        else ++it;
      return n;
    };
    EXPECT_EQ(copies(got), copies(want)) << what << ": copy_4d calls";
  }
  EXPECT_EQ(got, want) << what << ": the replay's calls are not those recorded";
  double total_s = 0;
  for (const StageSample& s : replayed)
    for (double ms : s.ms) {
      total_s += ms * 1e-3;
      if (method == "ulysses" && s.stage == "copy_4d") continue;  // a size the table lacks: scaled (sim.kernels)
      const double want = table.seconds(s.stage, s.shape);
      EXPECT_NEAR(ms * 1e-3, want, 1e-9 * want + 1e-15) << what << ": " << s.stage << " at " << s.shape;
    }
  EXPECT_GT(total_s, 0) << what;
  // Every GDN method runs the family's forward and backward; those that scan, its boundary stages and the dense map.
  const Calls c = calls_of(replayed);
  const std::string key = gdn_stage_shape_key(GdnShape{1, kTokensPerRank, 2, 8, 8});
  if (method != "ring" && method != "ulysses") {  // ring: its own map and a forward from S_in; ulysses: H / P heads
    EXPECT_EQ(c.count({"gdn_forward", key}), 1u) << what;
    EXPECT_EQ(c.count({"gdn_backward", key}), 1u) << what;
  }
  if (method == "zeco" || method == "lasp2") {
    EXPECT_EQ(c.count({"gdn_rank_map", gdn_rank_map_key(GdnShape{1, kTokensPerRank, 2, 8, 8}, true)}), 1u) << what;
    EXPECT_EQ(c.count({"gdn_initial_dstate", key}), 1u) << what;
    EXPECT_EQ(c.count({"gdn_dense_apply", gdn_dense_apply_key(2, 8, 8 / blocks)}), 1u) << what;
  }
  boot.barrier();
  if (boot.rank() == 0) std::remove(path.c_str());
}

TEST(SimGdnKernels, ReplaysEveryCallOfDp) { replay("dp", 1); }
TEST(SimGdnKernels, ReplaysEveryCallOfZeco) { replay("zeco", 1); }
TEST(SimGdnKernels, ReplaysEveryCallOfZecoInColumnBlocks) { replay("zeco", 2); }
TEST(SimGdnKernels, ReplaysEveryCallOfLasp2) { replay("lasp2", 1); }
TEST(SimGdnKernels, ReplaysEveryCallOfLasp1) { replay("lasp1", 1); }
TEST(SimGdnKernels, ReplaysEveryCallOfRing) { replay("ring", 1); }
TEST(SimGdnKernels, ReplaysEveryCallOfUlysses) { replay("ulysses", 1); }

// A table of zeco's stages has apply and transpose but no product or identity: those take the recorded time of the
// stage of the same arithmetic (A2 A1 at heads h, n is apply at heads h, n, cols n; identity is transpose's pass).
TEST(SimGdnKernels, AProductOrIdentityTheTableLacksReplaysApplyOrTranspose) {
  Bootstrap& boot = *test::boot();
  const std::string path = "sim_gdn_kernels_stand_in_np" + std::to_string(boot.size()) + ".csv";
  record("zeco", 1, path);
  const StageTable table(path);
  ASSERT_TRUE(table.shapes("gdn_dense_product").empty());
  ASSERT_TRUE(table.shapes("gdn_dense_identity").empty());
  SimDevice dev(make_manual_clock(), SimGpu{});
  auto k = make_sim_gdn_kernels(dev, table, DType::f32);
  const Stream st = dev.compute_stream();
  // (the same work; a table of one size scales by the bytes moved, which differ by a fraction of a nanosecond here)
  k->dense_product(2, 8, nullptr, nullptr, nullptr, st);
  const double apply_s = table.seconds("gdn_dense_apply", gdn_dense_apply_key(2, 8, 8));
  EXPECT_NEAR(dev.stream_time(st), apply_s, 1e-3 * apply_s);
  const double after_product = dev.stream_time(st);
  k->dense_identity(2, 8, nullptr, st);
  const double transpose_s = table.seconds("gdn_dense_transpose", gdn_dense_key(2, 8));
  EXPECT_NEAR(dev.stream_time(st) - after_product, transpose_s, 1e-3 * transpose_s);
  boot.barrier();
  if (boot.rank() == 0) std::remove(path.c_str());
}

TEST(SimGdnKernels, AKeyTheTableLacksNamesTheStageTheKeyAndTheFile) {
  Bootstrap& boot = *test::boot();
  const std::string path = "sim_gdn_kernels_lacking_np" + std::to_string(boot.size()) + ".csv";
  record("dp", 1, path);
  SimDevice dev(make_manual_clock(), SimGpu{});
  auto k = make_sim_gdn_kernels(dev, StageTable(path), DType::f32);
  auto expect = [&](const std::function<void()>& call, const std::vector<std::string>& parts) {
    try {
      call();
      ADD_FAILURE() << "no UsageError for " << parts[0];
    } catch (const UsageError& e) {
      const std::string msg = e.what();
      for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find("--attention gdn --stage-times"), std::string::npos) << msg;
    }
  };
  const Stream st = dev.compute_stream();
  // Another length than recorded: the table has the stage, not at this key, and says where it has it.
  const GdnShape other{1, 77, 2, 8, 8}, recorded{1, kTokensPerRank, 2, 8, 8};
  expect([&] { k->forward(other, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, st); },
         {"gdn_forward", gdn_stage_shape_key(other), "(it has it at " + gdn_stage_shape_key(recorded) + ")"});
  // dp makes no rank map: the table has no row of the stage at all.
  expect([&] { k->rank_map(other, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, st); },
         {"gdn_rank_map", gdn_rank_map_key(other, false), "no row of gdn_rank_map"});
  expect([&] { k->dense_apply(2, 8, 8, nullptr, nullptr, nullptr, nullptr, st); },
         {"no row of gdn_dense_apply", gdn_dense_apply_key(2, 8, 8)});
  EXPECT_EQ(dev.stream_time(st), 0);  // nothing was charged for a call that failed
  boot.barrier();
  if (boot.rank() == 0) std::remove(path.c_str());
}

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
