// Gated DeltaNet's fp32 chunked stages (kernels/gdn/cpu/gdn_chunked.h) against the fp64 token loop: the forward, the
// backward and a rank's map, on lengths that are and are not multiples of the chunk, with and without the states at
// the ends, relative RMS within GLA's CPU bar (1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/gdn/cpu/gdn_chunked.h"
#include "kernels/gdn/cpu/gdn_reference.h"

namespace spb {
namespace {

double rel_rms(const std::vector<double>& ref, const std::vector<float>& x) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) num += (ref[i] - x[i]) * (ref[i] - x[i]), den += ref[i] * ref[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<double> wide(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// Random inputs: unit keys per token and head (the model L2-normalises them), log gates in (-0.3, 0), betas in
// (0.05, 0.95), the rest in (-1, 1); h0 and dht only `with_states`.
struct Inputs {
  std::vector<float> q, k, v, g, beta, d_o, h0, dht;
  Inputs(const GdnShape& s, uint64_t seed, bool with_states) {
    std::mt19937_64 rng{seed};
    std::uniform_real_distribution<float> u(-1, 1), gate(-0.3f, 0.0f), b(0.05f, 0.95f);
    q.resize(s.qk_elems()), k.resize(s.qk_elems()), v.resize(s.v_elems()), d_o.resize(s.v_elems());
    g.resize(s.gate_elems()), beta.resize(s.gate_elems());
    h0.resize(with_states ? s.state_elems() : 0), dht.resize(h0.size());
    for (auto* x : {&q, &v, &d_o, &h0, &dht})
      for (float& e : *x) e = u(rng);
    for (float& x : g) x = gate(rng);
    for (float& x : beta) x = b(rng);
    for (size_t r = 0; r < s.qk_elems() / size_t(s.dk); ++r) {
      float n = 0;
      for (int i = 0; i < s.dk; ++i) k[r * s.dk + i] = u(rng), n += k[r * s.dk + i] * k[r * s.dk + i];
      for (int i = 0; i < s.dk; ++i) k[r * s.dk + i] /= std::sqrt(n);
    }
  }
};

TEST(GdnChunked, ForwardMatchesTheTokenLoop) {
  for (const int T : {1, 63, 64, 150, 256})
    for (const bool with_h0 : {false, true}) {
      const GdnShape s{2, T, 3, 16, 8};
      const Inputs in(s, uint64_t(T) * 2 + with_h0, with_h0);
      const GdnReferenceResult ref =
          gdn_reference(s, wide(in.q), wide(in.k), wide(in.v), wide(in.g), wide(in.beta), wide(in.h0), {}, {});
      const GdnForward got = gdn_chunked_forward(s, in.q, in.k, in.v, in.g, in.beta, in.h0);
      const std::string what = "T " + std::to_string(T) + (with_h0 ? " with h0" : "");
      EXPECT_LT(rel_rms(ref.o, got.o), 1e-5) << what << ": o";
      EXPECT_LT(rel_rms(ref.ht, got.ht), 1e-5) << what << ": ht";
    }
}

TEST(GdnChunked, BackwardMatchesTheTokenLoop) {
  for (const int T : {1, 64, 150})
    for (const bool with_states : {false, true}) {
      const GdnShape s{1, T, 2, 8, 4};
      const Inputs in(s, uint64_t(T) * 3 + with_states, with_states);
      const GdnReferenceResult ref = gdn_reference(s, wide(in.q), wide(in.k), wide(in.v), wide(in.g), wide(in.beta),
                                                   wide(in.h0), wide(in.d_o), wide(in.dht));
      const GdnBackward got = gdn_chunked_backward(s, in.q, in.k, in.v, in.g, in.beta, in.h0, in.d_o, in.dht);
      const std::string what = "T " + std::to_string(T) + (with_states ? " with h0, dht" : "");
      EXPECT_LT(rel_rms(ref.dq, got.dq), 1e-5) << what << ": dq";
      EXPECT_LT(rel_rms(ref.dk, got.dk), 1e-5) << what << ": dk";
      EXPECT_LT(rel_rms(ref.dv, got.dv), 1e-5) << what << ": dv";
      EXPECT_LT(rel_rms(ref.dg, got.dg), 1e-5) << what << ": dg";
      EXPECT_LT(rel_rms(ref.dbeta, got.dbeta), 1e-5) << what << ": dbeta";
      if (with_states) EXPECT_LT(rel_rms(ref.dh0, got.dh0), 1e-5) << what << ": dh0";
    }
}

TEST(GdnChunked, RankMapMatchesTheTokenLoops) {
  for (const int T : {5, 64, 200}) {
    const GdnShape s{1, T, 2, 8, 4};
    const Inputs in(s, uint64_t(T), false);
    const GdnRankMap ref = gdn_reference_rank_map(s, wide(in.k), wide(in.v), wide(in.g), wide(in.beta));
    const GdnMap got = gdn_chunked_rank_map(s, in.k, in.v, in.g, in.beta);
    EXPECT_LT(rel_rms(ref.A, got.A), 1e-5) << "T " << T << ": A";
    EXPECT_LT(rel_rms(ref.M, got.M), 1e-5) << "T " << T << ": M";
  }
}

}  // namespace
}  // namespace spb
