#include "kernels/gla/cpu/gla_reference.h"

#include <cmath>

namespace spb {

GlaReferenceResult gla_reference(const GlaShape& s, const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, const std::vector<float>& g,
                                 const std::vector<float>& h0, const std::vector<float>& d_o,
                                 const std::vector<float>& dht) {
  const int T = s.T, H = s.H, dk = s.dk, dv = s.dv;
  const double scale = 1.0 / std::sqrt(double(dk));
  const bool backward = !d_o.empty();
  GlaReferenceResult r;
  r.o.assign(s.v_elems(), 0.0);
  r.ht.assign(s.state_elems(), 0.0);
  if (backward) {
    r.dq.assign(s.qk_elems(), 0.0), r.dk.assign(s.qk_elems(), 0.0), r.dg.assign(s.qk_elems(), 0.0);
    r.dv.assign(s.v_elems(), 0.0), r.dh0.assign(s.state_elems(), 0.0);
  }
  const size_t SS = size_t(dk) * dv;
  std::vector<double> states((T + 1) * SS);  // states[t] = S after t tokens; states[0] = h0
  std::vector<double> dS(SS);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < H; ++h) {
      auto qk_at = [&](int t, int i) { return ((size_t(b) * T + t) * H + h) * dk + i; };
      auto v_at = [&](int t, int j) { return ((size_t(b) * T + t) * H + h) * dv + j; };
      const size_t st = (size_t(b) * H + h) * SS;
      for (size_t e = 0; e < SS; ++e) states[e] = h0.empty() ? 0.0 : h0[st + e];
      for (int t = 0; t < T; ++t) {
        const double* prev = &states[t * SS];
        double* cur = &states[(t + 1) * SS];
        for (int i = 0; i < dk; ++i) {
          const double a = std::exp(double(g[qk_at(t, i)])), kt = k[qk_at(t, i)];
          for (int j = 0; j < dv; ++j) cur[i * dv + j] = a * prev[i * dv + j] + kt * v[v_at(t, j)];
        }
        for (int j = 0; j < dv; ++j) {
          double acc = 0.0;
          for (int i = 0; i < dk; ++i) acc += cur[i * dv + j] * q[qk_at(t, i)];
          r.o[v_at(t, j)] = scale * acc;
        }
      }
      for (size_t e = 0; e < SS; ++e) r.ht[st + e] = states[T * SS + e];
      if (!backward) continue;

      // dS holds the gradient of S_t: s q_t do_t^T plus what flows back from S_{t+1} through diag(exp g_{t+1}).
      for (size_t e = 0; e < SS; ++e) dS[e] = dht.empty() ? 0.0 : dht[st + e];
      for (int t = T - 1; t >= 0; --t) {
        const double* prev = &states[t * SS];
        const double* cur = &states[(t + 1) * SS];
        for (int i = 0; i < dk; ++i)
          for (int j = 0; j < dv; ++j) dS[i * dv + j] += scale * q[qk_at(t, i)] * d_o[v_at(t, j)];
        for (int i = 0; i < dk; ++i) {
          double dq = 0.0, dkk = 0.0, dgate = 0.0;
          for (int j = 0; j < dv; ++j) {
            dq += cur[i * dv + j] * d_o[v_at(t, j)];
            dkk += dS[i * dv + j] * v[v_at(t, j)];
            dgate += dS[i * dv + j] * prev[i * dv + j];
          }
          r.dq[qk_at(t, i)] = scale * dq;
          r.dk[qk_at(t, i)] = dkk;
          r.dg[qk_at(t, i)] = std::exp(double(g[qk_at(t, i)])) * dgate;
        }
        for (int j = 0; j < dv; ++j) {
          double acc = 0.0;
          for (int i = 0; i < dk; ++i) acc += dS[i * dv + j] * k[qk_at(t, i)];
          r.dv[v_at(t, j)] = acc;
        }
        for (int i = 0; i < dk; ++i) {
          const double a = std::exp(double(g[qk_at(t, i)]));
          for (int j = 0; j < dv; ++j) dS[i * dv + j] *= a;
        }
      }
      for (size_t e = 0; e < SS; ++e) r.dh0[st + e] = dS[e];
    }
  return r;
}

}  // namespace spb
