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

GdnBackward gdn_chunked_backward(const GdnShape& s, const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, const std::vector<float>& g,
                                 const std::vector<float>& beta, const std::vector<float>& h0,
                                 const std::vector<float>& d_o, const std::vector<float>& dht) {
  const int T = s.T, H = s.H, dk = s.dk, dv = s.dv, C = kGdnChunk, X = dv + dk;
  const int chunks = (T + C - 1) / C;
  const float scale = 1.0f / std::sqrt(float(dk));
  GdnBackward out;
  out.dq.assign(s.qk_elems(), 0.0f), out.dk.assign(s.qk_elems(), 0.0f), out.dv.assign(s.v_elems(), 0.0f);
  out.dg.assign(s.gate_elems(), 0.0f), out.dbeta.assign(s.gate_elems(), 0.0f), out.dh0.assign(s.state_elems(), 0.0f);
  const size_t SS = size_t(dk) * dv;
  // Per pair: the chunk states S_0 of every chunk; per chunk: gamma, L (strict lower), X = [U0 | W] and U.
  std::vector<float> S0s(size_t(chunks) * SS), S(SS), dS(SS), dS0(SS), gamma(C), L(size_t(C) * C);
  std::vector<float> Xm(size_t(C) * X), U(size_t(C) * dv), dU(size_t(C) * dv), Y(size_t(C) * X), dgam(C);
#pragma omp parallel for collapse(2) schedule(static) firstprivate(S0s, S, dS, dS0, gamma, L, Xm, U, dU, Y, dgam)
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < H; ++h) {
      auto qk = [&](int t) { return ((size_t(b) * T + t) * H + h) * dk; };
      auto vv = [&](int t) { return ((size_t(b) * T + t) * H + h) * dv; };
      auto gt = [&](int t) { return (size_t(b) * T + t) * H + h; };
      auto dot_k = [&](int i, int j) {
        float d = 0.0f;
        for (int c = 0; c < dk; ++c) d += k[qk(i) + c] * k[qk(j) + c];
        return d;
      };
      const size_t st = (size_t(b) * H + h) * SS;
      // The chunk's factors from its first token t0 and its initial state S0: gamma, L, X = [U0 | W], U.
      auto factors = [&](int t0, int n, const float* S0) {
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) gamma[size_t(i)] = acc += g[gt(t0 + i)];
        for (int i = 0; i < n; ++i) {
          const float bt = beta[gt(t0 + i)], be = bt * std::exp(gamma[size_t(i)]);
          float* x = &Xm[size_t(i) * X];
          for (int j = 0; j < dv; ++j) x[j] = bt * v[vv(t0 + i) + j];
          for (int c = 0; c < dk; ++c) x[dv + c] = be * k[qk(t0 + i) + c];
          for (int j = 0; j < i; ++j) {
            const float l = bt * std::exp(gamma[size_t(i)] - gamma[size_t(j)]) * dot_k(t0 + i, t0 + j);
            L[size_t(i) * C + j] = l;
            for (int c = 0; c < X; ++c) x[c] -= l * Xm[size_t(j) * X + c];
          }
          for (int j = 0; j < dv; ++j) {  // U = U0 - W S0
            float ws = 0.0f;
            for (int c = 0; c < dk; ++c) ws += x[dv + c] * S0[size_t(c) * dv + j];
            U[size_t(i) * dv + j] = x[j] - ws;
          }
        }
      };
      // The forward again, keeping each chunk's initial state.
      for (size_t e = 0; e < SS; ++e) S[e] = h0.empty() ? 0.0f : h0[st + e];
      for (int c = 0; c < chunks; ++c) {
        const int t0 = c * C, n = std::min(C, T - t0);
        std::copy(S.begin(), S.end(), S0s.begin() + long(size_t(c) * SS));
        factors(t0, n, S.data());
        const float last = gamma[size_t(n) - 1];
        for (size_t e = 0; e < SS; ++e) S[e] *= std::exp(last);
        for (int j = 0; j < n; ++j) {
          const float w = std::exp(last - gamma[size_t(j)]);
          for (int a = 0; a < dk; ++a)
            for (int d = 0; d < dv; ++d) S[size_t(a) * dv + d] += w * k[qk(t0 + j) + a] * U[size_t(j) * dv + d];
        }
      }
      for (size_t e = 0; e < SS; ++e) dS[e] = dht.empty() ? 0.0f : dht[st + e];
      for (int c = chunks - 1; c >= 0; --c) {
        const int t0 = c * C, n = std::min(C, T - t0);
        const float* S0 = &S0s[size_t(c) * SS];
        factors(t0, n, S0);
        const float last = gamma[size_t(n) - 1], e_last = std::exp(last);
        auto G = [&](int i, int j) { return std::exp(gamma[size_t(i)] - gamma[size_t(j)]); };
        auto dO = [&](int i, int j) { return d_o.empty() ? 0.0f : d_o[vv(t0 + i) + j]; };
        std::fill(dgam.begin(), dgam.end(), 0.0f);
        // The state handed on, S_C = exp(gamma_n) S0 + sum_j exp(gamma_n - gamma_j) k_j u_j^T
        float sdS = 0.0f;
        for (size_t e = 0; e < SS; ++e) sdS += S0[e] * dS[e];
        dgam[size_t(n) - 1] += e_last * sdS;
        for (size_t e = 0; e < SS; ++e) dS0[e] = e_last * dS[e];
        for (int j = 0; j < n; ++j) {
          const float w = std::exp(last - gamma[size_t(j)]);
          float N = 0.0f;
          for (int d = 0; d < dv; ++d) {  // dU_j = exp(gamma_n - gamma_j) dS^T k_j
            float a = 0.0f;
            for (int r = 0; r < dk; ++r) a += dS[size_t(r) * dv + d] * k[qk(t0 + j) + r];
            dU[size_t(j) * dv + d] = w * a;
            N += w * a * U[size_t(j) * dv + d];
          }
          dgam[size_t(n) - 1] += N, dgam[size_t(j)] -= N;
          for (int r = 0; r < dk; ++r) {  // dk_j += exp(gamma_n - gamma_j) dS u_j
            float a = 0.0f;
            for (int d = 0; d < dv; ++d) a += dS[size_t(r) * dv + d] * U[size_t(j) * dv + d];
            out.dk[qk(t0 + j) + r] += w * a;
          }
        }
        // The output, o_i = s (exp(gamma_i) S0^T q_i + sum_{j <= i} exp(gamma_i - gamma_j) (q_i . k_j) u_j)
        for (int i = 0; i < n; ++i) {
          const float ei = std::exp(gamma[size_t(i)]);
          float t1 = 0.0f;
          for (int r = 0; r < dk; ++r) {
            float a = 0.0f;  // (S0 dO_i)_r
            for (int d = 0; d < dv; ++d) a += S0[size_t(r) * dv + d] * dO(i, d);
            out.dq[qk(t0 + i) + r] += scale * ei * a;
            t1 += q[qk(t0 + i) + r] * a;
            for (int d = 0; d < dv; ++d) dS0[size_t(r) * dv + d] += scale * ei * q[qk(t0 + i) + r] * dO(i, d);
          }
          dgam[size_t(i)] += scale * ei * t1;
          for (int j = 0; j <= i; ++j) {
            float ud = 0.0f, qkd = 0.0f;
            for (int d = 0; d < dv; ++d) ud += U[size_t(j) * dv + d] * dO(i, d);
            for (int r = 0; r < dk; ++r) qkd += q[qk(t0 + i) + r] * k[qk(t0 + j) + r];
            const float gij = G(i, j), M = scale * qkd * gij * ud;
            dgam[size_t(i)] += M, dgam[size_t(j)] -= M;
            for (int r = 0; r < dk; ++r) {
              out.dq[qk(t0 + i) + r] += scale * ud * gij * k[qk(t0 + j) + r];
              out.dk[qk(t0 + j) + r] += scale * ud * gij * q[qk(t0 + i) + r];
            }
            for (int d = 0; d < dv; ++d) dU[size_t(j) * dv + d] += scale * qkd * gij * dO(i, d);
          }
        }
        // U = U0 - W S0: dU0 = dU, dW = -S0 dU, dS0 -= W^T dU; then [dB1 | dB2] = (I + L)^-T [dU0 | dW]
        for (int i = 0; i < n; ++i) {
          float* y = &Y[size_t(i) * X];
          const float* w = &Xm[size_t(i) * X + dv];
          for (int d = 0; d < dv; ++d) y[d] = dU[size_t(i) * dv + d];
          for (int r = 0; r < dk; ++r) {
            float a = 0.0f;
            for (int d = 0; d < dv; ++d) a += S0[size_t(r) * dv + d] * dU[size_t(i) * dv + d];
            y[dv + r] = -a;
            for (int d = 0; d < dv; ++d) dS0[size_t(r) * dv + d] -= w[r] * dU[size_t(i) * dv + d];
          }
        }
        for (int i = n - 1; i >= 0; --i)  // back substitution with (I + L)^T
          for (int j = i + 1; j < n; ++j) {
            const float l = L[size_t(j) * C + i];
            for (int c = 0; c < X; ++c) Y[size_t(i) * X + c] -= l * Y[size_t(j) * X + c];
          }
        for (int i = 0; i < n; ++i) {
          const float bt = beta[gt(t0 + i)], ei = std::exp(gamma[size_t(i)]);
          const float* y = &Y[size_t(i) * X];
          float vb = 0.0f, kb = 0.0f;
          for (int d = 0; d < dv; ++d) out.dv[vv(t0 + i) + d] += bt * y[d], vb += v[vv(t0 + i) + d] * y[d];
          for (int r = 0; r < dk; ++r) out.dk[qk(t0 + i) + r] += bt * ei * y[dv + r], kb += k[qk(t0 + i) + r] * y[dv + r];
          out.dbeta[gt(t0 + i)] += vb + ei * kb;
          dgam[size_t(i)] += bt * ei * kb;
          for (int j = 0; j < i; ++j) {  // dL_ij = -Y_i . X_j, L_ij = beta_i exp(gamma_i - gamma_j) k_i . k_j
            float dl = 0.0f;
            for (int c = 0; c < X; ++c) dl -= y[c] * Xm[size_t(j) * X + c];
            const float gij = G(i, j), kk = dot_k(t0 + i, t0 + j), R = dl * L[size_t(i) * C + j];
            out.dbeta[gt(t0 + i)] += dl * gij * kk;
            dgam[size_t(i)] += R, dgam[size_t(j)] -= R;
            for (int r = 0; r < dk; ++r) {
              out.dk[qk(t0 + i) + r] += dl * bt * gij * k[qk(t0 + j) + r];
              out.dk[qk(t0 + j) + r] += dl * bt * gij * k[qk(t0 + i) + r];
            }
          }
        }
        float acc = 0.0f;  // gamma is the in-chunk cumsum of g: dg_t = the sum of dgamma from t on
        for (int i = n - 1; i >= 0; --i) out.dg[gt(t0 + i)] = acc += dgam[size_t(i)];
        dS.swap(dS0);
      }
      for (size_t e = 0; e < SS; ++e) out.dh0[st + e] = dS[e];
    }
  return out;
}

GdnMap gdn_chunked_rank_map(const GdnShape& s, const std::vector<float>& k, const std::vector<float>& v,
                            const std::vector<float>& g, const std::vector<float>& beta) {
  const int T = s.T, H = s.H, dk = s.dk, C = kGdnChunk;
  GdnMap m;
  if (!v.empty()) m.M = gdn_chunked_forward(s, std::vector<float>(s.qk_elems(), 0.0f), k, v, g, beta, {}).ht;
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
