// What the single-GPU tests share: whether a GPU is there, and bf16 rounding on the host (so that the CPU side of a
// comparison starts from the very values the GPU holds).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace spb::test {

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Round to the nearest bf16 (ties to even), as __float2bfloat16 does.
inline float round_bf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace spb::test
