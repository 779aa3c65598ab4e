// Every registered SP method on this world of CPU ranks against the single-device run of the whole sequence
// (DESIGN §7: relative RMS error < 1e-5 for every output and gradient of every rank), including local lengths
// shorter than one chunk; zeco for K in {1, 2, dk}. dp is checked against each rank's tokens run alone.
#include "../mpi_test_main.h"
#include "harness/error.h"
#include "harness/sp_run.h"

namespace spb {
namespace {

struct Case {
  int tokens_per_rank;
  GateKind gates;
  bool h0, dht;
};

void run_case(const std::string& method, const Case& c, int blocks) {
  Bootstrap& boot = *test::boot();
  auto rt = make_runtime(boot, "cpu");
  const int p = boot.rank(), P = boot.size();
  GlaShape whole;
  whole.B = 2, whole.T = c.tokens_per_rank * P, whole.H = 12, whole.dk = 8, whole.dv = 6;  // H=12: Ulysses on P<=4
  GlaShape local = whole;
  local.T = c.tokens_per_rank;
  const HostTensors in = generate_inputs(whole, 31 + c.tokens_per_rank, c.gates, c.h0, c.dht);
  const HostTensors mine = local_slice(in, whole, p * local.T, (p + 1) * local.T);

  auto m = find_method(method)->make(*rt, SpConfig{local, blocks, "host"});
  DeviceTensors d(*rt->dev, local, rt->kern->act_dtype());
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
  const std::string what = method + " P=" + std::to_string(P) + " L=" + std::to_string(c.tokens_per_rank) +
                           " K=" + std::to_string(blocks) + (c.h0 ? " h0" : "") + (c.dht ? " dht" : "") +
                           (c.gates == GateKind::strong ? " strong" : "");
  const double tol = 1e-5;
  EXPECT_LT(e.o, tol) << what;
  EXPECT_LT(e.ht, tol) << what;
  EXPECT_LT(e.dq, tol) << what;
  EXPECT_LT(e.dk, tol) << what;
  EXPECT_LT(e.dv, tol) << what;
  EXPECT_LT(e.dg, tol) << what;
  EXPECT_LT(e.dh0, tol) << what;
}

const std::vector<Case> kCases = {
    {5, GateKind::model, false, false},  // shorter than one chunk
    {64, GateKind::strong, true, true},
    {100, GateKind::model, true, true},  // a partial chunk on every rank
    {100, GateKind::strong, false, true},
};

class EveryMethod : public testing::TestWithParam<std::string> {};

TEST_P(EveryMethod, MatchesTheSingleDeviceRun) {
  for (const Case& c : kCases) run_case(GetParam(), c, 1);
}

TEST(Zeco, EveryBlockCount) {
  for (int K : {1, 2, 8 /* dk */, 2 * 12 * 8 /* every row its own block */})
    for (const Case& c : kCases) run_case("zeco", c, K);
}

TEST(Ulysses, HeadsNotDivisibleByTheWorldAreAUsageError) {
  Bootstrap& boot = *test::boot();
  if (boot.size() == 1) GTEST_SKIP() << "every H divides a world of one";
  auto rt = make_runtime(boot, "cpu");
  GlaShape local;
  local.H = boot.size() + 1;
  EXPECT_THROW(find_method("ulysses")->make(*rt, SpConfig{local, 1, "host"}), UsageError);
}

TEST(Registry, HasEveryMethodOfTheDesign) {
  for (const char* m : {"dp", "lasp1", "lasp2", "zeco", "ring", "ulysses"}) EXPECT_NE(find_method(m), nullptr) << m;
  EXPECT_EQ(find_method("nope"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Cpu, EveryMethod, testing::ValuesIn(method_names()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
