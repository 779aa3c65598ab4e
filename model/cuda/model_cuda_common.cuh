// Device helpers shared by the model's kernel files (model/cuda/*.cu): bf16 <-> fp32, and loads and stores of 4 or W
// elements as one access. Internal to model/cuda; included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "model/cuda/model_cuda_internal.h"

namespace spb {
namespace model_cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ bf16 to_bf(float x) { return __float2bfloat16(x); }

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

inline const bf16* as_bf16(const void* p) { return static_cast<const bf16*>(p); }
inline bf16* as_bf16(void* p) { return static_cast<bf16*>(p); }

// ---- 4 elements at a time -------------------------------------------------------------------------------------------
// An elementwise kernel walks groups of 4 elements; a group that is whole and whose pointers are aligned (`vec`,
// checked on the host) moves as one 16-byte (fp32) or 8-byte (bf16) access, the last partial group element by element.
struct alignas(8) Bf16x4 {
  __nv_bfloat162 lo, hi;
};
__device__ __forceinline__ void load4(const float* p, float (&v)[4]) {
  const float4 t = *reinterpret_cast<const float4*>(p);
  v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}
__device__ __forceinline__ void load4(const bf16* p, float (&v)[4]) {
  const Bf16x4 t = *reinterpret_cast<const Bf16x4*>(p);
  const float2 a = __bfloat1622float2(t.lo), b = __bfloat1622float2(t.hi);
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(bf16* p, const float (&v)[4]) {
  Bf16x4 t;
  t.lo = __floats2bfloat162_rn(v[0], v[1]);
  t.hi = __floats2bfloat162_rn(v[2], v[3]);
  *reinterpret_cast<Bf16x4*>(p) = t;
}
__device__ __forceinline__ void store1(float* p, float v) { *p = v; }
__device__ __forceinline__ void store1(bf16* p, float v) { *p = to_bf(v); }

// W bf16 as one access (W = 4: 8 bytes; W = 8: 16 bytes).
template <int W>
struct alignas(2 * W) Bf16Vec {
  __nv_bfloat162 h[W / 2];
};
template <int W>
__device__ __forceinline__ void loadw(const bf16* p, float (&v)[W]) {
  const Bf16Vec<W> t = *reinterpret_cast<const Bf16Vec<W>*>(p);
#pragma unroll
  for (int k = 0; k < W / 2; ++k) {
    const float2 f = __bfloat1622float2(t.h[k]);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}
template <int W>
__device__ __forceinline__ void storew(bf16* p, const float (&v)[W]) {
  Bf16Vec<W> t;
#pragma unroll
  for (int k = 0; k < W / 2; ++k) t.h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<Bf16Vec<W>*>(p) = t;
}

#define SPB_FOR_EACH_GROUP_OF_4(n, g)                                                                  \
  for (size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x, groups_ = ((n) + 3) / 4; g < groups_; \
       g += size_t(gridDim.x) * blockDim.x)

}  // namespace model_cuda
}  // namespace spb
