// Inline-PTX helpers that belong to no attention family and no SP method: the memory-model loads and stores (acquire,
// release, relaxed) at GPU and at system scope, the system-scope fence, and the global timer. Device code only (nvcc).
// Each helper is one asm statement, forced inline, so that a caller's generated code is what the asm written in place
// gives. Callers: kernels/gla/cuda/gla_cuda_common.cuh (GPU scope: a word another stream's kernel publishes) and
// zeco/all_scan_device_common.cuh (system scope: the peers' windows; the timer of the spins and the trace).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace spb {
namespace ptx {

// --- GPU scope (another kernel on the same GPU) ----------------------------------------------------------------
__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// --- system scope (the peers are other GPUs) ----------------------------------------------------------------------
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_relaxed_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
// 16 bytes as two u64 words, each single-copy atomic on its own.
__device__ __forceinline__ ulonglong2 ld_relaxed_sys_v2(const ulonglong2* p) {
  ulonglong2 v;
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_sys_v2(ulonglong2* p, ulonglong2 v) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.x), "l"(v.y) : "memory");
}
// 16 bytes as one .b128 access (PTX ISA 8.3+, sm_70+): one single-copy atomic access.
__device__ __forceinline__ ulonglong2 ld_relaxed_sys_b128(const ulonglong2* p) {
  ulonglong2 v;
  asm volatile("{ .reg .b128 t; ld.relaxed.sys.global.b128 t, [%2]; mov.b128 {%0, %1}, t; }"
               : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_sys_b128(ulonglong2* p, ulonglong2 v) {
  asm volatile("{ .reg .b128 t; mov.b128 t, {%1, %2}; st.relaxed.sys.global.b128 [%0], t; }" ::"l"(p), "l"(v.x),
               "l"(v.y) : "memory");
}

// --- the global timer: nanoseconds, one clock per GPU, read by any SM ------------------------------------------
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace ptx
}  // namespace spb
