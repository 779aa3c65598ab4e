// A CPU emulation of the CUDA features the GLA kernels use, for checking their logic on a machine without a GPU
// (development tool; see emu_check.sh). Every CUDA thread is an OS thread; __syncthreads is a block barrier; warp
// collectives (shuffles, votes, mma.sync, ldmatrix) exchange values through a per-warp barrier and compute exactly
// the fragment layouts of the PTX ISA. cp.async copies at once. The kernel sources are compiled as C++ after a
// textual rewrite of their launches and dynamic shared-memory declarations (emu_check.sh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define SPB_GLA_EMU 1
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#ifndef __noinline__
#define __noinline__ __attribute__((noinline))
#endif

namespace emu {

struct Barrier {
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> l(m_);
    const long gen = gen_;
    if (++count_ == n_) {
      count_ = 0, ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return gen_ != gen; });
    }
  }
  int n_, count_ = 0;
  long gen_ = 0;
  std::mutex m_;
  std::condition_variable cv_;
};

struct Warp {
  Barrier bar{32};
  uint64_t slot[32][8];
};

struct Block {
  explicit Block(int nthreads, size_t smem) : bar(nthreads), shared(smem + 16), warps((nthreads + 31) / 32) {
    for (auto& w : warps) w = std::make_unique<Warp>();
  }
  Barrier bar;
  std::vector<unsigned char> shared;
  std::vector<std::unique_ptr<Warp>> warps;
};

struct Ctx {
  uint3 tid, bid;
  dim3 bdim, gdim;
  Block* block;
  int lane;
  Warp* warp;
};
inline Ctx& ctx() {
  thread_local Ctx c;
  return c;
}
inline unsigned char* shared_mem() {
  auto p = reinterpret_cast<uintptr_t>(ctx().block->shared.data());
  return reinterpret_cast<unsigned char*>((p + 15) & ~uintptr_t(15));
}
inline cudaError_t func_set_attribute(...) { return cudaSuccess; }
// Device memory is host memory (the scratch buffers of CudaKernels); cudaMalloc / cudaFree are macros for these.
template <class T>
inline cudaError_t device_malloc(T** p, size_t bytes) {
  *p = static_cast<T*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t device_free(void* p) {
  std::free(p);
  return cudaSuccess;
}

template <class K, class... Args>
void launch(K kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t, Args... args) {
  const int nth = int(block.x * block.y * block.z);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block blk(nth, smem);
        std::vector<std::thread> th;
        th.reserve(nth);
        for (int i = 0; i < nth; ++i)
          th.emplace_back([&, i] {
            Ctx& c = ctx();
            c.tid = make_uint3(unsigned(i) % block.x, (unsigned(i) / block.x) % block.y, unsigned(i) / (block.x * block.y));
            c.bid = make_uint3(x, y, z);
            c.bdim = block, c.gdim = grid, c.block = &blk;
            c.lane = i % 32;
            c.warp = blk.warps[i / 32].get();
            kernel(args...);
          });
        for (auto& t : th) t.join();
      }
}

// One warp-wide exchange: every lane deposits `n` words, then reads any lane's words through f(slots).
template <class F>
void exchange(const uint64_t* in, int n, F&& f) {
  Warp& w = *ctx().warp;
  std::memcpy(w.slot[ctx().lane], in, n * 8);
  w.bar.wait();
  f(w.slot);
  w.bar.wait();
}

inline float as_f(uint64_t v) {
  const uint32_t u = uint32_t(v);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float tf32_value(uint32_t u) {  // the tensor core reads the top 19 bits
  u &= 0xffffe000u;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float bf_value(uint32_t u16) {
  const uint32_t u = u16 << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace emu

#define threadIdx (::emu::ctx().tid)
#define blockIdx (::emu::ctx().bid)
#define blockDim (::emu::ctx().bdim)
#define gridDim (::emu::ctx().gdim)
#define cudaMalloc ::emu::device_malloc
#define cudaFree ::emu::device_free

inline void __syncthreads() { ::emu::ctx().block->bar.wait(); }
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __expf(float x) { return std::exp(x); }
using std::max;
using std::min;

inline float __shfl_xor_sync(unsigned, float v, int m) {
  const uint64_t in = __float_as_uint(v);
  float out = 0;
  emu::exchange(&in, 1, [&](uint64_t (*s)[8]) { out = emu::as_f(s[emu::ctx().lane ^ m][0]); });
  return out;
}
inline float __shfl_down_sync(unsigned, float v, int d) {
  const uint64_t in = __float_as_uint(v);
  float out = 0;
  emu::exchange(&in, 1, [&](uint64_t (*s)[8]) {
    const int src = emu::ctx().lane + d;
    out = src < 32 ? emu::as_f(s[src][0]) : v;
  });
  return out;
}
inline float __shfl_sync(unsigned, float v, int src) {
  const uint64_t in = __float_as_uint(v);
  float out = 0;
  emu::exchange(&in, 1, [&](uint64_t (*s)[8]) { out = emu::as_f(s[src & 31][0]); });
  return out;
}
inline bool __any_sync(unsigned, bool p) {
  const uint64_t in = p;
  bool out = false;
  emu::exchange(&in, 1, [&](uint64_t (*s)[8]) {
    for (int l = 0; l < 32; ++l) out = out || s[l][0];
  });
  return out;
}

namespace spb {
namespace gla_cuda {

inline uint32_t tf32_bits(float x) {  // cvt.rn.tf32.f32 (sm_90): nearest, ties to even; Inf kept, NaN stays NaN
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) ? 0x7fffe000u : u;
  return (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
}

// m16n8k8 tf32: lane (g, t) holds A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]; B[t][g], B[t+4][g];
// C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1].
inline void mma_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const uint64_t in[6] = {a0, a1, a2, a3, b0, b1};
  float out[4];
  emu::exchange(in, 6, [&](uint64_t (*s)[8]) {
    auto A = [&](int m, int k) { return emu::tf32_value(uint32_t(s[(m % 8) * 4 + k % 4][(m >= 8) + 2 * (k >= 4)])); };
    auto B = [&](int k, int n) { return emu::tf32_value(uint32_t(s[n * 4 + k % 4][4 + (k >= 4)])); };
    const int g = emu::ctx().lane / 4, t = emu::ctx().lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int m = g + 8 * (e >> 1), n = 2 * t + (e & 1);
      double acc = c[e];
      for (int k = 0; k < 8; ++k) acc += double(A(m, k)) * double(B(k, n));
      out[e] = float(acc);
    }
  });
  for (int e = 0; e < 4; ++e) c[e] = out[e];
}

// m16n8k16 bf16: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..] (low half = lower k);
// b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g].
inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint64_t in[6] = {a[0], a[1], a[2], a[3], b0, b1};
  float out[4];
  emu::exchange(in, 6, [&](uint64_t (*s)[8]) {
    auto A = [&](int m, int k) {
      const uint32_t w = uint32_t(s[(m % 8) * 4 + (k % 8) / 2][(m >= 8) + 2 * (k >= 8)]);
      return emu::bf_value(k % 2 ? w >> 16 : w & 0xffffu);
    };
    auto B = [&](int k, int n) {
      const uint32_t w = uint32_t(s[n * 4 + (k % 8) / 2][4 + (k >= 8)]);
      return emu::bf_value(k % 2 ? w >> 16 : w & 0xffffu);
    };
    const int g = emu::ctx().lane / 4, t = emu::ctx().lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int m = g + 8 * (e >> 1), n = 2 * t + (e & 1);
      double acc = c[e];
      for (int k = 0; k < 16; ++k) acc += double(A(m, k)) * double(B(k, n));
      out[e] = float(acc);
    }
  });
  for (int e = 0; e < 4; ++e) c[e] = out[e];
}

// ldmatrix .x4 .trans: lane L addresses row L%8 of matrix L/8; lane (g, t) receives, of matrix i, the elements
// [2t][g] (low half) and [2t+1][g].
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* p) {
  const uint64_t in = reinterpret_cast<uintptr_t>(p);
  emu::exchange(&in, 1, [&](uint64_t (*s)[8]) {
    const int g = emu::ctx().lane / 4, t = emu::ctx().lane % 4;
    for (int i = 0; i < 4; ++i) {
      auto at = [&](int row, int col) {
        const auto* rp = reinterpret_cast<const unsigned short*>(uintptr_t(s[8 * i + row][0]));
        return uint32_t(rp[col]);
      };
      r[i] = at(2 * t, g) | (at(2 * t + 1, g) << 16);
    }
  });
}

// cp.async as the PTX ISA orders it: a copy lands in shared memory only when a cp.async.wait_group of its thread
// covers its commit group, so a read of the destination before that wait (or, by another thread, before a barrier
// after it) sees the old contents: the emulator catches a rounding pass that runs ahead of its data. The
// source is read at issue (the kernels never write their sources).
struct PendingCopy {
  void* dst;
  unsigned char data[16];
  int n;
  long group;
};
struct AsyncCopies {
  std::vector<PendingCopy> q;
  long open = 0;  // the group that copies issued now belong to (committed groups: 0 .. open-1)
};
inline AsyncCopies& async_copies() {
  thread_local AsyncCopies a;  // each emulated CUDA thread is a fresh OS thread
  return a;
}
inline void cp_async_n(void* smem, const void* gmem, int n) {
  AsyncCopies& a = async_copies();
  PendingCopy c;
  c.dst = smem, c.n = n, c.group = a.open;
  std::memcpy(c.data, gmem, n);
  a.q.push_back(c);
}
inline void cp_async16(void* smem, const void* gmem) { cp_async_n(smem, gmem, 16); }
inline void cp_async_commit() { ++async_copies().open; }
// Completes every committed group but the newest N (uncommitted copies stay pending, as on the GPU).
template <int N>
inline void cp_async_wait() {
  AsyncCopies& a = async_copies();
  std::vector<PendingCopy> rest;
  for (const PendingCopy& c : a.q) {
    if (c.group < a.open - N) std::memcpy(c.dst, c.data, c.n);
    else rest.push_back(c);
  }
  a.q.swap(rest);
}

}  // namespace gla_cuda
}  // namespace spb
