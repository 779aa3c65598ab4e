// The fp32 -> tf32 rounding of tf32_bits (gla_cuda_common.cuh) on sm_90, modelled by arithmetic instead of bits: the
// multiple of the value's tf32 quantum nearest to it, ties to the even multiple. The GPU test (CudaHelpers.Tf32...)
// and the emulator's check compare the conversion the kernels use with it, on tf32_probe_values().
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace spb {
namespace gla_cuda {

inline float tf32_model(float x) {
  if (!std::isfinite(x) || x == 0.f) return x;  // NaN: any NaN will do (the callers test isnan)
  int e = 0;
  (void)std::frexp(x, &e);  // |x| = m 2^e, m in [0.5, 1): tf32's 11 significant bits are 2^(e-11) apart
  const double q = std::ldexp(1.0, std::max(e - 11, -136));  // below 2^-126 the quantum stays 2^-149 * 2^13
  const double r = std::nearbyint(double(x) / q) * q;          // exact in double; ties to even (default mode)
  if (std::fabs(r) >= 0x1p128) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return float(r);
}

// Whether `got`, a conversion's bits for x, is the model's: the same bits, or for NaN any NaN with the 13 low bits
// zero.
inline bool tf32_matches_model(float x, uint32_t got) {
  const float want = tf32_model(x);
  uint32_t want_bits;
  std::memcpy(&want_bits, &want, 4);
  float y;
  std::memcpy(&y, &got, 4);
  return std::isnan(x) ? std::isnan(y) && (got & 0x1fffu) == 0 : got == want_bits;
}

// Edge values (ties that round up and down, the largest finite value, subnormals, zeros, infinities, NaN) and
// random values over the whole exponent range.
inline std::vector<float> tf32_probe_values() {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 1.f + 0x1p-11f, 1.f + 0x1p-11f + 0x1p-10f, -(1.f + 0x1p-11f),
                          1.f + 0x1p-11f + 0x1p-23f, 1.f + 0x1p-11f - 0x1p-23f, 2.f - 0x1p-23f,
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                          0x1p-137f, 0x1p-137f * 3.f, 0x1p-130f + 0x1p-137f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> ex(-149, 127), sign(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mant(rng), ex(rng));
    v.push_back(sign(rng) ? -x : x);
  }
  return v;
}

}  // namespace gla_cuda
}  // namespace spb
