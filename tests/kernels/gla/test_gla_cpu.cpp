// The fp32 chunked CPU stages against the fp64 token loop (DESIGN §7: relative RMS error < 1e-5), and the identities
// the SP methods rely on: a zero-start pass plus the late-state corrections equals the pass from that state.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "sp/inputs.h"
#include "runtime/error.h"
#include "runtime/stats.h"
#include "kernels/gla/cpu/gla_reference.h"
#include "kernels/gla/gla.h"

namespace spb {
namespace {

// dq, dk, dv, dg of one shape, compared exactly.
struct Grads {
  std::vector<float> dq, dk, dv, dg;
  explicit Grads(const GlaShape& s) : dq(s.qk_elems()), dk(s.qk_elems()), dv(s.v_elems()), dg(s.qk_elems()) {}
  void expect_equal(const Grads& o) const {
    EXPECT_EQ(dq, o.dq) << "dq";
    EXPECT_EQ(dk, o.dk) << "dk";
    EXPECT_EQ(dv, o.dv) << "dv";
    EXPECT_EQ(dg, o.dg) << "dg";
  }
};

struct Case {
  int T;
  GateKind gates;
  bool h0, dht;
};

std::string name_of(const testing::TestParamInfo<Case>& i) {
  return "T" + std::to_string(i.param.T) + (i.param.gates == GateKind::strong ? "_strong" : "_model") +
         (i.param.h0 ? "_h0" : "") + (i.param.dht ? "_dht" : "");
}

class ChunkedVsReference : public testing::TestWithParam<Case> {};

TEST_P(ChunkedVsReference, EveryOutputAndGradient) {
  const Case c = GetParam();
  GlaShape s;
  s.B = 2, s.T = c.T, s.H = 2, s.dk = 12, s.dv = 20;  // dk != dv
  const HostTensors x = generate_inputs(s, 1000 + c.T, c.gates, c.h0, c.dht);
  const GlaReferenceResult ref = gla_reference(s, x.q, x.k, x.v, x.g, x.h0, x.d_o, x.dht);

  auto dev = make_cpu_device();
  auto kern = make_cpu_kernels();
  GlaWorkspace ws(*dev, *kern, s);
  std::vector<float> o(s.v_elems()), ht(s.state_elems()), dq(s.qk_elems()), dk(s.qk_elems()), dv(s.v_elems()),
      dg(s.qk_elems()), dh0(s.state_elems());
  const float* h0 = x.h0.empty() ? nullptr : x.h0.data();
  const float* dht = x.dht.empty() ? nullptr : x.dht.data();
  gla_forward(*kern, ws, x.q.data(), x.k.data(), x.v.data(), x.g.data(), h0, o.data(), ht.data(), {});
  gla_backward(*kern, ws, x.q.data(), x.k.data(), x.v.data(), x.g.data(), h0, x.d_o.data(), dht, dq.data(), dk.data(),
               dv.data(), dg.data(), dh0.data(), {});

  const double tol = 1e-5;
  EXPECT_LT(rel_rms_error(ref.o, o, o.size()), tol) << "o";
  EXPECT_LT(rel_rms_error(ref.ht, ht, ht.size()), tol) << "ht";
  EXPECT_LT(rel_rms_error(ref.dq, dq, dq.size()), tol) << "dq";
  EXPECT_LT(rel_rms_error(ref.dk, dk, dk.size()), tol) << "dk";
  EXPECT_LT(rel_rms_error(ref.dv, dv, dv.size()), tol) << "dv";
  EXPECT_LT(rel_rms_error(ref.dg, dg, dg.size()), tol) << "dg";
  EXPECT_LT(rel_rms_error(ref.dh0, dh0, dh0.size()), tol) << "dh0";
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int T : {1, 63, 64, 65, 200, 1000})
    for (GateKind g : {GateKind::model, GateKind::strong})
      for (bool with : {false, true}) v.push_back({T, g, with, with});
  v.push_back({130, GateKind::model, true, false});
  v.push_back({130, GateKind::model, false, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cpu, ChunkedVsReference, testing::ValuesIn(cases()), name_of);

// o(from h0) == o(from zero) + output_add_initial(h0); hs, ht likewise with states_add_initial(h0).
TEST(LateStateCorrections, EqualThePassFromThatState) {
  GlaShape s;
  s.B = 1, s.T = 150, s.H = 3, s.dk = 8, s.dv = 6;
  const HostTensors x = generate_inputs(s, 7, GateKind::strong, true, true);
  auto kern = make_cpu_kernels();
  auto dev = make_cpu_device();
  GlaWorkspace direct(*dev, *kern, s), late(*dev, *kern, s);
  std::vector<float> o1(s.v_elems()), o2(s.v_elems()), ht1(s.state_elems()), ht2(s.state_elems());
  gla_forward(*kern, direct, x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.h0.data(), o1.data(), ht1.data(), {});
  gla_forward(*kern, late, x.q.data(), x.k.data(), x.v.data(), x.g.data(), nullptr, o2.data(), ht2.data(), {});
  kern->output_add_initial(s, x.q.data(), late.gc.f32(), x.h0.data(), o2.data(), {});
  kern->states_add_initial(s, late.gc.f32(), x.h0.data(), late.hs.get(), ht2.data(), {});
  EXPECT_LT(rel_rms_error(o1, o2, o1.size()), 1e-6);
  EXPECT_LT(rel_rms_error(ht1, ht2, ht1.size()), 1e-6);
  EXPECT_LT(rel_rms_error(direct.hs.f32(), late.hs.f32(), s.chunk_state_elems()), 1e-6);
}

// The CPU stages keep their chunk states in fp32, and the workspace sizes hs and dhs by the kernels' type.
TEST(GlaWorkspace, ChunkStatesInTheKernelsType) {
  GlaShape s;
  s.B = 2, s.T = 130, s.H = 3, s.dk = 8, s.dv = 6;
  auto kern = make_cpu_kernels();
  auto dev = make_cpu_device();
  ASSERT_EQ(kern->chunk_state_type(), DType::f32);
  GlaWorkspace ws(*dev, *kern, s);
  EXPECT_EQ(ws.hs.bytes(), s.chunk_state_elems() * 4);
  EXPECT_EQ(ws.dhs.bytes(), s.chunk_state_elems() * 4);
  EXPECT_EQ(ws.ht.bytes(), s.state_elems() * 4);
}

// Workspaces whose backwards run one after another can share one dhs (the model's blocks): each borrows it (frees
// nothing) and gives the gradients of a workspace with its own; a buffer too small for the chunk states is refused.
TEST(GlaWorkspace, SharedStateGradients) {
  GlaShape s;
  s.B = 1, s.T = 150, s.H = 2, s.dk = 8, s.dv = 12;
  auto kern = make_cpu_kernels();
  auto dev = make_cpu_device();
  const Buffer shared(*dev, chunk_state_bytes(*kern, s));
  std::vector<Grads> got, want;
  {
    GlaWorkspace a(*dev, *kern, s, &shared), b(*dev, *kern, s, &shared);
    EXPECT_EQ(a.dhs.get(), shared.get());
    EXPECT_EQ(b.dhs.get(), shared.get());
    EXPECT_FALSE(a.dhs.owns());
    GlaWorkspace* ws[2] = {&a, &b};
    std::vector<HostTensors> x;
    std::vector<std::vector<float>> ht(2, std::vector<float>(s.state_elems()));
    std::vector<float> o(s.v_elems());
    for (int i = 0; i < 2; ++i) {  // both forwards, then both backwards, as the model's blocks run
      x.push_back(generate_inputs(s, 11 + uint64_t(i), GateKind::model, true, true));
      gla_forward(*kern, *ws[i], x[i].q.data(), x[i].k.data(), x[i].v.data(), x[i].g.data(), x[i].h0.data(),
                  o.data(), ht[i].data(), {});
    }
    for (int i = 1; i >= 0; --i) {
      got.emplace_back(s), want.emplace_back(s);
      GlaWorkspace own(*dev, *kern, s);
      EXPECT_TRUE(own.dhs.owns());
      std::vector<float> o2(s.v_elems()), ht2(s.state_elems());
      gla_forward(*kern, own, x[i].q.data(), x[i].k.data(), x[i].v.data(), x[i].g.data(), x[i].h0.data(), o2.data(),
                  ht2.data(), {});
      for (auto [w, g, h] : {std::tuple(ws[i], &got.back(), &ht[i]), std::tuple(&own, &want.back(), &ht2)})
        gla_backward_saved(*kern, *w, x[i].q.data(), x[i].k.data(), x[i].v.data(), h->data(), x[i].d_o.data(),
                           x[i].dht.data(), g->dq.data(), g->dk.data(), g->dv.data(), g->dg.data(), nullptr, {});
      got.back().expect_equal(want.back());
    }
  }
  EXPECT_NE(shared.get(), nullptr);  // still its owner's
  const Buffer small(*dev, chunk_state_bytes(*kern, s) - 4);
  EXPECT_THROW(GlaWorkspace(*dev, *kern, s, &small), Error);
}

// The All-Scan combine and the Ulysses layout copy, on small integers where the arithmetic is exact.
TEST(StateAlgebra, FoldAddAndCopyAreExact) {
  auto kern = make_cpu_kernels();
  const size_t rows = 3, cols = 4;
  std::vector<float> decay = {0.f, -0.6931471805599453f, -1000.f}, x(rows * cols), y(rows * cols), out(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1), y[i] = float(2 * i);
  kern->state_fold(rows, cols, decay.data(), x.data(), y.data(), out.data(), {});
  for (size_t c = 0; c < cols; ++c) {
    EXPECT_EQ(out[c], x[c] + y[c]);                                 // exp(0) = 1
    EXPECT_NEAR(out[cols + c], 0.5f * x[cols + c] + y[cols + c], 1e-5f);  // exp(-ln 2) = 1/2
    EXPECT_EQ(out[2 * cols + c], y[2 * cols + c]);                  // exp(-1000) = 0
  }
  std::vector<float> sum(3);
  kern->vec_add(3, decay.data(), decay.data(), sum.data(), {});
  EXPECT_EQ(sum[2], -2000.f);

  // Transpose a 2x3 matrix of floats with copy_4d.
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, t(6, 0.f);
  const int64_t dims[4] = {2, 3, 1, 1}, src[4] = {3, 1, 0, 0}, dst[4] = {1, 2, 0, 0};
  kern->copy_4d(t.data(), a.data(), 4, dims, dst, src, {});
  EXPECT_EQ(t, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}


// The backward that reuses the forward's saved states computes exactly what the recomputing one does.
TEST(SavedBackward, EqualsTheRecomputingBackward) {
  GlaShape s;
  s.B = 1, s.T = 150, s.H = 2, s.dk = 8, s.dv = 12;
  const HostTensors x = generate_inputs(s, 5, GateKind::model, true, true);
  auto kern = make_cpu_kernels();
  auto dev = make_cpu_device();
  GlaWorkspace a(*dev, *kern, s), b(*dev, *kern, s);
  std::vector<float> o(s.v_elems()), ht(s.state_elems());
  Grads g1(s), g2(s);
  std::vector<float> dh1(s.state_elems()), dh2(s.state_elems());
  gla_backward(*kern, a, x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.h0.data(), x.d_o.data(), x.dht.data(),
               g1.dq.data(), g1.dk.data(), g1.dv.data(), g1.dg.data(), dh1.data(), {});
  gla_forward(*kern, b, x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.h0.data(), o.data(), ht.data(), {});
  gla_backward_saved(*kern, b, x.q.data(), x.k.data(), x.v.data(), ht.data(), x.d_o.data(), x.dht.data(),
                     g2.dq.data(), g2.dk.data(), g2.dv.data(), g2.dg.data(), dh2.data(), {});
  g1.expect_equal(g2);
  EXPECT_EQ(dh1, dh2);
}

// chunk_grads at a row stride (GlaShape::grad_ld): dq, dk and dv side by side in rows of ld elements, as the model's
// dproj holds them; the same numbers as the dense call, and the pad columns after them left as they were. B = 2:
// the second sequence starts T rows down.
TEST(GradsAtARowStride, EqualTheDenseGradients) {
  GlaShape s;
  s.B = 2, s.T = 150, s.H = 2, s.dk = 8, s.dv = 12;
  const HostTensors x = generate_inputs(s, 6, GateKind::model, true, true);
  auto kern = make_cpu_kernels();
  auto dev = make_cpu_device();
  GlaWorkspace ws(*dev, *kern, s);
  std::vector<float> o(s.v_elems()), ht(s.state_elems());
  Grads dense(s);
  gla_forward(*kern, ws, x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.h0.data(), o.data(), ht.data(), {});
  gla_backward_saved(*kern, ws, x.q.data(), x.k.data(), x.v.data(), ht.data(), x.d_o.data(), x.dht.data(),
                     dense.dq.data(), dense.dk.data(), dense.dv.data(), dense.dg.data(), nullptr, {});
  const int qw = s.H * s.dk, vw = s.H * s.dv, ld = 2 * qw + vw + 5;
  const size_t rows = size_t(s.B) * s.T;
  std::vector<float> m(rows * ld, -7.f), dg(s.qk_elems());
  gla_backward_saved(*kern, ws, x.q.data(), x.k.data(), x.v.data(), ht.data(), x.d_o.data(), x.dht.data(), m.data(),
                     m.data() + qw, m.data() + 2 * qw, dg.data(), nullptr, {}, ld);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = m.data() + r * ld;
    ASSERT_EQ(std::vector<float>(row, row + qw), std::vector<float>(&dense.dq[r * qw], &dense.dq[(r + 1) * qw]))
        << "dq, row " << r;
    ASSERT_EQ(std::vector<float>(row + qw, row + 2 * qw),
              std::vector<float>(&dense.dk[r * qw], &dense.dk[(r + 1) * qw])) << "dk, row " << r;
    ASSERT_EQ(std::vector<float>(row + 2 * qw, row + 2 * qw + vw),
              std::vector<float>(&dense.dv[r * vw], &dense.dv[(r + 1) * vw])) << "dv, row " << r;
    ASSERT_EQ(std::vector<float>(row + 2 * qw + vw, row + ld), std::vector<float>(5, -7.f)) << "pad, row " << r;
  }
  EXPECT_EQ(dg, dense.dg);
}

// Every stage on ranges of (b, h) pairs (GlaShape::pair_range, as zeco's head groups run them): the whole shape's
// results for those pairs, bit for bit, and nothing written outside them. B = 2, H = 3: 6 pairs in the ranges
// [4, 6), [1, 4) (across the batch boundary) and [0, 1), in that order.
struct StageOutputs {
  std::vector<float> gc, lambda, fin, hs, ht, o, dfin, dhs, dh0, dq, dk, dv, dg;
  explicit StageOutputs(const GlaShape& s) {
    const float nan = std::nanf("");
    for (auto* t : {&gc, &dq, &dk, &dg}) t->assign(s.qk_elems(), nan);
    for (auto* t : {&o, &dv}) t->assign(s.v_elems(), nan);
    for (auto* t : {&fin, &ht, &dfin, &dh0}) t->assign(s.state_elems(), nan);
    for (auto* t : {&hs, &dhs}) t->assign(s.chunk_state_elems(), nan);
    lambda.assign(s.state_rows(), nan);
  }
  // name, tensor, elements per (b, h) pair and token (0: the pair's elements are one contiguous block)
  std::vector<std::tuple<const char*, const std::vector<float>*, int>> all(const GlaShape& s) const {
    return {{"gc", &gc, s.dk},   {"lambda", &lambda, 0}, {"fin", &fin, 0}, {"hs", &hs, 0}, {"ht", &ht, 0},
            {"o", &o, s.dv},     {"dfin", &dfin, 0},     {"dhs", &dhs, 0}, {"dh0", &dh0, 0}, {"dq", &dq, s.dk},
            {"dk", &dk, s.dk},   {"dv", &dv, s.dv},      {"dg", &dg, s.dk}};
  }
};

void run_stages(GlaKernels& kern, const std::vector<GlaShape>& parts, const HostTensors& x, StageOutputs& r) {
  for (const GlaShape& p : parts) {
    kern.chunk_cumsum(p, x.g.data(), r.gc.data(), r.lambda.data(), {});
    std::vector<float> gc2 = r.gc;  // chunk_final_state may use its gc as scratch
    kern.chunk_final_state(p, x.k.data(), x.v.data(), x.g.data(), gc2.data(), r.fin.data(), nullptr, {});
    kern.chunk_states_fwd(p, x.k.data(), x.v.data(), r.gc.data(), nullptr, r.hs.data(), r.ht.data(), {});
    kern.chunk_output(p, x.q.data(), x.k.data(), x.v.data(), r.gc.data(), r.hs.data(), r.o.data(), {});
    kern.output_add_initial(p, x.q.data(), r.gc.data(), x.h0.data(), r.o.data(), {});
    kern.states_add_initial(p, r.gc.data(), x.h0.data(), r.hs.data(), r.ht.data(), {});
    kern.chunk_initial_dstate(p, x.q.data(), x.d_o.data(), x.g.data(), r.gc.data(), r.dfin.data(), {});
    kern.chunk_states_bwd(p, x.q.data(), x.d_o.data(), r.gc.data(), x.dht.data(), r.dhs.data(), r.dh0.data(), {});
    kern.chunk_grads(p, x.q.data(), x.k.data(), x.v.data(), r.gc.data(), r.hs.data(), r.ht.data(), r.dhs.data(),
                     x.d_o.data(), r.dq.data(), r.dk.data(), r.dv.data(), r.dg.data(), {});
  }
}

TEST(PairRanges, EqualTheWholeShapePairByPair) {
  GlaShape s;
  s.B = 2, s.T = 150, s.H = 3, s.dk = 8, s.dv = 6;
  const HostTensors x = generate_inputs(s, 11, GateKind::strong, true, true);
  auto kern = make_cpu_kernels();
  StageOutputs whole(s), parts(s), middle(s);
  run_stages(*kern, {s}, x, whole);
  run_stages(*kern, {s.pair_range(4, 2), s.pair_range(1, 3), s.pair_range(0, 1)}, x, parts);
  run_stages(*kern, {s.pair_range(1, 3)}, x, middle);
  const auto w = whole.all(s), p = parts.all(s), m = middle.all(s);
  for (size_t i = 0; i < w.size(); ++i) {
    const auto& [name, wt, per_token] = w[i];
    SCOPED_TRACE(name);
    EXPECT_EQ(*wt, *std::get<1>(p[i]));
    // pair of element e: [B, T, H, D] tensors by (b, h); the others are [B*H, ...] blocks of equal size
    const size_t n = wt->size(), block = n / size_t(s.B * s.H);
    auto pair_of = [&](size_t e) {
      if (per_token == 0) return int(e / block);
      return int(e / (size_t(s.T) * s.H * per_token)) * s.H + int(e / per_token % s.H);
    };
    size_t wrong = 0;
    for (size_t e = 0; e < n; ++e) {
      const float got = (*std::get<1>(m[i]))[e];
      const bool mine = pair_of(e) >= 1 && pair_of(e) < 4;
      wrong += mine ? !(got == (*wt)[e]) : !std::isnan(got);
    }
    EXPECT_EQ(wrong, 0u) << "elements wrong for pairs [1, 4) alone, or written outside them";
  }
}
}  // namespace
}  // namespace spb
