#include "kernels/gdn/cpu/gdn_chunked.h"

#include <algorithm>
#include <cmath>

namespace spb {

GdnForward gdn_chunked_forward(const GdnShape& s, const std::vector<float>& q, const std::vector<float>& k,
                               const std::vector<float>& v, const std::vector<float>& g,
                               const std::vector<float>& beta, const std::vector<float>& h0) {
  const int T = s.T, H = s.H, dk = s.dk, dv = s.dv, C = kGdnChunk;
  const float scale = 1.0f / std::sqrt(float(dk));
  GdnForward out;
  out.o.assign(s.v_elems(), 0.0f);
  out.ht.assign(s.state_elems(), 0.0f);
  std::vector<float> S(size_t(dk) * dv), gamma(C), L(size_t(C) * C), U(size_t(C) * dv), W(size_t(C) * dk);
#pragma omp parallel for collapse(2) schedule(static) firstprivate(S, gamma, L, U, W)
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < H; ++h) {
      auto qk = [&](int t) { return ((size_t(b) * T + t) * H + h) * dk; };
      auto vv = [&](int t) { return ((size_t(b) * T + t) * H + h) * dv; };
      auto gt = [&](int t) { return (size_t(b) * T + t) * H + h; };
      const size_t st = (size_t(b) * H + h) * dk * dv;
      for (size_t e = 0; e < S.size(); ++e) S[e] = h0.empty() ? 0.0f : h0[st + e];
      for (int t0 = 0; t0 < T; t0 += C) {
        const int n = std::min(C, T - t0);
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) gamma[size_t(i)] = acc += g[gt(t0 + i)];
        // L_ts = beta_t exp(gamma_t - gamma_s) k_t . k_s for s < t
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < i; ++j) {
            float d = 0.0f;
            for (int c = 0; c < dk; ++c) d += k[qk(t0 + i) + c] * k[qk(t0 + j) + c];
            L[size_t(i) * C + j] = beta[gt(t0 + i)] * std::exp(gamma[size_t(i)] - gamma[size_t(j)]) * d;
          }
        // Right-hand sides: U <- beta V, W <- beta exp(gamma) K; then (I + L) X = RHS by forward substitution.
        for (int i = 0; i < n; ++i) {
          const float bt = beta[gt(t0 + i)], be = bt * std::exp(gamma[size_t(i)]);
          for (int j = 0; j < dv; ++j) U[size_t(i) * dv + j] = bt * v[vv(t0 + i) + j];
          for (int c = 0; c < dk; ++c) W[size_t(i) * dk + c] = be * k[qk(t0 + i) + c];
          for (int j = 0; j < i; ++j) {
            const float l = L[size_t(i) * C + j];
            for (int c = 0; c < dv; ++c) U[size_t(i) * dv + c] -= l * U[size_t(j) * dv + c];
            for (int c = 0; c < dk; ++c) W[size_t(i) * dk + c] -= l * W[size_t(j) * dk + c];
          }
        }
        // U = U - W S_0: the chunk's written values
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < dv; ++j) {
            float ws = 0.0f;
            for (int c = 0; c < dk; ++c) ws += W[size_t(i) * dk + c] * S[size_t(c) * dv + j];
            U[size_t(i) * dv + j] -= ws;
          }
        // o_t = s (exp(gamma_t) S_0^T q_t + sum_{j <= t} exp(gamma_t - gamma_j) (q_t . k_j) u_j)
        for (int i = 0; i < n; ++i) {
          float* o = &out.o[vv(t0 + i)];
          const float e = std::exp(gamma[size_t(i)]);
          for (int j = 0; j < dv; ++j) {
            float a = 0.0f;
            for (int c = 0; c < dk; ++c) a += q[qk(t0 + i) + c] * S[size_t(c) * dv + j];
            o[j] = e * a;
          }
          for (int j = 0; j <= i; ++j) {
            float d = 0.0f;
            for (int c = 0; c < dk; ++c) d += q[qk(t0 + i) + c] * k[qk(t0 + j) + c];
            const float w = std::exp(gamma[size_t(i)] - gamma[size_t(j)]) * d;
            for (int c = 0; c < dv; ++c) o[c] += w * U[size_t(j) * dv + c];
          }
          for (int j = 0; j < dv; ++j) o[j] *= scale;
        }
        // S_C = exp(gamma_C) S_0 + sum_j exp(gamma_C - gamma_j) k_j u_j^T
        const float last = gamma[size_t(n) - 1];
        for (size_t e = 0; e < S.size(); ++e) S[e] *= std::exp(last);
        for (int j = 0; j < n; ++j) {
          const float w = std::exp(last - gamma[size_t(j)]);
          for (int c = 0; c < dk; ++c) {
            const float kc = w * k[qk(t0 + j) + c];
            for (int d = 0; d < dv; ++d) S[size_t(c) * dv + d] += kc * U[size_t(j) * dv + d];
          }
        }
      }
      for (size_t e = 0; e < S.size(); ++e) out.ht[st + e] = S[e];
    }
  return out;
}

GdnMap gdn_chunked_rank_map(const GdnShape& s, const std::vector<float>& k, const std::vector<float>& v,
                            const std::vector<float>& g, const std::vector<float>& beta) {
  const int T = s.T, H = s.H, dk = s.dk, C = kGdnChunk;
  GdnMap m;
  m.M = gdn_chunked_forward(s, std::vector<float>(s.qk_elems(), 0.0f), k, v, g, beta, {}).ht;
  m.A.assign(s.transition_elems(), 0.0f);
  std::vector<float> A(size_t(dk) * dk), Ac(size_t(dk) * dk), next(size_t(dk) * dk), gamma(C), W(size_t(C) * dk);
#pragma omp parallel for collapse(2) schedule(static) firstprivate(A, Ac, next, gamma, W)
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < H; ++h) {
      auto qk = [&](int t) { return ((size_t(b) * T + t) * H + h) * dk; };
      auto gt = [&](int t) { return (size_t(b) * T + t) * H + h; };
      for (int i = 0; i < dk; ++i)
        for (int j = 0; j < dk; ++j) A[size_t(i) * dk + j] = i == j ? 1.0f : 0.0f;
      for (int t0 = 0; t0 < T; t0 += C) {
        const int n = std::min(C, T - t0);
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) gamma[size_t(i)] = acc += g[gt(t0 + i)];
        // W = (I + L)^-1 (beta exp(gamma) K), as in the forward
        for (int i = 0; i < n; ++i) {
          const float be = beta[gt(t0 + i)] * std::exp(gamma[size_t(i)]);
          for (int c = 0; c < dk; ++c) W[size_t(i) * dk + c] = be * k[qk(t0 + i) + c];
          for (int j = 0; j < i; ++j) {
            float d = 0.0f;
            for (int c = 0; c < dk; ++c) d += k[qk(t0 + i) + c] * k[qk(t0 + j) + c];
            const float l = beta[gt(t0 + i)] * std::exp(gamma[size_t(i)] - gamma[size_t(j)]) * d;
            for (int c = 0; c < dk; ++c) W[size_t(i) * dk + c] -= l * W[size_t(j) * dk + c];
          }
        }
        // A_c = exp(gamma_C) I - (K * exp(gamma_C - gamma))^T W
        const float last = gamma[size_t(n) - 1];
        for (int r = 0; r < dk; ++r)
          for (int c = 0; c < dk; ++c) {
            float a = r == c ? std::exp(last) : 0.0f;
            for (int j = 0; j < n; ++j) a -= std::exp(last - gamma[size_t(j)]) * k[qk(t0 + j) + r] * W[size_t(j) * dk + c];
            Ac[size_t(r) * dk + c] = a;
          }
        for (int r = 0; r < dk; ++r)  // A <- A_c A
          for (int c = 0; c < dk; ++c) {
            float a = 0.0f;
            for (int x = 0; x < dk; ++x) a += Ac[size_t(r) * dk + x] * A[size_t(x) * dk + c];
            next[size_t(r) * dk + c] = a;
          }
        A.swap(next);
      }
      std::copy(A.begin(), A.end(), m.A.begin() + long((size_t(b) * H + h) * dk * dk));
    }
  return m;
}

}  // namespace spb
