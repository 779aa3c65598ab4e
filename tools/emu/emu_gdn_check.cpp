// Runs the CUDA Gated DeltaNet kernels (kernels/gdn/cuda/) under the CPU emulation (cuda_emu.h) on small shapes and
// checks every stage like tests/kernels/gdn/test_gdn_cuda.cpp does: against the fp64 token loop on the same
// bf16-rounded inputs (o < 4e-3, the rest < 5e-3) and the dense ops against fp64 products. Built and run by
// emu_gdn_check.sh; a development tool, not a CI test (one OS thread per CUDA thread: slow, small sizes only).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/gdn/cpu/gdn_reference.h"
#include "kernels/gdn/cuda/gdn_cuda.h"
#include "runtime/error.h"

using namespace spb;

namespace {

int failures = 0;

double rel_rms(const std::vector<double>& ref, const std::vector<float>& x) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) num += (ref[i] - x[i]) * (ref[i] - x[i]), den += ref[i] * ref[i];
  const double e = std::sqrt(num / std::max(den, 1e-300));
  return std::isnan(e) ? 1e30 : e;
}
void expect_lt(double e, double bar, const std::string& what) {
  if (!(e < bar)) ++failures, std::printf("  FAIL %s: %.3e (bar %.0e)\n", what.c_str(), e, bar);
}
float round_bf(float x) { return __bfloat162float(__float2bfloat16(x)); }
std::vector<__nv_bfloat16> to_bf(const std::vector<float>& x) {
  std::vector<__nv_bfloat16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16(x[i]);
  return y;
}
std::vector<float> from_bf(const std::vector<__nv_bfloat16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __bfloat162float(x[i]);
  return y;
}
std::vector<double> wide(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }
// test_gdn_cuda.cpp's check of A: the relative error, or where the reference underflows fp32 (RMS < 1e-30) that every
// element is under 1e-28.
double transition_error(const std::vector<double>& ref, const std::vector<float>& x) {
  double ss = 0;
  for (double r : ref) ss += r * r;
  if (std::sqrt(ss / std::max<size_t>(ref.size(), 1)) >= 1e-30) return rel_rms(ref, x);
  for (float v : x)
    if (!(std::fabs(v) < 1e-28f)) return 1e30;
  return 0.0;
}
template <class T>
std::vector<T> poisoned(size_t n) {
  std::vector<T> x(n);
  std::memset(x.data(), 0xFF, n * sizeof(T));
  return x;
}

// test_gdn_chunked.cpp's inputs (unit keys, log gates in (-0.3, 0) or a model's -softplus(u), u in (-6, 1), betas in
// (0.05, 0.95)), the activations rounded to bf16.
struct Inputs {
  std::vector<float> q, k, v, g, beta, d_o, h0, dht;
  Inputs(const GdnShape& s, uint64_t seed, bool model_gates, bool with_h0, bool with_dht) {
    std::mt19937_64 rng{seed};
    std::uniform_real_distribution<float> u(-1, 1), gate(-0.3f, 0.0f), b(0.05f, 0.95f), pre(-6.0f, 1.0f);
    q.resize(s.qk_elems()), k.resize(s.qk_elems()), v.resize(s.v_elems()), d_o.resize(s.v_elems());
    g.resize(s.gate_elems()), beta.resize(s.gate_elems());
    h0.resize(with_h0 ? s.state_elems() : 0), dht.resize(with_dht ? s.state_elems() : 0);
    for (auto* x : {&q, &v, &d_o, &h0, &dht})
      for (float& e : *x) e = u(rng);
    for (float& x : g) x = model_gates ? -std::log1p(std::exp(pre(rng))) : gate(rng);
    for (float& x : beta) x = b(rng);
    for (size_t r = 0; r < s.qk_elems() / size_t(s.dk); ++r) {
      float n = 0;
      for (int i = 0; i < s.dk; ++i) k[r * s.dk + i] = u(rng), n += k[r * s.dk + i] * k[r * s.dk + i];
      for (int i = 0; i < s.dk; ++i) k[r * s.dk + i] /= std::sqrt(n);
    }
    for (auto* x : {&q, &k, &v, &d_o})
      for (float& e : *x) e = round_bf(e);
  }
};

void composite(int B, int T, int H, int dk, int dv, bool model_gates, bool with_h0, bool with_dht,
               float gate_scale = 1.0f) {
  const GdnShape s{B, T, H, dk, dv};
  Inputs x(s, 100 + T * 7 + dk + dv + with_h0, model_gates, with_h0, with_dht);
  for (float& e : x.g) e *= gate_scale / (gate_scale == 1.0f ? 1.0f : 0.3f);  // uniform (-0.3, 0) -> (-scale, 0)
  const GdnReferenceResult ref = gdn_reference(s, wide(x.q), wide(x.k), wide(x.v), wide(x.g), wide(x.beta),
                                               wide(x.h0), wide(x.d_o), wide(x.dht));
  const GdnRankMap map = gdn_reference_rank_map(s, wide(x.k), wide(x.v), wide(x.g), wide(x.beta));
  const std::vector<double> Dref =
      gdn_reference(s, wide(x.q), wide(x.k), wide(x.v), wide(x.g), wide(x.beta), {}, wide(x.d_o), {}).dh0;

  auto kern = make_cuda_gdn_kernels();
  auto q = to_bf(x.q), k = to_bf(x.k), v = to_bf(x.v), d_o = to_bf(x.d_o);
  auto o = poisoned<__nv_bfloat16>(s.v_elems()), dq = poisoned<__nv_bfloat16>(s.qk_elems());
  auto dk_ = poisoned<__nv_bfloat16>(s.qk_elems()), dv_ = poisoned<__nv_bfloat16>(s.v_elems());
  auto ht = poisoned<float>(s.state_elems()), dh0 = poisoned<float>(s.state_elems());
  auto dg = poisoned<float>(s.gate_elems()), dbeta = poisoned<float>(s.gate_elems());
  auto A = poisoned<float>(s.transition_elems()), M = poisoned<float>(s.state_elems());
  auto D = poisoned<float>(s.state_elems());
  const float* h0 = with_h0 ? x.h0.data() : nullptr;
  const float* dht = with_dht ? x.dht.data() : nullptr;
  kern->forward(s, q.data(), k.data(), v.data(), x.g.data(), x.beta.data(), h0, o.data(), ht.data(), {});
  kern->backward(s, q.data(), k.data(), v.data(), x.g.data(), x.beta.data(), h0, d_o.data(), dht, dq.data(),
                 dk_.data(), dv_.data(), dg.data(), dbeta.data(), dh0.data(), {});
  kern->rank_map(s, k.data(), v.data(), x.g.data(), x.beta.data(), A.data(), M.data(), {});
  kern->initial_dstate(s, q.data(), k.data(), x.g.data(), x.beta.data(), d_o.data(), D.data(), {});
  const double eo = rel_rms(ref.o, from_bf(o)), eht = rel_rms(ref.ht, ht), edq = rel_rms(ref.dq, from_bf(dq));
  const double edk = rel_rms(ref.dk, from_bf(dk_)), edv = rel_rms(ref.dv, from_bf(dv_)), edg = rel_rms(ref.dg, dg);
  const double edb = rel_rms(ref.dbeta, dbeta), edh0 = rel_rms(ref.dh0, dh0), eA = transition_error(map.A, A);
  const double eM = rel_rms(map.M, M), eD = rel_rms(Dref, D);
  std::printf("B%d T%d H%d dk%d dv%d %s%s%s%s: o %.2e ht %.2e dq %.2e dk %.2e dv %.2e dg %.2e dbeta %.2e dh0 %.2e "
              "A %.2e M %.2e D %.2e\n",
              B, T, H, dk, dv, model_gates ? "model" : "uniform", gate_scale != 1.0f ? " (weak)" : "",
              with_h0 ? " h0" : "", with_dht ? " dht" : "", eo,
              eht, edq, edk, edv, edg, edb, edh0, eA, eM, eD);
  std::fflush(stdout);
  expect_lt(eo, 4e-3, "o");
  for (auto [e, what] : {std::pair{eht, "ht"}, {edq, "dq"}, {edk, "dk"}, {edv, "dv"}, {edg, "dg"}, {edb, "dbeta"},
                         {edh0, "dh0"}, {eA, "A"}, {eM, "M"}, {eD, "D"}})
    expect_lt(e, 5e-3, what);
}

// The dense ops against fp64 products, out aliasing an input.
void dense(int heads, int n, int cols) {
  std::mt19937_64 rng{uint64_t(heads * 1000 + n * 10 + cols)};
  std::uniform_real_distribution<float> u(-1, 1);
  auto fill = [&](size_t m) {
    std::vector<float> x(m);
    for (float& e : x) e = u(rng);
    return x;
  };
  const size_t nn = size_t(n) * n, nc = size_t(n) * cols;
  const std::vector<float> A = fill(heads * nn), A1 = fill(heads * nn), X = fill(heads * nc), Bv = fill(heads * nc);
  std::vector<double> apply(heads * nc), prod(heads * nn), tr(heads * nn), id(heads * nn);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < cols; ++j) {
        double acc = Bv[h * nc + i * cols + j];
        for (int x = 0; x < n; ++x) acc += double(A[h * nn + i * n + x]) * X[h * nc + x * cols + j];
        apply[h * nc + i * cols + j] = acc;
      }
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int x = 0; x < n; ++x) acc += double(A[h * nn + i * n + x]) * A1[h * nn + x * n + j];
        prod[h * nn + i * n + j] = acc;
        tr[h * nn + i * n + j] = A[h * nn + j * n + i];
        id[h * nn + i * n + j] = i == j;
      }
    }
  auto kern = make_cuda_gdn_kernels();
  std::vector<float> out = X;  // out aliases x
  kern->dense_apply(heads, n, cols, A.data(), out.data(), Bv.data(), out.data(), {});
  std::vector<float> p = A1;  // out aliases A1
  kern->dense_product(heads, n, A.data(), p.data(), p.data(), {});
  std::vector<float> t = A;  // in place
  kern->dense_transpose(heads, n, t.data(), t.data(), {});
  auto i = poisoned<float>(heads * nn);
  kern->dense_identity(heads, n, i.data(), {});
  const double ea = rel_rms(apply, out), ep = rel_rms(prod, p), et = rel_rms(tr, t), ei = rel_rms(id, i);
  std::printf("dense heads %d n %d cols %d: apply %.2e product %.2e transpose %.2e identity %.2e\n", heads, n, cols,
              ea, ep, et, ei);
  for (auto [e, what] : {std::pair{ea, "apply"}, {ep, "product"}, {et, "transpose"}, {ei, "identity"}})
    expect_lt(e, 1e-6, what);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "quick";
  const bool long_only = argc > 1 && std::string(argv[1]) == "long";  // 16 chunks: how the errors grow over chunks
  try {
    bool refused = false;
    try {
      make_cuda_gdn_kernels()->forward(GdnShape{1, 8, 1, 24, 32}, nullptr, nullptr, nullptr, nullptr, nullptr,
                                       nullptr, nullptr, nullptr, {});
    } catch (const UsageError&) {
      refused = true;
    }
    if (!refused) ++failures, std::printf("  FAIL dk 24 was not refused\n");
    if (long_only) {
      composite(1, 1000, 1, 32, 32, true, true, true);
      composite(1, 1000, 1, 32, 32, false, true, true, 0.02f);  // weak gates: A within fp32's range
      std::printf(failures ? "emu_gdn_check: %d FAILED\n" : "emu_gdn_check: all passed\n", failures);
      return failures ? 1 : 0;
    }
    dense(2, 32, 48);
    dense(1, 20, 5);
    composite(1, 1, 2, 16, 16, true, true, true);
    composite(1, 64, 1, 16, 16, false, false, false);
    composite(1, 65, 1, 32, 32, false, false, true);
    composite(1, 100, 2, 32, 32, false, true, true);
    composite(2, 70, 1, 32, 16, true, false, true);
    composite(1, 150, 1, 16, 48, true, true, false);
    if (!quick) {
      composite(1, 130, 2, 64, 64, true, true, true);
      composite(1, 200, 1, 128, 128, false, true, true);
      composite(1, 129, 1, 64, 128, true, false, false);
    }
  } catch (const std::exception& e) {
    std::printf("exception: %s\n", e.what());
    return 1;
  }
  std::printf(failures ? "emu_gdn_check: %d FAILED\n" : "emu_gdn_check: all passed\n", failures);
  return failures ? 1 : 0;
}
