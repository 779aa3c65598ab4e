// All-Scan on CPU ranks (DESIGN §7): every rank receives exactly the sequential fold of the ranks before it (after it,
// in reverse), for every K that divides the state's rows, with and without a starting state. The fold is computed
// here with the same fp32 operations in the same order, so the comparison with the chain is bitwise. The node-aware
// scans (host-hier, host-logdepth, rail, rail-logdepth; DESIGN §10) run on 1, 2, 3 and 4 ranks per simulated node
// where that divides the world (np 4, 6 and 8 give 2 x 2, 4 x 1, 2 x 3, 3 x 2, 2 x 4 and 4 x 2 nodes, among others),
// through one object per topology so that every call also proves that nothing carries over from the last.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "../mpi_test_main.h"
#include "runtime/error.h"
#include "zeco/all_scan.h"

namespace spb {
namespace {

constexpr size_t kRows = 12, kCols = 5;  // e.g. B=1, H=2, dk=6, dv=5

struct RankData {
  std::vector<float> decay, local;
};
RankData data_of(int rank, int call) {
  std::mt19937 gen(1234 + 97 * rank + 7 * call);
  std::normal_distribution<float> n;
  RankData d{std::vector<float>(kRows), std::vector<float>(kRows * kCols)};
  for (float& x : d.decay) x = -std::abs(n(gen));
  for (float& x : d.local) x = n(gen);
  return d;
}

// out = diag(exp decay) in + local, as the CPU kernel computes it.
std::vector<float> fold(const RankData& d, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  for (size_t r = 0; r < kRows; ++r) {
    const float e = std::exp(d.decay[r]);
    for (size_t c = 0; c < kCols; ++c) out[r * kCols + c] = e * in[r * kCols + c] + d.local[r * kCols + c];
  }
  return out;
}

// Runs one scan of `rows` rows (at most kRows: a head group's rows are fewer than the state's) through `scan`, or
// through all_scan_host where it is null, and checks carry_in and carry_out on this rank against the sequential fold:
// bitwise for the chain; for the node-aware scans within 1e-5 of max(1, |expected|), since they sum the decays before
// exp and regroup the folds (a few fp32 roundings per rank on values of order 1).
void check(Runtime& rt, AllScan* scan, ScanDirection dir, int blocks, bool with_first, int call,
           size_t rows = kRows) {
  const int p = rt.rank(), P = rt.world();
  const RankData mine = data_of(p, call);
  std::vector<float> first(kRows * kCols, 0.f);
  if (with_first)
    for (size_t i = 0; i < first.size(); ++i) first[i] = float(i % 7) - 3.f;
  std::vector<float> carry_in(kRows * kCols, -1.f), carry_out(kRows * kCols, -1.f);

  AllScanArgs a;
  a.direction = dir, a.rows = rows, a.cols = kCols, a.blocks = blocks;
  a.transition = mine.decay.data(), a.local = mine.local.data(), a.first = with_first ? first.data() : nullptr;
  a.carry_in = carry_in.data(), a.carry_out = carry_out.data();
  if (scan) scan->run(a, {});
  else all_scan_host(rt, a, {});

  // The sequential fold from the first rank in this direction up to this one.
  std::vector<float> expect = first;
  const bool fwd = dir == ScanDirection::forward;
  for (int j = fwd ? 0 : P - 1; j != p; j += fwd ? 1 : -1) expect = fold(data_of(j, call), expect);
  std::vector<float> expect_out = fold(mine, expect);
  for (auto* v : {&expect, &expect_out, &carry_in, &carry_out}) v->resize(rows * kCols);  // the rows scanned
  const std::string what = std::string(scan ? scan->backend() : "all_scan_host") + " " +
                           rt.topo.describe() + (fwd ? " forward" : " reverse") + " rank " + std::to_string(p) +
                           " K " + std::to_string(blocks) + " rows " + std::to_string(rows) +
                           (with_first ? " first" : "");
  if (!scan || scan->backend() == "host") {
    EXPECT_EQ(carry_in, expect) << what;
    EXPECT_EQ(carry_out, expect_out) << what;
    return;
  }
  for (size_t e = 0; e < expect.size(); ++e) {
    ASSERT_NEAR(carry_in[e], expect[e], 1e-5 * std::max(1.f, std::abs(expect[e]))) << what << " element " << e;
    ASSERT_NEAR(carry_out[e], expect_out[e], 1e-5 * std::max(1.f, std::abs(expect_out[e]))) << what << " element " << e;
  }
}

void check(ScanDirection dir, int blocks, bool with_first, int call) {
  auto rt = make_runtime(*test::boot(), "cpu");
  check(*rt, nullptr, dir, blocks, with_first, call);
}

TEST(AllScan, ForwardEqualsSequentialFoldForEveryK) {
  int call = 0;
  for (int K = 1; K <= int(kRows); ++K)
    if (kRows % K == 0)
      for (bool first : {false, true}) check(ScanDirection::forward, K, first, call++);
}

TEST(AllScan, ReverseEqualsSequentialFoldForEveryK) {
  int call = 0;
  for (int K = 1; K <= int(kRows); ++K)
    if (kRows % K == 0)
      for (bool first : {false, true}) check(ScanDirection::reverse, K, first, call++);
}

// Every CPU variant on 1, 2, 3 and 4 ranks per simulated node (where that divides the world): forward and reverse,
// every K, with and without a starting state, on the whole state, on half of its rows and on one row (the rail
// scans then leave some GPUs of a node no share), all through one object per topology.
TEST(AllScan, EveryHostVariantOnEveryNodeSizeEqualsSequentialFold) {
  const int P = test::boot()->size();
  for (int rpn : {1, 2, 3, 4}) {
    if (P % rpn) continue;
    auto rt = make_runtime(*test::boot(), "cpu", rpn);
    ASSERT_EQ(rt->topo.ranks_per_node, rpn);
    ASSERT_EQ(rt->topo.nodes, P / rpn);
    for (const char* variant : {"host", "host-hier", "host-logdepth", "rail", "rail-logdepth"}) {
      auto scan = make_all_scan(*rt, variant, kRows, kRows * kCols);
      ASSERT_EQ(scan->backend(), variant);
      int call = 0;
      for (ScanDirection dir : {ScanDirection::forward, ScanDirection::reverse})
        for (int K = 1; K <= int(kRows); ++K)
          if (kRows % K == 0)
            for (bool first : {false, true}) check(*rt, scan.get(), dir, K, first, call++);
      for (ScanDirection dir : {ScanDirection::reverse, ScanDirection::forward}) {
        check(*rt, scan.get(), dir, 2, true, call++, kRows / 2);
        check(*rt, scan.get(), dir, 1, true, call++, 1);
      }
    }
  }
}

// The chain in segments (the rail scans' step inside each node): every group of R consecutive ranks is a chain of
// its own, its first rank in scan order starting from `first`; bitwise, as the chain.
TEST(AllScan, ChainInSegmentsEqualsEachSegmentsFold) {
  auto rt = make_runtime(*test::boot(), "cpu");
  const int p = rt->rank(), P = rt->world();
  for (int R = 1; R <= P; ++R) {
    if (P % R) continue;
    for (ScanDirection dir : {ScanDirection::forward, ScanDirection::reverse}) {
      const int call = 100 + R;
      const RankData mine = data_of(p, call);
      std::vector<float> first(kRows * kCols), carry_in(kRows * kCols, -1.f), carry_out(kRows * kCols, -1.f);
      for (size_t i = 0; i < first.size(); ++i) first[i] = float(i % 5) - 2.f;
      AllScanArgs a;
      a.direction = dir, a.rows = kRows, a.cols = kCols, a.blocks = 3;
      a.transition = mine.decay.data(), a.local = mine.local.data(), a.first = first.data();
      a.carry_in = carry_in.data(), a.carry_out = carry_out.data();
      all_scan_host(*rt, a, {}, R);
      const bool fwd = dir == ScanDirection::forward;
      const int begin = fwd ? p / R * R : p / R * R + R - 1;  // the segment's first rank in scan order
      std::vector<float> expect = first;
      for (int j = begin; j != p; j += fwd ? 1 : -1) expect = fold(data_of(j, call), expect);
      EXPECT_EQ(carry_in, expect) << "R " << R << (fwd ? " forward" : " reverse") << " rank " << p;
      EXPECT_EQ(carry_out, fold(mine, expect)) << "R " << R << (fwd ? " forward" : " reverse") << " rank " << p;
    }
  }
}

TEST(AllScan, AutoPicksTheHierarchicalScanAcrossNodes) {
  Topology one, two;
  two.ranks_per_node = 2, two.nodes = 2, two.simulated = true;
  EXPECT_EQ(resolve_allscan("auto", false, one), "host");
  EXPECT_EQ(resolve_allscan("auto", true, one), kDefaultDeviceAllScan);
  EXPECT_EQ(resolve_allscan("auto", false, two), "rail-logdepth");
  EXPECT_EQ(resolve_allscan("auto", true, two), "rail-logdepth");
  EXPECT_EQ(resolve_allscan("rail", true, two), "rail");
  EXPECT_EQ(resolve_allscan("host-logdepth", false, two), "host-logdepth");
  EXPECT_EQ(resolve_allscan("host", false, two), "host");
  Topology interleaved;  // nodes of unequal or interleaved ranks: nothing node-aware runs, auto keeps the chain
  interleaved.ranks_per_node = 0, interleaved.nodes = 2;
  EXPECT_EQ(resolve_allscan("auto", false, interleaved), "host");
  EXPECT_THROW(resolve_allscan("host-hier", false, interleaved), UsageError);
  EXPECT_THROW(resolve_allscan("host-tree", false, two), UsageError);
  Topology apart = two;  // --nodes-over-network: the device protocol would cross the simulated network over NVLink
  apart.over_network = true;
  EXPECT_EQ(resolve_allscan("auto", true, apart), "rail-logdepth");
  EXPECT_EQ(resolve_allscan("rail", true, apart), "rail");  // its device step stays inside a node
  EXPECT_EQ(resolve_allscan("device-ll16", true, two), "device-ll16");
  EXPECT_THROW(resolve_allscan("device-ll16", true, apart), UsageError);
  EXPECT_THROW(resolve_allscan("device", true, apart), UsageError);
  auto rt = make_runtime(*test::boot(), "cpu");
  EXPECT_THROW(HostAllScan(*rt, "device", kRows, kRows * kCols), UsageError);  // no device protocol on CPUs
}

// The topology: the launch's (every rank of this test runs on one host), --ranks-per-node, SPB_RANKS_PER_NODE, and
// the values that must stop every rank with a UsageError.
TEST(Topology, FromTheLaunchTheFlagAndTheEnvironment) {
  Bootstrap& boot = *test::boot();
  const int P = boot.size();
  ::unsetenv("SPB_RANKS_PER_NODE");
  const Topology launch = resolve_topology(boot);
  EXPECT_EQ(launch.nodes, 1);
  EXPECT_EQ(launch.ranks_per_node, P);
  EXPECT_FALSE(launch.simulated);
  const Topology ones = resolve_topology(boot, 1);
  EXPECT_EQ(ones.nodes, P);
  EXPECT_TRUE(ones.simulated);
  EXPECT_THROW(resolve_topology(boot, P + 1), UsageError);  // does not divide the world
  EXPECT_THROW(resolve_topology(boot, -2), UsageError);
  ::setenv("SPB_RANKS_PER_NODE", "1", 1);
  EXPECT_EQ(resolve_topology(boot).nodes, P);
  EXPECT_EQ(resolve_topology(boot, P).nodes, 1);  // the flag wins
  ::setenv("SPB_RANKS_PER_NODE", "two", 1);
  EXPECT_THROW(resolve_topology(boot), UsageError);
  ::unsetenv("SPB_RANKS_PER_NODE");
}

// Launches of several hosts, as node_first_rank describes them: what is read from them, and the simulated nodes that
// would span two hosts.
TEST(Topology, OfLaunchesAcrossHosts) {
  const std::string flag = "--ranks-per-node";
  const Topology two = topology_of({0, 0, 0, 0, 4, 4, 4, 4}, 0, flag);  // 2 hosts x 4 ranks
  EXPECT_EQ(two.nodes, 2);
  EXPECT_EQ(two.ranks_per_node, 4);
  EXPECT_FALSE(two.simulated);
  EXPECT_EQ(topology_of({0, 0, 0, 0, 4, 4, 4, 4}, 2, flag).nodes, 4);  // 2 simulated nodes per host
  EXPECT_EQ(topology_of({0, 0, 0, 0, 4, 4, 4, 4}, 1, flag).nodes, 8);
  EXPECT_THROW(topology_of({0, 0, 0, 0, 4, 4, 4, 4}, 8, flag), UsageError);  // one node over both hosts
  EXPECT_THROW(topology_of({0, 0, 2, 2, 2, 2}, 3, flag), UsageError);        // node 0 = ranks 0..2 over two hosts
  const Topology interleaved = topology_of({0, 1, 0, 1}, 0, flag);           // mpirun --map-by node
  EXPECT_EQ(interleaved.nodes, 2);
  EXPECT_FALSE(interleaved.regular());
  EXPECT_EQ(resolve_allscan("auto", false, interleaved), "host");
  EXPECT_THROW(topology_of({0, 1, 0, 1}, 2, flag), UsageError);
  EXPECT_EQ(topology_of({0, 1, 0, 1}, 1, flag).nodes, 4);  // one rank per node needs no shared host
  EXPECT_FALSE(topology_of({0, 0, 0, 3, 3}, 0, flag).regular());  // 3 + 2 ranks
}

TEST(AllScan, KThatDoesNotDivideTheRowsIsAUsageError) {
  auto rt = make_runtime(*test::boot(), "cpu");
  std::vector<float> s(kRows * kCols), d(kRows);
  AllScanArgs a;
  a.rows = kRows, a.cols = kCols, a.blocks = 5, a.transition = d.data(), a.local = s.data();
  a.carry_in = s.data(), a.carry_out = s.data();
  EXPECT_THROW(all_scan_host(*rt, a, {}), UsageError);
  a.blocks = 0;
  EXPECT_THROW(all_scan_host(*rt, a, {}), UsageError);
}

// A rank map with no kernels (the dense one of DESIGN §12) stops every host-driven scan with a UsageError on every
// rank before any transfer (no rank left waiting), and the device All-Scan's check refuses it (it folds diag(exp)
// in blocks of rows inside its kernel).
// Gated DeltaNet's dense map (sp/rank_map.h) on the chain: K column blocks of column-blocked states give, bit for bit,
// the sequential fold of whole states (each column is folded by the same products in the same order).
TEST(AllScan, ADenseRankMapScansColumnBlocksOnTheChain) {
  const int p = test::boot()->rank(), P = test::boot()->size();
  constexpr size_t dk = 6, heads = kRows / dk;
  auto rt = make_runtime(*test::boot(), "cpu");
  auto rank_data = [&](int rank) {
    std::mt19937 gen(777 + 31 * rank);
    std::normal_distribution<float> n;
    RankData d{std::vector<float>(kRows * dk), std::vector<float>(kRows * kCols)};
    for (float& x : d.decay) x = 0.3f * n(gen);  // the transition A, [heads, dk, dk]
    for (float& x : d.local) x = n(gen);
    return d;
  };
  auto fold = [&](const RankData& d, const std::vector<float>& in) {
    std::vector<float> out(in.size());
    rt->gdn->dense_apply(heads, dk, kCols, d.decay.data(), in.data(), d.local.data(), out.data(), {});
    return out;
  };
  std::vector<float> first(kRows * kCols);
  for (size_t i = 0; i < first.size(); ++i) first[i] = float(i % 7) - 3.f;
  for (const ScanDirection dir : {ScanDirection::forward, ScanDirection::reverse})
    for (const int K : {1, int(kCols)})
      for (const bool with_first : {false, true}) {
        const RankData mine = rank_data(p);
        auto blocked = [&](const std::vector<float>& x) {
          std::vector<float> b(x.size());
          column_blocks_pack(*rt->kern, kRows, kCols, K, x.data(), b.data(), {});
          return b;
        };
        const std::vector<float> local = blocked(mine.local), start = blocked(first);
        std::vector<float> in(kRows * kCols, -1.f), out(kRows * kCols, -1.f);
        AllScanArgs a;
        a.direction = dir, a.rows = kRows, a.cols = kCols, a.blocks = K, a.map = RankMapType::dense(dk);
        a.transition = mine.decay.data(), a.local = local.data(), a.first = with_first ? start.data() : nullptr;
        a.carry_in = in.data(), a.carry_out = out.data();
        all_scan_host(*rt, a, {});
        std::vector<float> got_in(in.size()), got_out(out.size());
        column_blocks_unpack(*rt->kern, kRows, kCols, K, in.data(), got_in.data(), {});
        column_blocks_unpack(*rt->kern, kRows, kCols, K, out.data(), got_out.data(), {});
        std::vector<float> expect = with_first ? first : std::vector<float>(kRows * kCols, 0.f);
        const bool fwd = dir == ScanDirection::forward;
        for (int j = fwd ? 0 : P - 1; j != p; j += fwd ? 1 : -1) expect = fold(rank_data(j), expect);
        const std::string what = std::string(fwd ? "forward" : "reverse") + " K " + std::to_string(K) +
                                 (with_first ? " first" : "") + " rank " + std::to_string(p);
        EXPECT_EQ(got_in, expect) << what;
        EXPECT_EQ(got_out, fold(mine, expect)) << what;
      }
}

// The scans that know a diagonal map alone refuse the dense one on every rank, before any transfer.
TEST(AllScan, ADenseRankMapOutsideTheChainIsAUsageErrorOnEveryRank) {
  const int P = test::boot()->size();
  std::vector<float> s(kRows * kCols), t(kRows * 6);
  AllScanArgs a;
  a.rows = kRows, a.cols = kCols, a.blocks = 1, a.map = RankMapType::dense(6), a.transition = t.data();
  a.local = s.data(), a.carry_in = s.data(), a.carry_out = s.data();
  EXPECT_THROW(require_diagonal_decay(a, "device All-Scan"), UsageError);
  AllScanArgs gla = a;
  gla.map = RankMapType::diagonal_decay();
  EXPECT_NO_THROW(require_diagonal_decay(gla, "device All-Scan"));
  for (int rpn : {1, 2}) {
    if (P % rpn || P / rpn < 2) continue;  // one node: the node-aware scans are the chain
    auto rt = make_runtime(*test::boot(), "cpu", rpn);
    for (const char* variant : {"host-hier", "host-logdepth", "rail", "rail-logdepth"})
      EXPECT_THROW(make_all_scan(*rt, variant, kRows * 6, kRows * kCols)->run(a, {}), UsageError) << variant;
  }
}

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
