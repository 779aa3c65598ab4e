// All-Scan on CPU ranks (DESIGN §7): every rank receives exactly the sequential fold of the ranks before it (after it,
// in reverse), for every K that divides the state's rows, with and without a starting state. The fold is computed
// here with the same fp32 operations in the same order, so the comparison is bitwise.
#include <random>

#include "../mpi_test_main.h"
#include "harness/error.h"
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

void check(ScanDirection dir, int blocks, bool with_first, int call) {
  Bootstrap& boot = *test::boot();
  auto rt = make_runtime(boot, "cpu");
  const int p = boot.rank(), P = boot.size();
  const RankData mine = data_of(p, call);
  std::vector<float> first(kRows * kCols, 0.f);
  if (with_first)
    for (size_t i = 0; i < first.size(); ++i) first[i] = float(i % 7) - 3.f;
  std::vector<float> carry_in(kRows * kCols, -1.f), carry_out(kRows * kCols, -1.f);

  AllScanArgs a;
  a.direction = dir, a.rows = kRows, a.cols = kCols, a.blocks = blocks;
  a.decay = mine.decay.data(), a.local = mine.local.data(), a.first = with_first ? first.data() : nullptr;
  a.carry_in = carry_in.data(), a.carry_out = carry_out.data();
  all_scan_host(*rt, a, {});

  // The sequential fold from the first rank in this direction up to this one.
  std::vector<float> expect = first;
  const bool fwd = dir == ScanDirection::forward;
  for (int j = fwd ? 0 : P - 1; j != p; j += fwd ? 1 : -1) expect = fold(data_of(j, call), expect);
  EXPECT_EQ(carry_in, expect) << "rank " << p << " K " << blocks;
  EXPECT_EQ(carry_out, fold(mine, expect)) << "rank " << p << " K " << blocks;
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

TEST(AllScan, KThatDoesNotDivideTheRowsIsAUsageError) {
  auto rt = make_runtime(*test::boot(), "cpu");
  std::vector<float> s(kRows * kCols), d(kRows);
  AllScanArgs a;
  a.rows = kRows, a.cols = kCols, a.blocks = 5, a.decay = d.data(), a.local = s.data();
  a.carry_in = s.data(), a.carry_out = s.data();
  EXPECT_THROW(all_scan_host(*rt, a, {}), UsageError);
  a.blocks = 0;
  EXPECT_THROW(all_scan_host(*rt, a, {}), UsageError);
}

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
