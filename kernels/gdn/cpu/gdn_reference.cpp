#include "kernels/gdn/cpu/gdn_reference.h"

#include <cmath>

namespace spb {

namespace {

// The views of one (b, h) pair's tensors.
struct Pair {
  const GdnShape& s;
  int b, h;
  size_t qk(int t, int i) const { return ((size_t(b) * s.T + t) * s.H + h) * s.dk + i; }
  size_t vv(int t, int j) const { return ((size_t(b) * s.T + t) * s.H + h) * s.dv + j; }
  size_t gate(int t) const { return (size_t(b) * s.T + t) * s.H + h; }
  size_t state() const { return (size_t(b) * s.H + h) * s.dk * s.dv; }
};

}  // namespace

GdnReferenceResult gdn_reference(const GdnShape& s, const std::vector<double>& q, const std::vector<double>& k,
                                 const std::vector<double>& v, const std::vector<double>& g,
                                 const std::vector<double>& beta, const std::vector<double>& h0,
                                 const std::vector<double>& d_o, const std::vector<double>& dht) {
  const int T = s.T, dk = s.dk, dv = s.dv;
  const double scale = 1.0 / std::sqrt(double(dk));
  const bool backward = !d_o.empty();
  GdnReferenceResult r;
  r.o.assign(s.v_elems(), 0.0);
  r.ht.assign(s.state_elems(), 0.0);
  if (backward) {
    r.dq.assign(s.qk_elems(), 0.0), r.dk.assign(s.qk_elems(), 0.0), r.dv.assign(s.v_elems(), 0.0);
    r.dg.assign(s.gate_elems(), 0.0), r.dbeta.assign(s.gate_elems(), 0.0), r.dh0.assign(s.state_elems(), 0.0);
  }
  const size_t SS = size_t(dk) * dv;
  // states[t]: S after t tokens (states[0] = h0); per token the forward's u = H^T k (H = exp(g) S_{t-1}).
  std::vector<double> states(size_t(T + 1) * SS), u(size_t(T) * dv), dS(SS), dH(SS), dw(dv), du(dv);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const Pair p{s, b, h};
      for (size_t e = 0; e < SS; ++e) states[e] = h0.empty() ? 0.0 : h0[p.state() + e];
      for (int t = 0; t < T; ++t) {
        const double* prev = &states[size_t(t) * SS];
        double* cur = &states[size_t(t + 1) * SS];
        const double a = std::exp(g[p.gate(t)]), bt = beta[p.gate(t)];
        for (int j = 0; j < dv; ++j) {  // u = H^T k, w = beta (v - u); S = H + k w^T
          double acc = 0.0;
          for (int i = 0; i < dk; ++i) acc += a * prev[size_t(i) * dv + j] * k[p.qk(t, i)];
          u[size_t(t) * dv + j] = acc;
          const double w = bt * (v[p.vv(t, j)] - acc);
          for (int i = 0; i < dk; ++i) cur[size_t(i) * dv + j] = a * prev[size_t(i) * dv + j] + k[p.qk(t, i)] * w;
        }
        for (int j = 0; j < dv; ++j) {
          double acc = 0.0;
          for (int i = 0; i < dk; ++i) acc += cur[size_t(i) * dv + j] * q[p.qk(t, i)];
          r.o[p.vv(t, j)] = scale * acc;
        }
      }
      for (size_t e = 0; e < SS; ++e) r.ht[p.state() + e] = states[size_t(T) * SS + e];
      if (!backward) continue;

      // The reverse scan: dS is the gradient of S_t, from the tokens after t and the state's final gradient.
      for (size_t e = 0; e < SS; ++e) dS[e] = dht.empty() ? 0.0 : dht[p.state() + e];
      for (int t = T - 1; t >= 0; --t) {
        const double* prev = &states[size_t(t) * SS];
        const double* cur = &states[size_t(t + 1) * SS];
        const double a = std::exp(g[p.gate(t)]), bt = beta[p.gate(t)];
        // o = s S^T q
        for (int i = 0; i < dk; ++i) {
          double dq = 0.0;
          for (int j = 0; j < dv; ++j) {
            dS[size_t(i) * dv + j] += scale * q[p.qk(t, i)] * d_o[p.vv(t, j)];
            dq += scale * cur[size_t(i) * dv + j] * d_o[p.vv(t, j)];
          }
          r.dq[p.qk(t, i)] = dq;
        }
        // S = H + k w^T: dH = dS, dk += dS w, dw = dS^T k; w = beta (v - u): dbeta, dv, du = -beta dw
        double dbeta = 0.0;
        for (int j = 0; j < dv; ++j) {
          double acc = 0.0;
          for (int i = 0; i < dk; ++i) acc += dS[size_t(i) * dv + j] * k[p.qk(t, i)];
          dw[size_t(j)] = acc;
          const double diff = v[p.vv(t, j)] - u[size_t(t) * dv + j];
          dbeta += acc * diff;
          r.dv[p.vv(t, j)] = bt * acc;
          du[size_t(j)] = -bt * acc;
        }
        r.dbeta[p.gate(t)] = dbeta;
        for (int i = 0; i < dk; ++i) {
          double dki = 0.0;
          for (int j = 0; j < dv; ++j) {
            const double w = bt * (v[p.vv(t, j)] - u[size_t(t) * dv + j]);
            const double Hij = a * prev[size_t(i) * dv + j];
            dki += dS[size_t(i) * dv + j] * w + Hij * du[size_t(j)];  // from k w^T and from u = H^T k
            dH[size_t(i) * dv + j] = dS[size_t(i) * dv + j] + k[p.qk(t, i)] * du[size_t(j)];
          }
          r.dk[p.qk(t, i)] = dki;
        }
        // H = exp(g) S_{t-1}: dg = sum(H * dH), dS_{t-1} = exp(g) dH
        double dg = 0.0;
        for (size_t e = 0; e < SS; ++e) {
          dg += a * prev[e] * dH[e];
          dS[e] = a * dH[e];
        }
        r.dg[p.gate(t)] = dg;
      }
      for (size_t e = 0; e < SS; ++e) r.dh0[p.state() + e] = dS[e];
    }
  return r;
}

GdnRankMap gdn_reference_rank_map(const GdnShape& s, const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<double>& g, const std::vector<double>& beta) {
  const int T = s.T, dk = s.dk;
  GdnRankMap m;
  m.A.assign(s.transition_elems(), 0.0);
  const std::vector<double> zero_q(s.qk_elems(), 0.0);
  m.M = gdn_reference(s, zero_q, k, v, g, beta, {}, {}, {}).ht;
  std::vector<double> A(size_t(dk) * dk), next(size_t(dk) * dk);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const Pair p{s, b, h};
      for (int i = 0; i < dk; ++i)
        for (int j = 0; j < dk; ++j) A[size_t(i) * dk + j] = i == j;
      for (int t = 0; t < T; ++t) {  // A <- F_t A, F_t = exp(g) (I - beta k k^T)
        const double a = std::exp(g[p.gate(t)]), bt = beta[p.gate(t)];
        for (int j = 0; j < dk; ++j) {
          double kA = 0.0;  // (k^T A)_j
          for (int i = 0; i < dk; ++i) kA += k[p.qk(t, i)] * A[size_t(i) * dk + j];
          for (int i = 0; i < dk; ++i) next[size_t(i) * dk + j] = a * (A[size_t(i) * dk + j] - bt * k[p.qk(t, i)] * kA);
        }
        A.swap(next);
      }
      const size_t at = (size_t(b) * s.H + h) * dk * dk;
      for (size_t e = 0; e < A.size(); ++e) m.A[at + e] = A[e];
    }
  return m;
}

}  // namespace spb
