// Every layer of the model (model/cpu/model_cpu_ops.h, the code the CPU ranks run) against central finite differences
// of its own forward, in fp64 at tiny sizes: for a random output weighting w, d(sum w * f(x))/dx from the backward must
// match (F(x + h e) - F(x - h e)) / 2h for every input element. fp64 and h = 1e-6 leave ~1e-9 of truncation and
// rounding error, so a tolerance of 1e-6 relative to the gradient's norm cannot be met by a wrong formula.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "model/cpu/model_cpu_ops.h"

namespace spb::cpu_ops {
namespace {

using Vec = std::vector<double>;

Vec randn(size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (double& x : v) x = d(gen);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks analytic (the backward's gradient of F w.r.t. x) against central differences of F at x.
void expect_matches_fd(const std::function<double(const Vec&)>& F, Vec x, const Vec& analytic, const char* what) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const double h = 1e-6;
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = F(x);
    x[i] = x0 - h;
    const double fm = F(x);
    x[i] = x0;
    const double fd = (fp - fm) / (2 * h);
    num += (fd - analytic[i]) * (fd - analytic[i]);
    den += fd * fd;
  }
  ASSERT_GT(den, 0) << what << ": the finite differences are all zero, the check would prove nothing";
  EXPECT_LT(std::sqrt(num / den), 1e-6) << what;
}

constexpr int kRows = 5, kD = 7;

TEST(ModelLayers, RmsNorm) {
  const Vec x0 = randn(kRows * kD, 1), w0 = randn(kD, 2), wy = randn(kRows * kD, 3);
  const double eps = 1e-6;
  auto loss = [&](const Vec& x, const Vec& w) {
    Vec y(x.size()), r(kRows);
    rmsnorm_fwd(kRows, kD, x.data(), w.data(), eps, y.data(), r.data());
    return dot(y, wy);
  };
  Vec y(x0.size()), r(kRows), dx(x0.size(), 0.5), dw(kD, 0.25);
  rmsnorm_fwd(kRows, kD, x0.data(), w0.data(), eps, y.data(), r.data());
  rmsnorm_bwd(kRows, kD, x0.data(), w0.data(), r.data(), wy.data(), dx.data(), dw.data(), true);
  for (double& v : dx) v -= 0.5;  // dx and dw accumulate into what was there
  for (double& v : dw) v -= 0.25;
  expect_matches_fd([&](const Vec& x) { return loss(x, w0); }, x0, dx, "rmsnorm dx");
  expect_matches_fd([&](const Vec& w) { return loss(x0, w); }, w0, dw, "rmsnorm dw");
}

TEST(ModelLayers, GatedRmsNorm) {
  const Vec o0 = randn(kRows * kD, 4), z0 = randn(kRows * kD, 5, 2.0), w0 = randn(kD, 6), wy = randn(kRows * kD, 7);
  const double eps = 1e-6;
  auto loss = [&](const Vec& o, const Vec& z, const Vec& w) {
    Vec y(o.size()), r(kRows);
    rmsnorm_fwd(kRows, kD, o.data(), w.data(), eps, y.data(), r.data(), z.data());
    return dot(y, wy);
  };
  Vec y(o0.size()), r(kRows), d_o(o0.size()), dz(o0.size()), dw(kD, 0.0);
  rmsnorm_fwd(kRows, kD, o0.data(), w0.data(), eps, y.data(), r.data(), z0.data());
  rmsnorm_bwd(kRows, kD, o0.data(), w0.data(), r.data(), wy.data(), d_o.data(), dw.data(), false, z0.data(),
              dz.data());
  expect_matches_fd([&](const Vec& o) { return loss(o, z0, w0); }, o0, d_o, "gated rmsnorm do");
  expect_matches_fd([&](const Vec& z) { return loss(o0, z, w0); }, z0, dz, "gated rmsnorm dz");
  expect_matches_fd([&](const Vec& w) { return loss(o0, z0, w); }, w0, dw, "gated rmsnorm dw");
}

TEST(ModelLayers, ForgetGate) {
  const Vec pre0 = randn(kRows * kD, 8, 3.0), b0 = randn(kD, 9), wy = randn(kRows * kD, 10);
  auto loss = [&](const Vec& pre, const Vec& b) {
    Vec g(pre.size());
    forget_gate_fwd(kRows, kD, pre.data(), b.data(), 16.0, g.data());
    for (double v : g) EXPECT_LE(v, 0.0);  // a log forget gate
    return dot(g, wy);
  };
  Vec dpre(pre0.size()), db(kD, 0.0);
  forget_gate_bwd(kRows, kD, pre0.data(), b0.data(), 16.0, wy.data(), dpre.data(), db.data());
  expect_matches_fd([&](const Vec& pre) { return loss(pre, b0); }, pre0, dpre, "forget gate dpre");
  expect_matches_fd([&](const Vec& b) { return loss(pre0, b); }, b0, db, "forget gate dbias");
}

TEST(ModelLayers, SwiGlu) {
  // ab [rows, 2F]: a row's a (scaled wider, into silu's curved part) then its b.
  const int F = kD;
  const size_t n = size_t(kRows) * F;
  Vec ab0 = randn(2 * n, 12), wy = randn(n, 13);
  const Vec a_wide = randn(n, 11, 2.0);
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < F; ++i) ab0[size_t(r) * 2 * F + i] = a_wide[size_t(r) * F + i];
  auto loss = [&](const Vec& ab) {
    Vec y(n);
    swiglu_fwd(kRows, F, ab.data(), y.data());
    return dot(y, wy);
  };
  Vec dab(2 * n);
  swiglu_bwd(kRows, F, ab0.data(), wy.data(), dab.data());
  expect_matches_fd(loss, ab0, dab, "swiglu d(a|b)");
}

// The backward that also writes y (the model keeps no SwiGLU output per block; the down product's weight gradient
// reads the one SwiGLU's backward makes): the same (da | db) as without it, and y exactly as the forward writes it,
// in float (what the CPU ranks run) and double.
template <class T>
void expect_swiglu_bwd_remakes_y() {
  const int F = 37, rows = 11;
  const size_t n = size_t(rows) * F;
  const Vec ab64 = randn(2 * n, 15, 3.0), dy64 = randn(n, 16);
  const std::vector<T> ab(ab64.begin(), ab64.end()), dy(dy64.begin(), dy64.end());
  std::vector<T> y(n), dab(2 * n), y2(n, T(NAN)), dab2(2 * n, T(NAN));
  swiglu_fwd(rows, F, ab.data(), y.data());
  swiglu_bwd(rows, F, ab.data(), dy.data(), dab.data());
  swiglu_bwd(rows, F, ab.data(), dy.data(), dab2.data(), y2.data());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(y2[i], y[i]) << "y at " << i;
  for (size_t i = 0; i < 2 * n; ++i) ASSERT_EQ(dab2[i], dab[i]) << "dab at " << i;
}

TEST(ModelLayers, SwiGluBackwardMakesTheForwardsOutput) {
  expect_swiglu_bwd_remakes_y<float>();
  expect_swiglu_bwd_remakes_y<double>();
}

TEST(ModelLayers, CrossEntropy) {
  const int V = 9;
  const Vec l0 = randn(kRows * V, 14, 3.0);
  const std::vector<int32_t> targets = {0, 8, 3, 3, 5};
  const double scale = 1.0 / kRows;
  auto loss = [&](const Vec& l) {
    Vec per(kRows), d(l.size());
    cross_entropy(kRows, V, l.data(), targets.data(), scale, per.data(), d.data());
    double s = 0;
    for (double v : per) s += v;
    return s * scale;  // the mean, as grad_scale = 1 / rows says
  };
  Vec per(kRows), d(l0.size());
  cross_entropy(kRows, V, l0.data(), targets.data(), scale, per.data(), d.data());
  for (int i = 0; i < kRows; ++i) {  // the loss itself: logsumexp - the target's logit
    double s = 0;
    for (int j = 0; j < V; ++j) s += std::exp(l0[size_t(i) * V + j]);
    EXPECT_NEAR(per[size_t(i)], std::log(s) - l0[size_t(i) * V + targets[size_t(i)]], 1e-12);
  }
  expect_matches_fd(loss, l0, d, "cross-entropy dlogits");
}

TEST(ModelLayers, Embedding) {
  const int V = 6;
  const Vec table0 = randn(V * kD, 15), wy = randn(kRows * kD, 16);
  const std::vector<int32_t> tokens = {2, 5, 2, 0, 2};  // repeated ids accumulate
  auto loss = [&](const Vec& t) {
    Vec x(kRows * kD);
    embedding_fwd(kRows, kD, tokens.data(), t.data(), x.data());
    return dot(x, wy);
  };
  Vec dt(table0.size(), 0.0);
  embedding_bwd(kRows, kD, tokens.data(), wy.data(), dt.data());
  expect_matches_fd(loss, table0, dt, "embedding dtable");
}

TEST(ModelLayers, GemmEveryTransposeAgainstLoops) {
  const int M = 5, N = 4, K = 3;
  const Vec a = randn(M * K, 17), b = randn(K * N, 18), c0 = randn(M * N, 19);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (double beta : {0.0, 1.0}) {
        // The operands stored transposed where asked: op(A)[i][k] is the same number in every case.
        Vec A(a.size()), B(b.size());
        for (int i = 0; i < M; ++i)
          for (int k = 0; k < K; ++k) A[ta ? size_t(k) * M + i : size_t(i) * K + k] = a[size_t(i) * K + k];
        for (int k = 0; k < K; ++k)
          for (int j = 0; j < N; ++j) B[tb ? size_t(j) * K + k : size_t(k) * N + j] = b[size_t(k) * N + j];
        Vec c = c0;
        gemm(ta, tb, M, N, K, 2.0, A.data(), B.data(), beta, c.data());
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) {
            double s = 0;
            for (int k = 0; k < K; ++k) s += a[size_t(i) * K + k] * b[size_t(k) * N + j];
            EXPECT_NEAR(c[size_t(i) * N + j], 2.0 * s + beta * c0[size_t(i) * N + j], 1e-12)
                << "ta " << ta << " tb " << tb << " beta " << beta;
          }
      }
}

TEST(ModelLayers, AdamWMatchesItsFormula) {
  // Two steps by hand: m, v, the bias corrections and the decoupled decay.
  Vec p = {1.0, -2.0}, m = {0, 0}, v = {0, 0};
  const Vec g1 = {0.5, -1.0}, g2 = {0.25, 3.0};
  const double lr = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  Vec want = p, mw = m, vw = v;
  for (int step = 1; step <= 2; ++step) {
    const Vec& g = step == 1 ? g1 : g2;
    adamw(2, p.data(), g.data(), m.data(), v.data(), lr, b1, b2, eps, wd, step);
    for (int i = 0; i < 2; ++i) {
      mw[size_t(i)] = b1 * mw[size_t(i)] + (1 - b1) * g[size_t(i)];
      vw[size_t(i)] = b2 * vw[size_t(i)] + (1 - b2) * g[size_t(i)] * g[size_t(i)];
      const double mh = mw[size_t(i)] / (1 - std::pow(b1, step)), vh = vw[size_t(i)] / (1 - std::pow(b2, step));
      want[size_t(i)] = want[size_t(i)] * (1 - lr * wd) - lr * mh / (std::sqrt(vh) + eps);
    }
  }
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(p[size_t(i)], want[size_t(i)], 1e-12);
}

}  // namespace
}  // namespace spb::cpu_ops
