// Every registered SP method on this world of ranks against the single-device run of the whole sequence (DESIGN §7),
// including local lengths shorter than one chunk; zeco for K in {1, 2, dk, every row} and for head groups from one to
// one per (batch, head) pair. dp is checked against each
// rank's tokens run alone. SPB_TEST_BACKEND=cpu (default: fp32, error < 1e-5) or gpu (bf16, error < 5e-3, one GPU per
// rank; skipped where there are fewer GPUs than ranks on the node).
#include <cstdlib>

#include "../mpi_test_main.h"
#include "runtime/error.h"
#include "sp/sp_run.h"

namespace spb {
namespace {

struct Case {
  int tokens_per_rank;
  GateKind gates;
  bool h0, dht;
  int B = 2, H = 12, dk = 8, dv = 6;  // H=12: Ulysses on P <= 4
  Attention attention = Attention::gla;
};

std::string backend() {
  const char* b = std::getenv("SPB_TEST_BACKEND");
  return b && *b ? b : "cpu";
}
bool gpu() { return backend() == "gpu"; }

// GPU runs need one GPU per rank of the node.
bool have_devices() { return !gpu() || test::gpus_for_every_local_rank(*test::boot()); }

void run_case(const std::string& method, const Case& c, int blocks, const std::string& allscan = "host",
              SpOverlap overlap = SpOverlap::none, int head_groups = 0, int ranks_per_node = 0) {
  Bootstrap& boot = *test::boot();
  auto rt = make_runtime(boot, backend(), ranks_per_node);
  const int p = boot.rank(), P = boot.size();
  GlaShape whole;
  whole.B = c.B, whole.T = c.tokens_per_rank * P, whole.H = c.H, whole.dk = c.dk, whole.dv = c.dv;
  GlaShape local = whole;
  local.T = c.tokens_per_rank;
  const HostTensors in = generate_inputs(whole, 31 + c.tokens_per_rank, c.gates, c.h0, c.dht, c.attention);
  const HostTensors mine = local_slice(in, whole, p * local.T, (p + 1) * local.T);

  SpConfig config{local, blocks, allscan, overlap, head_groups};
  config.attention = c.attention;
  auto m = find_method(method)->make(*rt, config);
  if (head_groups) EXPECT_EQ(m->head_groups(), head_groups) << method;
  DeviceTensors d(*rt->dev, local, rt->kern->act_dtype(), c.attention);
  upload_inputs(*rt->dev, rt->kern->act_dtype(), d, mine);
  poison_outputs(*rt->dev, d);
  const SpForwardArgs fa = forward_args(d, mine);
  const SpBackwardArgs ba = backward_args(d, mine);
  for (int i = 0; i < 2; ++i) {  // twice: a method must not depend on state left by its previous call
    m->forward(fa);
    m->backward(fa, ba);
  }
  const HostResult got = download_result(*rt->dev, rt->kern->act_dtype(), local, d);
  const bool indep = m->independent_sequences();
  const HostResult ref = indep ? single_device(*rt, local, mine)
                               : slice_result(single_device(*rt, whole, in), whole, p * local.T, (p + 1) * local.T);
  const Errors e = compare(boot, ref, got, indep);
  const std::string what = std::string(attention_name(c.attention)) + " " + method + " P=" + std::to_string(P) + " L=" + std::to_string(c.tokens_per_rank) +
                           " K=" + std::to_string(blocks) + (c.h0 ? " h0" : "") + (c.dht ? " dht" : "") +
                           (c.gates == GateKind::strong ? " strong" : "") + " " + backend() + " " + allscan +
                           " overlap=" + std::to_string(int(overlap)) +
                           " groups=" + std::to_string(m->head_groups()) + " " + rt->topo.describe();
  const double tol = gpu() ? 5e-3 : 1e-5;
  EXPECT_LT(e.o, tol) << what;
  EXPECT_LT(e.ht, tol) << what;
  EXPECT_LT(e.dq, tol) << what;
  EXPECT_LT(e.dk, tol) << what;
  EXPECT_LT(e.dv, tol) << what;
  EXPECT_LT(e.dg, tol) << what;
  EXPECT_LT(e.dbeta, tol) << what;
  EXPECT_LT(e.dh0, tol) << what;
}

std::vector<Case> cases() {
  if (!gpu())
    return {
        {5, GateKind::model, false, false},  // shorter than one chunk
        {64, GateKind::strong, true, true},
        {100, GateKind::model, true, true},  // a partial chunk on every rank
        {100, GateKind::strong, false, true},
    };
  return {
      {100, GateKind::model, true, true, 2, 4, 64, 64},     // a partial chunk on every rank
      {1000, GateKind::model, false, false, 1, 4, 128, 64},  // dk != dv
      {1024, GateKind::model, true, true, 1, 4, 256, 512},   // GLA-1B's 4-head layer: dv > 128, 128-column tiles
  };
}
// The paper's operator shape (Table 3): every method once, on the GPU.
const Case kPaperShape = {16384, GateKind::model, false, false, 1, 16, 128, 128};

class EveryMethod : public testing::TestWithParam<std::string> {
  void SetUp() override {
    if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  }
};

TEST_P(EveryMethod, MatchesTheSingleDeviceRun) {
  for (const Case& c : cases()) run_case(GetParam(), c, 1);
  if (gpu()) run_case(GetParam(), kPaperShape, 16);
}

TEST(Zeco, EveryBlockCount) {
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  for (const Case& c : cases())
    for (int K : {1, 2, c.dk, c.B * c.H * c.dk /* every row its own block */}) run_case("zeco", c, K);
}

// Head groups: one scan of the whole state, two, uneven groups (CPU: 24 pairs in 5 = 5, 5, 5, 5, 4) and one group
// per (batch, head) pair, with K blocks per group's scan (the device All-Scan on GPUs). Odd groups run on the second
// compute stream: on the GPU, two groups at the paper's shape too, where the two streams' kernels overlap longest.
TEST(Zeco, HeadGroups) {
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  for (const Case& c : cases())
    for (int G : {1, 2, 5, c.B * c.H})
      if (G <= c.B * c.H) run_case("zeco", c, G == 5 ? 1 : 2, gpu() ? "device" : "host", SpOverlap::none, G);
  if (gpu()) run_case("zeco", kPaperShape, 16, "device", SpOverlap::none, 2);
}

TEST(Zeco, BadHeadGroupsAreUsageErrors) {
  Bootstrap& boot = *test::boot();
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  auto rt = make_runtime(boot, backend());
  GlaShape local;
  local.B = 1, local.H = 3, local.dk = 4, local.dv = 4, local.T = 8;
  auto make = [&](int blocks, SpOverlap overlap, int groups) {
    return find_method("zeco")->make(*rt, SpConfig{local, blocks, "host", overlap, groups});
  };
  const SpOverlap none = SpOverlap::none;
  EXPECT_THROW(make(1, none, 4), UsageError);  // more groups than pairs
  EXPECT_THROW(make(1, none, -1), UsageError);
  EXPECT_THROW(make(1, SpOverlap::output, 2), UsageError);  // the other orders have one group
  EXPECT_THROW(make(1, SpOverlap::states, 2), UsageError);
  EXPECT_THROW(make(12, none, 2), UsageError);  // groups of 8 and 4 rows: K = 12 divides neither
  EXPECT_EQ(make(12, none, 0)->head_groups(), 1);  // the default: one scan of the whole state
  EXPECT_EQ(make(4, none, 2)->head_groups(), 2);
  EXPECT_EQ(make(1, none, 3)->head_groups(), 3);
}

TEST(ZecoAndLasp2, OverlappedOrder) {
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  for (const Case& c : cases()) {
    run_case("zeco", c, 2, "host", SpOverlap::output);
    run_case("lasp2", c, 1, "host", SpOverlap::output);
  }
}

// The chunk states beside the communication (--overlap 2), twice per run_case as every case: the second pass's states
// must not see the first pass's arrival (epochs). On GPUs with the device All-Scan too, and at the paper's shape,
// where the chunk states run long enough for the state to arrive in the middle of a block's walk.
TEST(ZecoAndLasp2, StatesBesideTheCommunication) {
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  for (const Case& c : cases()) {
    run_case("zeco", c, 2, "host", SpOverlap::states);
    run_case("lasp2", c, 1, "host", SpOverlap::states);
    if (gpu()) run_case("zeco", c, 1, "device", SpOverlap::states);
  }
  if (gpu()) {
    run_case("zeco", kPaperShape, 16, "device", SpOverlap::states);
    run_case("lasp2", kPaperShape, 1, "host", SpOverlap::states);
  }
}

TEST(Zeco, DeviceAllScan) {
  if (!gpu() || !have_devices()) GTEST_SKIP() << "the device All-Scan needs one GPU per rank";
  for (const Case& c : cases())
    for (int K : {1, 16}) run_case("zeco", c, K, "device");
}

// The node-aware All-Scans (DESIGN §10) inside zeco, on 1 and 2 ranks per simulated node where that divides the
// world (P = 4: 2 nodes x 2 and 4 x 1), in order with K = 1 and 2; on the last case also with two head groups (two
// scans of half the rows each) and beside the chunk states.
TEST(Zeco, NodeAwareAllScans) {
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  const int P = test::boot()->size();
  for (int rpn : {1, 2}) {
    if (P % rpn) continue;
    for (const char* variant : {"host-hier", "host-logdepth", "rail", "rail-logdepth"}) {
      for (const Case& c : cases())
        for (int K : {1, 2}) run_case("zeco", c, K, variant, SpOverlap::none, 0, rpn);
      run_case("zeco", cases().back(), 2, variant, SpOverlap::none, 2, rpn);
      run_case("zeco", cases().back(), 1, variant, SpOverlap::states, 0, rpn);
    }
  }
}

// `auto` runs the rail scan where the world spans several nodes, and says so.
TEST(Zeco, AutoAcrossNodesIsTheRailScan) {
  Bootstrap& boot = *test::boot();
  if (boot.size() % 2) GTEST_SKIP() << "2 ranks per node need an even world";
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  auto rt = make_runtime(boot, backend(), boot.size() / 2);  // 2 nodes
  GlaShape local;
  local.B = 1, local.H = 2, local.dk = 4, local.dv = 4, local.T = 8;
  auto m = find_method("zeco")->make(*rt, SpConfig{local, 1, "auto"});
  EXPECT_EQ(m->comm_backend(), "rail-logdepth");
  EXPECT_NE(m->notice().find("rail-logdepth"), std::string::npos) << m->notice();
  auto one = make_runtime(boot, backend(), boot.size());
  EXPECT_NE(find_method("zeco")->make(*one, SpConfig{local, 1, "auto"})->comm_backend(), "rail-logdepth");
}

TEST(Ulysses, HeadsNotDivisibleByTheWorldAreAUsageError) {
  Bootstrap& boot = *test::boot();
  if (boot.size() == 1) GTEST_SKIP() << "every H divides a world of one";
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  auto rt = make_runtime(boot, backend());
  GlaShape local;
  local.H = boot.size() + 1;
  EXPECT_THROW(find_method("ulysses")->make(*rt, SpConfig{local, 1, "host"}), UsageError);
}

// Gated DeltaNet (DESIGN §12): every method, in order, zeco for K column blocks (K divides dv = 6).
class GdnMethod : public testing::TestWithParam<std::string> {
  void SetUp() override {
    if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
    if (!make_runtime(*test::boot(), backend())->gdn) GTEST_SKIP() << "no Gated DeltaNet kernels on " << backend();
  }
};

TEST_P(GdnMethod, MatchesTheSingleDeviceRun) {
  for (Case c : cases()) {
    if (gpu() && (c.dk > 128 || c.dv > 128)) continue;  // the CUDA GDN stages take dk, dv <= 128
    c.attention = Attention::gdn;
    run_case(GetParam(), c, 1);
    if (GetParam() == "zeco") {
      run_case("zeco", c, 2);
      run_case("zeco", c, c.dv);
    }
  }
}

TEST(GdnMethods, OtherOrdersAndScansAreUsageErrors) {
  Bootstrap& boot = *test::boot();
  if (!have_devices()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
  auto rt = make_runtime(boot, backend());
  if (!rt->gdn) GTEST_SKIP() << "no Gated DeltaNet kernels on " << backend();
  GlaShape local;
  local.H = 4, local.dk = 8, local.dv = 8, local.T = 64;
  SpConfig c{local, 1, "host"};
  c.attention = Attention::gdn;
  SpConfig overlapped = c;
  overlapped.overlap = SpOverlap::output;
  EXPECT_THROW(find_method("zeco")->make(*rt, overlapped), UsageError);
  SpConfig device = c;
  device.allscan = "device";
  EXPECT_THROW(find_method("zeco")->make(*rt, device), UsageError);
  SpConfig bad_blocks = c;
  bad_blocks.blocks = 3;  // does not divide dv = 8
  EXPECT_THROW(find_method("zeco")->make(*rt, bad_blocks), UsageError);
}

TEST(Registry, HasEveryMethodOfTheDesign) {
  for (const char* m : {"dp", "lasp1", "lasp2", "zeco", "ring", "ulysses"}) EXPECT_NE(find_method(m), nullptr) << m;
  EXPECT_EQ(find_method("nope"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Cpu, GdnMethod, testing::Values("dp", "zeco", "lasp2", "lasp1", "ring", "ulysses"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Cpu, EveryMethod, testing::ValuesIn(method_names()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
