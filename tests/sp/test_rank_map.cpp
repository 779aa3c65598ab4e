// The rank map (sp/rank_map.h) on the CPU kernels: GLA's diagonal-decay map applies and composes as a plain fp64 loop
// of S -> diag(exp t) S + b does (to fp32 rounding), composition is associative, the identity is exact, and K blocks
// of rows fold bit for bit as the whole state does; the dense map (Gated DeltaNet) applies and composes as an fp64
// matrix loop does, its K column blocks fold bit for bit as the whole state does, and without GDN's kernels every
// operation is a UsageError.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/error.h"
#include "sp/rank_map.h"

namespace spb {
namespace {

constexpr size_t kRows = 12, kCols = 5;  // e.g. B=1, H=2, dk=6, dv=5

struct Env {
  std::unique_ptr<Device> dev = make_cpu_device();
  std::unique_ptr<GlaKernels> kern = make_cpu_kernels();
  RankMap map(size_t rows = kRows, size_t cols = kCols) {
    return RankMap(*kern, *dev, RankMapType::diagonal_decay(), rows, cols);
  }
};

// A map (t, b) of the diagonal kind: t <= 0, one a row; b a state.
struct Map {
  std::vector<float> t, b;
};
Map random_map(int seed, size_t rows = kRows, size_t cols = kCols) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> n;
  Map m{std::vector<float>(rows), std::vector<float>(rows * cols)};
  for (float& x : m.t) x = -std::abs(n(gen));
  for (float& x : m.b) x = n(gen);
  return m;
}

// out = diag(exp t) x + b in fp64.
std::vector<double> apply64(const std::vector<double>& t, const std::vector<double>& x, const std::vector<double>& b,
                            size_t cols) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < t.size(); ++r)
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(t[r]) * x[r * cols + c] + b[r * cols + c];
  return out;
}
std::vector<double> wide(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

TEST(RankMap, DiagonalDecayDescribesGlaState) {
  Env e;
  const RankMap m = e.map();
  EXPECT_EQ(m.kind(), TransitionKind::diagonal_decay);
  EXPECT_EQ(m.block_axis(), BlockAxis::rows);
  EXPECT_STREQ(m.type().name(), "diagonal-decay");
  EXPECT_EQ(m.rows(), kRows);
  EXPECT_EQ(m.cols(), kCols);
  EXPECT_EQ(m.state_elems(), kRows * kCols);
  EXPECT_EQ(m.state_bytes(), kRows * kCols * 4);
  EXPECT_EQ(m.transition_elems(), kRows);  // one log-decay a row: lambda [B, H, dk]
  EXPECT_EQ(m.transition_bytes(), kRows * 4);
  EXPECT_EQ(m.block_extent(), kRows);
  EXPECT_TRUE(m.transitions_fold_as_states());
  EXPECT_EQ(RankMapType{}, RankMapType::diagonal_decay());
}

TEST(RankMap, ApplyEqualsTheFp64Loop) {
  Env e;
  const RankMap m = e.map();
  const Map a = random_map(1), x = random_map(2);
  std::vector<float> out(kRows * kCols, -1.f);
  m.apply(a.t.data(), x.b.data(), a.b.data(), out.data(), {});
  expect_close(out, apply64(wide(a.t), wide(x.b), wide(a.b), kCols), 1e-6, "apply");
  // In place, on x and on b: the same values.
  std::vector<float> on_x = x.b, on_b = a.b;
  m.apply(a.t.data(), on_x.data(), a.b.data(), on_x.data(), {});
  m.apply(a.t.data(), x.b.data(), on_b.data(), on_b.data(), {});
  EXPECT_EQ(on_x, out);
  EXPECT_EQ(on_b, out);
}

TEST(RankMap, ComposeEqualsTheFp64Loop) {
  Env e;
  const RankMap m = e.map();
  const Map first = random_map(3), second = random_map(4), x = random_map(5);
  std::vector<float> t(kRows), b(kRows * kCols);
  m.compose(second.t.data(), second.b.data(), first.t.data(), first.b.data(), t.data(), b.data(), {});
  // (A2, b2) after (A1, b1) = (A2 A1, A2 b1 + b2): log-decays add.
  std::vector<double> t64(kRows);
  for (size_t r = 0; r < kRows; ++r) t64[r] = double(first.t[r]) + double(second.t[r]);
  expect_close(t, t64, 1e-6, "compose: transition");
  expect_close(b, apply64(wide(second.t), wide(first.b), wide(second.b), kCols), 1e-6, "compose: offset");
  // The composed map applied once equals the two applied one after the other.
  const auto step = apply64(wide(second.t), apply64(wide(first.t), wide(x.b), wide(first.b), kCols), wide(second.b),
                            kCols);
  std::vector<float> out(kRows * kCols);
  m.apply(t.data(), x.b.data(), b.data(), out.data(), {});
  expect_close(out, step, 1e-5, "compose: applied");
  // compose_transitions alone is compose's transition; in place on the second map (an aggregate) the same values.
  std::vector<float> t_only(kRows);
  m.compose_transitions(second.t.data(), first.t.data(), t_only.data(), {});
  EXPECT_EQ(t_only, t);
  Map agg = second;
  m.compose(agg.t.data(), agg.b.data(), first.t.data(), first.b.data(), agg.t.data(), agg.b.data(), {});
  EXPECT_EQ(agg.t, t);
  EXPECT_EQ(agg.b, b);
}

TEST(RankMap, CompositionIsAssociative) {
  Env e;
  const RankMap m = e.map();
  const Map m1 = random_map(6), m2 = random_map(7), m3 = random_map(8), x = random_map(9);
  // (m3 after m2) after m1, and m3 after (m2 after m1).
  Map left{std::vector<float>(kRows), std::vector<float>(kRows * kCols)}, right = left, m32 = left, m21 = left;
  m.compose(m3.t.data(), m3.b.data(), m2.t.data(), m2.b.data(), m32.t.data(), m32.b.data(), {});
  m.compose(m32.t.data(), m32.b.data(), m1.t.data(), m1.b.data(), left.t.data(), left.b.data(), {});
  m.compose(m2.t.data(), m2.b.data(), m1.t.data(), m1.b.data(), m21.t.data(), m21.b.data(), {});
  m.compose(m3.t.data(), m3.b.data(), m21.t.data(), m21.b.data(), right.t.data(), right.b.data(), {});
  expect_close(left.t, wide(right.t), 1e-6, "associativity: transition");
  expect_close(left.b, wide(right.b), 1e-5, "associativity: offset");
  // Both equal the fp64 fold of the three maps.
  const auto seq = apply64(wide(m3.t), apply64(wide(m2.t), apply64(wide(m1.t), wide(x.b), wide(m1.b), kCols),
                                               wide(m2.b), kCols),
                           wide(m3.b), kCols);
  for (const Map* c : {&left, &right}) {
    std::vector<float> out(kRows * kCols);
    m.apply(c->t.data(), x.b.data(), c->b.data(), out.data(), {});
    expect_close(out, seq, 1e-5, c == &left ? "(m3 m2) m1 applied" : "m3 (m2 m1) applied");
  }
}

TEST(RankMap, IdentityIsExact) {
  Env e;
  const RankMap m = e.map();
  std::vector<float> id(kRows, -7.f), zero(kRows * kCols, 0.f), out(kRows * kCols);
  m.identity(id.data(), {});
  EXPECT_EQ(id, std::vector<float>(kRows, 0.f));  // log-decay 0: exp(0) = 1
  const Map a = random_map(10), x = random_map(11);
  m.apply(id.data(), x.b.data(), zero.data(), out.data(), {});
  EXPECT_EQ(out, x.b);  // x -> x
  // Identity after a map and a map after the identity: the map itself, bit for bit.
  Map after{std::vector<float>(kRows), std::vector<float>(kRows * kCols)}, before = after;
  m.compose(id.data(), zero.data(), a.t.data(), a.b.data(), after.t.data(), after.b.data(), {});
  m.compose(a.t.data(), a.b.data(), id.data(), zero.data(), before.t.data(), before.b.data(), {});
  for (const Map* c : {&after, &before}) {
    EXPECT_EQ(c->t, a.t);
    EXPECT_EQ(c->b, a.b);
  }
}

TEST(RankMap, BlocksOfRowsFoldAsTheWholeState) {
  Env e;
  const RankMap m = e.map();
  const Map a = random_map(12), x = random_map(13);
  std::vector<float> whole(kRows * kCols);
  m.apply(a.t.data(), x.b.data(), a.b.data(), whole.data(), {});
  for (int K = 1; K <= int(kRows) + 1; ++K) {
    EXPECT_EQ(m.splits_into(K), kRows % size_t(K) == 0) << "K " << K;
    if (!m.splits_into(K)) continue;
    std::vector<float> by_blocks(kRows * kCols, -1.f);
    size_t next_row = 0;
    for (int k = 0; k < K; ++k) {
      const RankMapPart p = m.block(k, K);
      EXPECT_EQ(p.map.rows(), kRows / K);
      EXPECT_EQ(p.map.cols(), kCols);
      EXPECT_EQ(p.map.type(), m.type());
      EXPECT_EQ(p.state_offset, next_row * kCols) << "K " << K << " block " << k;  // contiguous, in order
      EXPECT_EQ(p.transition_offset, next_row);
      next_row += p.map.rows();
      p.map.apply(a.t.data() + p.transition_offset, x.b.data() + p.state_offset, a.b.data() + p.state_offset,
                  by_blocks.data() + p.state_offset, {});
    }
    EXPECT_EQ(next_row, kRows);
    EXPECT_EQ(by_blocks, whole) << "K " << K;
  }
  EXPECT_FALSE(m.splits_into(0));
  EXPECT_THROW(m.block(0, 5), Error);   // 5 does not divide 12
  EXPECT_THROW(m.block(3, 3), Error);   // no block 3 of 3
  // Parts: a head group's rows (rows_part) and a share of any size along the block axis, an empty one included.
  const RankMapPart heads = m.rows_part(6, 6);
  EXPECT_EQ(heads.map.rows(), 6u);
  EXPECT_EQ(heads.state_offset, 6 * kCols);
  EXPECT_EQ(heads.transition_offset, 6u);
  const RankMapPart share = m.block_part(5, 4), none = m.block_part(12, 0);
  EXPECT_EQ(share.map.rows(), 4u);
  EXPECT_EQ(share.state_offset, 5 * kCols);
  EXPECT_EQ(share.transition_offset, 5u);
  EXPECT_EQ(none.map.state_elems(), 0u);
  EXPECT_THROW(m.rows_part(8, 5), Error);  // past the state
}

TEST(RankMap, TransitionsScanAsStatesOfOneColumn) {
  // The rail All-Scan composes the transitions of a node's ranks by scanning them as states under the identity: the
  // fold 1 * t1 + t2 is compose_transitions' t2 + t1, bit for bit.
  Env e;
  const RankMap m = e.map();
  const RankMap tm = m.transition_scan_map();
  EXPECT_EQ(tm.kind(), TransitionKind::diagonal_decay);
  EXPECT_EQ(tm.rows(), m.transition_elems());
  EXPECT_EQ(tm.cols(), 1u);
  const Map first = random_map(14), second = random_map(15);
  std::vector<float> id(tm.transition_elems()), folded(kRows), composed(kRows);
  tm.identity(id.data(), {});
  tm.apply(id.data(), first.t.data(), second.t.data(), folded.data(), {});
  m.compose_transitions(second.t.data(), first.t.data(), composed.data(), {});
  EXPECT_EQ(folded, composed);
}

TEST(RankMap, DenseMapHasItsShape) {
  Env e;
  const size_t dk = 6;  // 2 heads of 6 rows, 5 columns
  const RankMap m(*e.kern, *e.dev, RankMapType::dense(dk), kRows, kCols);
  EXPECT_EQ(m.kind(), TransitionKind::dense);
  EXPECT_STREQ(m.type().name(), "dense");
  EXPECT_EQ(m.block_axis(), BlockAxis::cols);  // A mixes a head's rows, never its columns
  EXPECT_EQ(m.transition_elems(), kRows * dk);  // dk x dk a head
  EXPECT_EQ(m.block_extent(), kCols);
  EXPECT_TRUE(m.splits_into(5));
  EXPECT_FALSE(m.splits_into(2));
  EXPECT_FALSE(m.transitions_fold_as_states());
  EXPECT_NE(m.type(), RankMapType::diagonal_decay());
  EXPECT_THROW(m.block_part(0, 1), UsageError);  // columns are strided in a row-major state: block() takes them
  EXPECT_THROW(m.transition_scan_map(), UsageError);
  // Heads stay independent: a head's rows are a part of their own, with its dk x dk transition.
  const RankMapPart head = m.rows_part(dk, dk);
  EXPECT_EQ(head.map.rows(), dk);
  EXPECT_EQ(head.state_offset, dk * kCols);
  EXPECT_EQ(head.transition_offset, dk * dk);
  EXPECT_THROW(m.rows_part(1, dk), Error);  // not whole heads
  EXPECT_THROW(RankMap(*e.kern, *e.dev, RankMapType::dense(5), kRows, kCols), Error);  // 12 rows in heads of 5
  // Without GDN's kernels it has no arithmetic.
  std::vector<float> t(m.transition_elems()), x(m.state_elems());
  EXPECT_THROW(m.require_arithmetic(), UsageError);
  EXPECT_THROW(m.apply(t.data(), x.data(), x.data(), x.data(), {}), UsageError);
  EXPECT_THROW(m.compose_transitions(t.data(), t.data(), t.data(), {}), UsageError);
  EXPECT_THROW(m.identity(t.data(), {}), UsageError);
}

// A dense map (A, b): A [heads, dk, dk] of moderate entries, b a state.
Map random_dense(int seed, size_t dk) {
  Map m = random_map(seed, kRows * dk, 1);  // t holds A
  std::mt19937 gen(seed + 1000);
  std::normal_distribution<float> n;
  for (float& a : m.t) a = 0.4f * n(gen);
  m.b.resize(kRows * kCols);
  for (float& x : m.b) x = n(gen);
  return m;
}
// out = A x + b per head, and A2 A1, in fp64.
std::vector<double> dense_apply64(const std::vector<float>& A, const std::vector<double>& x, const std::vector<float>& b,
                                  size_t dk) {
  std::vector<double> out(x.size());
  for (size_t h = 0; h < kRows / dk; ++h)
    for (size_t r = 0; r < dk; ++r)
      for (size_t c = 0; c < kCols; ++c) {
        double acc = b[(h * dk + r) * kCols + c];
        for (size_t i = 0; i < dk; ++i) acc += double(A[(h * dk + r) * dk + i]) * x[(h * dk + i) * kCols + c];
        out[(h * dk + r) * kCols + c] = acc;
      }
  return out;
}

TEST(RankMap, DenseMapAppliesAndComposesAsMatrices) {
  Env e;
  const std::unique_ptr<GdnKernels> gdn = make_cpu_gdn_kernels();
  const size_t dk = 6;
  const RankMap m(*e.kern, *e.dev, RankMapType::dense(dk), kRows, kCols, gdn.get());
  EXPECT_NO_THROW(m.require_arithmetic());
  const Map first = random_dense(21, dk), second = random_dense(22, dk);
  std::vector<float> x = random_map(23).b, out(x.size());
  m.apply(first.t.data(), x.data(), first.b.data(), out.data(), {});
  expect_close(out, dense_apply64(first.t, wide(x), first.b, dk), 1e-5, "apply");
  // (second after first) x = second(first(x))
  std::vector<float> t(first.t.size()), b(first.b.size()), composed(x.size());
  m.compose(second.t.data(), second.b.data(), first.t.data(), first.b.data(), t.data(), b.data(), {});
  m.apply(t.data(), x.data(), b.data(), composed.data(), {});
  expect_close(composed, dense_apply64(second.t, dense_apply64(first.t, wide(x), first.b, dk), second.b, dk), 1e-5,
               "compose");
  // The identity, and out aliasing x.
  std::vector<float> id(first.t.size()), same = x;
  m.identity(id.data(), {});
  std::vector<float> zero(x.size(), 0.f);
  m.apply(id.data(), same.data(), zero.data(), same.data(), {});
  EXPECT_EQ(same, x);
  // K column blocks of a column-blocked state, each folded alone with the whole transition, are the whole fold.
  for (const int K : {1, 5}) {
    std::vector<float> xb(x.size()), bb(x.size()), ob(x.size()), got(x.size());
    column_blocks_pack(*e.kern, kRows, kCols, K, x.data(), xb.data(), {});
    column_blocks_pack(*e.kern, kRows, kCols, K, first.b.data(), bb.data(), {});
    for (int k = 0; k < K; ++k) {
      const RankMapPart p = m.block(k, K);
      EXPECT_EQ(p.map.cols(), kCols / K);
      EXPECT_EQ(p.transition_offset, 0u);
      p.map.apply(first.t.data(), xb.data() + p.state_offset, bb.data() + p.state_offset, ob.data() + p.state_offset,
                  {});
    }
    column_blocks_unpack(*e.kern, kRows, kCols, K, ob.data(), got.data(), {});
    EXPECT_EQ(got, out) << "K " << K;
  }
}

}  // namespace
}  // namespace spb
