// The fp64 Gated DeltaNet token loop (kernels/gdn/cpu/gdn_reference.h) checked on its own terms: every gradient
// against central differences of the loss sum(o * do) + sum(ht * dht), the rank map against the recurrence from a
// state, and the pure-decay case (beta = 0) in closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/gdn/cpu/gdn_reference.h"

namespace spb {
namespace {

std::vector<double> uniform(size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> x(n);
  for (double& e : x) e = d(rng);
  return x;
}

struct Inputs {
  GdnShape s;
  std::vector<double> q, k, v, g, beta, h0, d_o, dht;
};

// Keys of unit length per token and head (the model L2-normalises them), log gates in (-0.5, 0), betas in (0, 1).
Inputs random_inputs(const GdnShape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in{s};
  in.q = uniform(s.qk_elems(), -1, 1, rng);
  in.k = uniform(s.qk_elems(), -1, 1, rng);
  for (size_t r = 0; r < s.qk_elems() / size_t(s.dk); ++r) {
    double n = 0;
    for (int i = 0; i < s.dk; ++i) n += in.k[r * s.dk + i] * in.k[r * s.dk + i];
    for (int i = 0; i < s.dk; ++i) in.k[r * s.dk + i] /= std::sqrt(n);
  }
  in.v = uniform(s.v_elems(), -1, 1, rng);
  in.g = uniform(s.gate_elems(), -0.5, 0, rng);
  in.beta = uniform(s.gate_elems(), 0.05, 0.95, rng);
  in.h0 = uniform(s.state_elems(), -1, 1, rng);
  in.d_o = uniform(s.v_elems(), -1, 1, rng);
  in.dht = uniform(s.state_elems(), -1, 1, rng);
  return in;
}

double loss_of(const Inputs& in) {
  const GdnReferenceResult r = gdn_reference(in.s, in.q, in.k, in.v, in.g, in.beta, in.h0, {}, {});
  double l = 0;
  for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * in.d_o[i];
  for (size_t i = 0; i < r.ht.size(); ++i) l += r.ht[i] * in.dht[i];
  return l;
}

TEST(GdnReference, GradientsAreTheLossDerivatives) {
  const GdnShape s{2, 9, 2, 4, 3};
  Inputs in = random_inputs(s, 7);
  const GdnReferenceResult r = gdn_reference(s, in.q, in.k, in.v, in.g, in.beta, in.h0, in.d_o, in.dht);
  struct Grad {
    const char* name;
    std::vector<double>* x;
    const std::vector<double>* dx;
  };
  const Grad grads[] = {{"dq", &in.q, &r.dq},   {"dk", &in.k, &r.dk},         {"dv", &in.v, &r.dv},
                        {"dg", &in.g, &r.dg},   {"dbeta", &in.beta, &r.dbeta}, {"dh0", &in.h0, &r.dh0}};
  const double h = 1e-6;
  for (const Grad& gr : grads) {
    ASSERT_EQ(gr.x->size(), gr.dx->size()) << gr.name;
    double worst = 0, scale = 0;
    for (size_t i = 0; i < gr.x->size(); ++i) {
      const double keep = (*gr.x)[i];
      (*gr.x)[i] = keep + h;
      const double up = loss_of(in);
      (*gr.x)[i] = keep - h;
      const double down = loss_of(in);
      (*gr.x)[i] = keep;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - (*gr.dx)[i]));
      scale = std::max(scale, std::abs((*gr.dx)[i]));
    }
    EXPECT_LT(worst, 1e-7 * std::max(1.0, scale)) << gr.name << ": worst difference from the central difference";
  }
}

TEST(GdnReference, TheRankMapIsTheRecurrenceFromAState) {
  const GdnShape s{1, 11, 3, 5, 4};
  const Inputs in = random_inputs(s, 11);
  const GdnReferenceResult r = gdn_reference(s, in.q, in.k, in.v, in.g, in.beta, in.h0, {}, {});
  const GdnRankMap m = gdn_reference_rank_map(s, in.k, in.v, in.g, in.beta);
  ASSERT_EQ(m.A.size(), s.transition_elems());
  for (int h = 0; h < s.H; ++h)
    for (int i = 0; i < s.dk; ++i)
      for (int j = 0; j < s.dv; ++j) {  // ht = A h0 + M
        const size_t st = size_t(h) * s.dk * s.dv, at = size_t(h) * s.dk * s.dk;
        double want = m.M[st + size_t(i) * s.dv + j];
        for (int l = 0; l < s.dk; ++l) want += m.A[at + size_t(i) * s.dk + l] * in.h0[st + size_t(l) * s.dv + j];
        EXPECT_NEAR(r.ht[st + size_t(i) * s.dv + j], want, 1e-12) << "h " << h << " (" << i << ", " << j << ")";
      }
}

// With beta = 0 nothing is written: the state only decays, S_t = exp(g_1 + ... + g_t) h0.
TEST(GdnReference, WithoutBetaTheStateOnlyDecays) {
  const GdnShape s{1, 6, 2, 3, 2};
  Inputs in = random_inputs(s, 3);
  in.beta.assign(in.beta.size(), 0.0);
  const GdnReferenceResult r = gdn_reference(s, in.q, in.k, in.v, in.g, in.beta, in.h0, {}, {});
  for (int h = 0; h < s.H; ++h) {
    double decay = 0;
    for (int t = 0; t < s.T; ++t) decay += in.g[size_t(t) * s.H + h];
    for (int e = 0; e < s.dk * s.dv; ++e) {
      const size_t at = size_t(h) * s.dk * s.dv + size_t(e);
      EXPECT_NEAR(r.ht[at], std::exp(decay) * in.h0[at], 1e-12);
    }
  }
}

}  // namespace
}  // namespace spb
