#include "sp/inputs.h"

#include <algorithm>
#include <cmath>
#include <sys/stat.h>

#include "runtime/error.h"
#include "runtime/npy.h"

namespace spb {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace {

// A standard normal drawn from (seed, tensor, index) alone: Box-Muller on two hashed uniforms.
float randn_at(uint64_t seed, uint64_t tensor, uint64_t i) {
  const uint64_t a = splitmix64(seed * 0x100000001b3ull ^ (tensor << 56) ^ (2 * i));
  const uint64_t b = splitmix64(seed * 0x100000001b3ull ^ (tensor << 56) ^ (2 * i + 1));
  const double u1 = (double(a >> 11) + 0.5) * 0x1.0p-53, u2 = double(b >> 11) * 0x1.0p-53;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Each element depends on its index alone, so the threads need no coordination (a paper-size sequence is ~1e9 draws).
std::vector<float> randn(uint64_t seed, uint64_t tensor, size_t n) {
  std::vector<float> x(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) x[i] = randn_at(seed, tensor, i);
  return x;
}

float logsigmoid(float x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

// Each row of `n` elements to unit L2 norm.
void normalise_rows(std::vector<float>& x, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < x.size() / n; ++r) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const float inv = float(1.0 / std::sqrt(std::max(ss, 1e-30)));
    for (size_t i = 0; i < n; ++i) x[r * n + i] *= inv;
  }
}

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::vector<size_t> token_shape(const GlaShape& s, int D) { return {size_t(s.B), size_t(s.T), size_t(s.H), size_t(D)}; }
std::vector<size_t> state_shape(const GlaShape& s) { return {size_t(s.B), size_t(s.H), size_t(s.dk), size_t(s.dv)}; }
std::vector<size_t> gate_shape(const GlaShape& s, Attention a) {
  if (a == Attention::gdn) return {size_t(s.B), size_t(s.T), size_t(s.H)};
  return token_shape(s, s.dk);
}

}  // namespace

size_t gate_row(const GlaShape& s, Attention a) { return a == Attention::gdn ? size_t(s.H) : size_t(s.H) * s.dk; }

HostTensors generate_inputs(const GlaShape& s, uint64_t seed, GateKind gates, bool with_h0, bool with_dht,
                            Attention a) {
  HostTensors t;
  t.attention = a;
  t.q = randn(seed, 1, s.qk_elems());
  t.k = randn(seed, 2, s.qk_elems());
  t.v = randn(seed, 3, s.v_elems());
  t.g = randn(seed, 4, size_t(s.B) * s.T * gate_row(s, a));
  const float div = gates == GateKind::model ? 16.f : 1.f;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < t.g.size(); ++i) t.g[i] = logsigmoid(t.g[i]) / div;
  if (a == Attention::gdn) {
    normalise_rows(t.k, size_t(s.dk));
    t.beta = randn(seed, 8, size_t(s.B) * s.T * s.H);
    for (float& b : t.beta) b = 1.0f / (1.0f + std::exp(-b));
  }
  t.d_o = randn(seed, 5, s.v_elems());
  t.do_generated = true;
  if (with_h0) t.h0 = randn(seed, 6, s.state_elems());
  if (with_dht) t.dht = randn(seed, 7, s.state_elems());
  return t;
}

GlaShape npy_problem_shape(const std::string& dir) {
  const NpyHeader q = read_npy_header(dir + "/q.npy"), v = read_npy_header(dir + "/v.npy");
  SPB_USAGE(q.shape.size() == 4, dir + "/q.npy: shape " + shape_str(q.shape) + ", expected 4-D [B, T, H, dk]");
  SPB_USAGE(v.shape.size() == 4 && v.shape[0] == q.shape[0] && v.shape[1] == q.shape[1] && v.shape[2] == q.shape[2],
            dir + "/v.npy: shape " + shape_str(v.shape) + ", expected [B, T, H, dv] = (" + std::to_string(q.shape[0]) +
                ", " + std::to_string(q.shape[1]) + ", " + std::to_string(q.shape[2]) + ", dv) like q.npy");
  for (size_t d : q.shape) SPB_USAGE(d > 0, dir + "/q.npy: shape " + shape_str(q.shape) + " has an empty axis");
  SPB_USAGE(v.shape[3] > 0, dir + "/v.npy: shape " + shape_str(v.shape) + " has an empty axis");
  GlaShape s;
  s.B = int(q.shape[0]), s.T = int(q.shape[1]), s.H = int(q.shape[2]), s.dk = int(q.shape[3]), s.dv = int(v.shape[3]);
  return s;
}

HostTensors read_inputs(const std::string& dir, const GlaShape& s, uint64_t seed, Attention a) {
  HostTensors t;
  t.attention = a;
  t.q = read_npy(dir + "/q.npy", token_shape(s, s.dk));
  t.k = read_npy(dir + "/k.npy", token_shape(s, s.dk));
  t.v = read_npy(dir + "/v.npy", token_shape(s, s.dv));
  t.g = read_npy(dir + "/g.npy", gate_shape(s, a));
  for (float x : t.g)
    SPB_USAGE(x <= 0.f && std::isfinite(x), dir + "/g.npy: log forget gates must be finite and <= 0 (got " +
                                                std::to_string(x) + ")");
  if (a == Attention::gdn) {
    t.beta = read_npy(dir + "/beta.npy", gate_shape(s, a));
    for (float x : t.beta)
      SPB_USAGE(x >= 0.f && x <= 1.f, dir + "/beta.npy: betas must lie in [0, 1] (got " + std::to_string(x) + ")");
  }
  if (file_exists(dir + "/do.npy")) {
    t.d_o = read_npy(dir + "/do.npy", token_shape(s, s.dv));
  } else {
    t.d_o = randn(seed, 5, s.v_elems());
    t.do_generated = true;
  }
  if (file_exists(dir + "/h0.npy")) t.h0 = read_npy(dir + "/h0.npy", state_shape(s));
  if (file_exists(dir + "/dht.npy")) t.dht = read_npy(dir + "/dht.npy", state_shape(s));
  return t;
}

std::vector<float> slice_tokens(const std::vector<float>& x, int B, int T, size_t row, int t0, int t1) {
  std::vector<float> out(size_t(B) * (t1 - t0) * row);
  for (int b = 0; b < B; ++b)
    std::copy(x.begin() + (size_t(b) * T + t0) * row, x.begin() + (size_t(b) * T + t1) * row,
              out.begin() + size_t(b) * (t1 - t0) * row);
  return out;
}

}  // namespace spb
