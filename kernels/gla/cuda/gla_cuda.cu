// The CUDA GLA stages (GlaKernels with bf16 activations): the class, the memory-bound stages (cumsum, the late-state
// corrections, the state algebra) and the dispatch to the tensor-core kernels of gla_states.cu, gla_intra.cu and
// gla_dqk.cu. Every stage computes the same function as its CPU twin in kernels/gla/cpu/gla_cpu.cpp, with the same
// nullable pointers; see NOTES.md beside this file for the design and the measured times.
#include "kernels/gla/cuda/gla_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/error.h"
#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
namespace {

cudaStream_t stream_of(Stream st) { return static_cast<cudaStream_t>(st.handle); }  // nullptr: legacy stream 0

Dims dims_of(const GlaShape& s) {
  SPB_CHECK(s.B >= 1 && s.T >= 1 && s.H >= 1 && s.dk >= 1 && s.dv >= 1, "GlaShape must be positive");
  SPB_CHECK(s.chunks() <= 65535 && long(s.B) * s.H <= 65535, "grid too large for this shape");
  SPB_CHECK(s.pairs_in_range(), "GlaShape: a (b, h) pair range outside the tensor");
  SPB_CHECK(s.grad_rows_fit(), "GlaShape: grad_ld " + std::to_string(s.grad_ld) + " is shorter than a token's row");
  return Dims{s.B, s.T, s.H, s.dk, s.dv, s.chunks(), 1.0f / std::sqrt(float(s.dk)), s.pair_begin, s.pairs(),
              s.grad_ld};
}

int grid_for(long n, int threads) { return int(std::min<long>((n + threads - 1) / threads, 132L * 16)); }

// Last token of chunk n.
__device__ __forceinline__ int last_row(int n, int T) { return min(T, (n + 1) * kC) - 1; }

// ---- chunk_cumsum ---------------------------------------------------------------------------------------------------
// One thread per (chunk, pair bh0 + i, group of VEC features): a sequential inclusive sum down the chunk's rows. Loads of
// later rows do not depend on the running sum, so the unrolled loop keeps several in flight. Memory-bound: reads g
// once, writes gc once. VEC = 2 (4-byte loads, 8-byte stores) rather than 4: at B=1, T=16K, H=16, dk=128 VEC = 4
// gave 131K threads, half of what the SMs hold (ncu: 45 % occupancy). Measured: the same time there (DRAM stays at
// 67 %), 20 % less at T=16K, H=4, dk=256 (NOTES.md, "chunk_cumsum and lambda").
template <int VEC>
__global__ void cumsum_kernel(const bf16* __restrict__ g, float* __restrict__ gc, int T, int H, int dk, int bh0,
                              int nbh, long total) {
  const int ncg = dk / VEC;
  for (long idx = blockIdx.x * long(blockDim.x) + threadIdx.x; idx < total; idx += long(gridDim.x) * blockDim.x) {
    long r = idx;
    const int cg = int(r % ncg);
    r /= ncg;
    const int bh = bh0 + int(r % nbh);
    const int n = int(r / nbh);
    const int b = bh / H, h = bh % H;
    const int t0 = n * kC, len = min(kC, T - t0);
    const long stride = long(H) * dk;
    const long base = ((long(b) * T + t0) * H + h) * dk + long(cg) * VEC;
    float acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = 0.f;
#pragma unroll 8
    for (int i = 0; i < len; ++i) {
      const long o = base + i * stride;
      if constexpr (VEC == 4) {
        const uint2 w = *reinterpret_cast<const uint2*>(g + o);
        acc[0] += bf_lo(w.x), acc[1] += bf_hi(w.x), acc[2] += bf_lo(w.y), acc[3] += bf_hi(w.y);
        *reinterpret_cast<float4*>(gc + o) = make_float4(acc[0], acc[1], acc[2], acc[3]);
      } else if constexpr (VEC == 2) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(g + o);
        acc[0] += bf_lo(w), acc[1] += bf_hi(w);
        *reinterpret_cast<float2*>(gc + o) = make_float2(acc[0], acc[1]);
      } else {
        acc[0] += __bfloat162float(g[o]);
        gc[o] = acc[0];
      }
    }
  }
}

// lambda = sum over chunks of each chunk's total (gc at its last row). Block = (32 features, b*h) of kLambdaWarps
// warps; warp w sums a contiguous range of chunks, then warp 0 adds the partials in order: deterministic. 32 warps,
// not 8: the grid is only dk/32 x B*H blocks (64 at H=16, dk=128), and with 8 warps each walked 32 chunks, 13 us.
constexpr int kLambdaWarps = 32;
int g_cumsum_vec = 2;  // features per cumsum thread: 2, or 4 (for the benchmark's comparison)
__global__ void __launch_bounds__(kLambdaWarps * 32)
    lambda_kernel(const float* __restrict__ gc, float* __restrict__ lambda, int T, int H, int dk, int NT, int bh0) {
  extern __shared__ float part_[];  // [kLambdaWarps][32]
  float(*part)[32] = reinterpret_cast<float(*)[32]>(part_);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int f = blockIdx.x * 32 + lane, bh = bh0 + blockIdx.y, b = bh / H, h = bh % H;
  const int per = (NT + kLambdaWarps - 1) / kLambdaWarps, n0 = w * per, n1 = min(NT, n0 + per);
  float acc = 0.f;
  if (f < dk) {
#pragma unroll 8
    for (int n = n0; n < n1; ++n) acc += gc[((long(b) * T + last_row(n, T)) * H + h) * dk + f];
  }
  part[w][lane] = acc;
  __syncthreads();
  if (w == 0 && f < dk) {
    float s = 0.f;
    for (int i = 0; i < kLambdaWarps; ++i) s += part[i][lane];
    lambda[long(bh) * dk + f] = s;
  }
}

// ---- the late-state corrections -------------------------------------------------------------------------------------
// Each block walks a group of consecutive chunks and carries the running prefix (or suffix) of chunk totals in
// shared memory; the prefix at the group's start is summed in the same order as the CPU (so it is bit-identical).
constexpr int kGroup = 8;

// sum_{s < count} total(s), added in order (bit-identical to a plain loop) but with the loads issued 8 at a time:
// the totals are independent global loads, and one at a time they cost a memory latency each.
template <class Total>
__device__ __forceinline__ float ordered_prefix(int count, Total total) {
  float p = 0.f;
  int s = 0;
  for (; s + 8 <= count; s += 8) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = total(s + u);
#pragma unroll
    for (int u = 0; u < 8; ++u) p += v[u];
  }
  for (; s < count; ++s) p += total(s);
  return p;
}

// o_t += s S_in^T (q_t * exp(c_t)), c_t = prefix_n + gc_t <= 0. Block = (64 dv columns, group of chunks, b*h),
// tf32 mma over feature slices of 32 (synchronous loads: this stage is not on the hot path).
constexpr int OA_QS = 40, OA_GS = 40, OA_SS = 68;
constexpr size_t kOaSmemFixed = size_t(kC) * OA_QS * 2 + size_t(kC) * OA_GS * 4 + size_t(32) * OA_SS * 4;

__global__ void __launch_bounds__(128) output_add_initial_kernel(const bf16* q, const float* gc, const float* S_in,
                                                                 bf16* o, Dims d, bool vq, bool vg, bool vs) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  float* Gs = reinterpret_cast<float*>(smem + size_t(kC) * OA_QS * 2);
  float* Ss = Gs + kC * OA_GS;
  float* pre = Ss + 32 * OA_SS;  // [nsl * 32]
  const int j0 = blockIdx.x * 64, bh = d.bh0 + blockIdx.z, b = bh / d.H, h = bh % d.H;
  const int nb = blockIdx.y * kGroup, ne = min(d.NT, nb + kGroup);
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int nsl = (d.dk + 31) / 32;
  const long qrow = long(d.H) * d.dk, vrow = long(d.H) * d.dv;
  const float* S = S_in + long(bh) * d.dk * d.dv;
  for (int f = tid; f < nsl * 32; f += 128)
    pre[f] = f < d.dk ? ordered_prefix(nb, [&](int m) { return gc[((long(b) * d.T + last_row(m, d.T)) * d.H + h) * d.dk + f]; })
                      : 0.f;
  const int r0 = 16 * w + g, r1 = r0 + 8;
  for (int n = nb; n < ne; ++n) {
    const int t0 = n * kC, len = min(kC, d.T - t0);
    const long qbase = ((long(b) * d.T + t0) * d.H + h) * d.dk;
    float acc[8][4] = {};
    for (int s = 0; s < nsl; ++s) {
      const int f0 = s * 32;
      __syncthreads();
      // 16-byte cp.async where aligned (with vec = false, element copies in the out-of-line edge loader, one
      // global latency after another, 0.63-0.93 ms at T=16K, H=16, 128/128).
      load_tile<bf16, kC, 32, 128>(Qs, OA_QS, q + qbase + f0, qrow, len, d.dk - f0, vq);
      load_tile<float, kC, 32, 128>(Gs, OA_GS, gc + qbase + f0, qrow, len, d.dk - f0, vg);
      load_tile<float, 32, 64, 128>(Ss, OA_SS, S + long(f0) * d.dv + j0, d.dv, d.dk - f0, d.dv - j0, vs);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int c = kk * 8 + 2 * t;
        const uint32_t qa = ld32(Qs + r0 * OA_QS + c), qb = ld32(Qs + r1 * OA_QS + c);
        const float2 ga = ldf2(Gs + r0 * OA_GS + c), gb = ldf2(Gs + r1 * OA_GS + c);
        const float p0 = pre[f0 + c], p1 = pre[f0 + c + 1];
        const uint32_t a0 = r0 < len ? tf32_bits(bf_lo(qa) * __expf(p0 + ga.x)) : 0u;
        const uint32_t a2 = r0 < len ? tf32_bits(bf_hi(qa) * __expf(p1 + ga.y)) : 0u;
        const uint32_t a1 = r1 < len ? tf32_bits(bf_lo(qb) * __expf(p0 + gb.x)) : 0u;
        const uint32_t a3 = r1 < len ? tf32_bits(bf_hi(qb) * __expf(p1 + gb.y)) : 0u;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const uint32_t b0 = tf32_bits(Ss[c * OA_SS + nt * 8 + g]), b1 = tf32_bits(Ss[(c + 1) * OA_SS + nt * 8 + g]);
          mma_tf32(acc[nt], a0, a1, a2, a3, b0, b1);
        }
      }
    }
    const long vbase = ((long(b) * d.T + t0) * d.H + h) * d.dv;
    if ((d.dv & 1) == 0 && (reinterpret_cast<uintptr_t>(o) & 3) == 0) {
      // Pairs of adjacent columns (4-byte aligned: dv is even and so is every offset), all 16 loaded before any store
      // (o may alias q or gc for all the compiler knows). Not measured alone: the kernel's time was the tile loads'
      // (see the loads above); with the 16-byte loads and these pairs it measured 0.24 ms at T=16K, H=16, 128/128.
      __nv_bfloat162 old[8][2];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = e ? r1 : r0, c = j0 + nt * 8 + 2 * t;
          old[nt][e] = r < len && c < d.dv ? *reinterpret_cast<const __nv_bfloat162*>(o + vbase + r * vrow + c)
                                           : __floats2bfloat162_rn(0.f, 0.f);
        }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = e ? r1 : r0, c = j0 + nt * 8 + 2 * t;
          if (r < len && c < d.dv) {
            const float2 f = __bfloat1622float2(old[nt][e]);
            *reinterpret_cast<__nv_bfloat162*>(o + vbase + r * vrow + c) = __floats2bfloat162_rn(
                f.x + d.scale * acc[nt][2 * e], f.y + d.scale * acc[nt][2 * e + 1]);
          }
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int c = j0 + nt * 8 + 2 * t;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e < 2 ? r0 : r1, cc = c + (e & 1);
          if (r < len && cc < d.dv) {
            bf16* p = o + vbase + r * vrow + cc;
            *p = __float2bfloat16(__bfloat162float(*p) + d.scale * acc[nt][e]);
          }
        }
      }
    }
    __syncthreads();
    for (int f = tid; f < d.dk; f += 128) pre[f] += gc[((long(b) * d.T + last_row(n, d.T)) * d.H + h) * d.dk + f];
  }
}

// dst += diag(ex) X over one state [dk, dv] (row r scaled by ex[r]), dst fp32 (ht) or bf16 (hs: read, added in fp32,
// rounded to nearest even), by the block's threads.
template <typename T>
__device__ __forceinline__ void add_scaled_state(T* dst, const float* X, const float* ex, long ss, int dv) {
  constexpr uintptr_t kAlign = 4 * sizeof(T);  // (ld_f4 / st_f4)
  if ((dv & 3) == 0 && (reinterpret_cast<uintptr_t>(dst) & (kAlign - 1)) == 0 &&
      (reinterpret_cast<uintptr_t>(X) & 15) == 0) {  // rows of whole quads: one access per 4 elements
    // A plain loop: loading 8 quads per thread before any store measured no faster (~175 us, ~3 TB/s at T=16K,
    // H=16, 128/128, fp32 hs), so the simpler form stays.
    const int dv4 = dv / 4;
    for (long i = threadIdx.x; i < ss / 4; i += blockDim.x) {
      const float e = ex[i / dv4];
      const float4 x = *reinterpret_cast<const float4*>(X + 4 * i);
      float4 y = ld_f4(dst + 4 * i);
      y.x += e * x.x, y.y += e * x.y, y.z += e * x.z, y.w += e * x.w;
      st_f4(dst + 4 * i, y);
    }
  } else {
    for (long i = threadIdx.x; i < ss; i += blockDim.x) st_f1(dst + i, ld_f1(dst + i) + ex[i / dv] * X[i]);
  }
}

// hs[n] += diag(exp prefix_n) S_in, ht += diag(exp prefix_NT) S_in. Block = (group of chunk slots 0..NT, b*h).
__global__ void __launch_bounds__(256) add_state_kernel(const float* gc, const float* S_in, bf16* hs, float* ht,
                                                        Dims d) {
  extern __shared__ float sh[];  // run[dk], ex[dk]
  float* run = sh;
  float* ex = sh + d.dk;
  const int bh = d.bh0 + blockIdx.y, b = bh / d.H, h = bh % d.H, tid = threadIdx.x;
  const int sb = blockIdx.x * kGroup, se = min(d.NT + 1, sb + kGroup);
  auto chunk_total = [&](int n, int f) { return gc[((long(b) * d.T + last_row(n, d.T)) * d.H + h) * d.dk + f]; };
  for (int f = tid; f < d.dk; f += blockDim.x)
    run[f] = ordered_prefix(sb, [&](int n) { return chunk_total(n, f); });
  const long ss = long(d.dk) * d.dv;
  const float* Xb = S_in + long(bh) * ss;
  for (int n = sb; n < se; ++n) {  // chunk slot n = NT is ht
    __syncthreads();
    for (int f = tid; f < d.dk; f += blockDim.x) ex[f] = expf(run[f]);
    __syncthreads();
    if (n >= 0 && n < d.NT) add_scaled_state(hs + (long(bh) * d.NT + n) * ss, Xb, ex, ss, d.dv);
    else if (ht) add_scaled_state(ht + long(bh) * ss, Xb, ex, ss, d.dv);
    if (n >= 0 && n < d.NT)
      for (int f = tid; f < d.dk; f += blockDim.x) run[f] += chunk_total(n, f);
  }
}

// ---- state algebra ----------------------------------------------------------------------------------------------------
__global__ void fold_kernel(size_t rows, size_t cols, const float* decay, const float* x, const float* y,
                            float* out) {
  const size_t n = rows * cols;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = expf(decay[i / cols]) * x[i] + y[i];
}
__global__ void vec_add_kernel(size_t n, const float* a, const float* b, float* out) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}
struct Copy4d {
  int64_t d[4], ds[4], ss[4];
};
template <typename T>
__global__ void copy4d_kernel(char* dst, const char* src, size_t eb, Copy4d c, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i;
    const int64_t e3 = r % c.d[3];
    r /= c.d[3];
    const int64_t e2 = r % c.d[2];
    r /= c.d[2];
    const int64_t e1 = r % c.d[1];
    const int64_t e0 = r / c.d[1];
    const int64_t doff = (e0 * c.ds[0] + e1 * c.ds[1] + e2 * c.ds[2] + e3 * c.ds[3]) * int64_t(eb);
    const int64_t soff = (e0 * c.ss[0] + e1 * c.ss[1] + e2 * c.ss[2] + e3 * c.ss[3]) * int64_t(eb);
    if (sizeof(T) > 1) {
      *reinterpret_cast<T*>(dst + doff) = *reinterpret_cast<const T*>(src + soff);
    } else {
      for (size_t k = 0; k < eb; ++k) dst[doff + k] = src[soff + k];
    }
  }
}

// GlaKernels::signal_ready (ns = 0) and launch_signal_after: the stream's earlier kernels have finished (stream order)
// and their writes are visible at GPU scope; the release orders this store after them for a reader that acquires the
// word; `ns` nanoseconds (%globaltimer) after the kernel starts.
__global__ void signal_after_kernel(uint32_t* ready, uint32_t epoch, unsigned long long ns) {
#ifndef SPB_GLA_EMU
  const uint64_t t0 = ptx::globaltimer_ns();
  while (ptx::globaltimer_ns() - t0 < ns) {
  }
#endif
  st_release_gpu(ready, epoch);
}

// Whether chunk_initial_dstate reads g rather than gc where it can (see chunk_final_state).
constexpr bool kDstateFromGates = false;

class CudaKernels final : public GlaKernels {
 public:
  DType act_dtype() const override { return DType::bf16; }
  // hs and dhs in bf16 (as flash-linear-attention's chunk_gla keeps h in the input dtype): they are most of the
  // attention's memory traffic (kernels/gla/cuda/NOTES.md, "The chunk states in bf16").
  DType chunk_state_type() const override { return DType::bf16; }

  void chunk_cumsum(const GlaShape& s, const void* g, float* gc, float* lambda, Stream st) override {
    const Dims d = dims_of(s);
    const auto* gb = static_cast<const bf16*>(g);
    const auto addr = [](const void* x) { return reinterpret_cast<uintptr_t>(x); };
    int vec = 1;
    if (g_cumsum_vec == 4 && s.dk % 4 == 0 && (addr(g) & 7) == 0 && aligned16(gc)) vec = 4;
    else if (s.dk % 2 == 0 && (addr(g) & 3) == 0 && (addr(gc) & 7) == 0) vec = 2;
    const long total = long(d.NT) * d.pairs() * (s.dk / vec);
    const int grid = grid_for(total, 256);
    cudaStream_t cs = stream_of(st);
    if (vec == 4) cumsum_kernel<4><<<grid, 256, 0, cs>>>(gb, gc, s.T, s.H, s.dk, d.bh0, d.pairs(), total);
    else if (vec == 2) cumsum_kernel<2><<<grid, 256, 0, cs>>>(gb, gc, s.T, s.H, s.dk, d.bh0, d.pairs(), total);
    else cumsum_kernel<1><<<grid, 256, 0, cs>>>(gb, gc, s.T, s.H, s.dk, d.bh0, d.pairs(), total);
    SPB_CUDA_LAUNCH();
    if (lambda) {
      const dim3 lgrid((s.dk + 31) / 32, d.pairs());
      lambda_kernel<<<lgrid, kLambdaWarps * 32, kLambdaWarps * 32 * 4, cs>>>(gc, lambda, s.T, s.H, s.dk, d.NT, d.bh0);
      SPB_CUDA_LAUNCH();
    }
  }

  // The chunk states by spans (launch_states_spans: a reduction over spans, a fold, then every span's recurrence at
  // once) unless set_states_variant(1) asks for the sequential walk (launch_states), which also serves hs == nullptr.
  // Measured against the walk: kernels/gla/cuda/NOTES.md, "The chunk states".
  void chunk_states_fwd(const GlaShape& s, const void* k, const void* v, const float* gc, const float* h0, void* hs,
                        float* ht, Stream st) override {
    states(s, false, k, v, gc, h0, static_cast<bf16*>(hs), ht, false, st);
  }
  void chunk_states_fwd_after_boundary(const GlaShape& s, const void* k, const void* v, const float* gc,
                                       const float* h0, void* hs, float* ht, Stream st) override {
    states(s, false, k, v, gc, h0, static_cast<bf16*>(hs), ht, true, st);
  }

  // The boundary states by the chunk-parallel reduction of gla_boundary.cu (scratch: its per-span partials). The
  // forward reads g where boundary_reads_gates (no chunk_cumsum before it: that runs while M_p travels), else gc.
  // The backward has gc already; it reads g only where kDstateFromGates, i.e. where that kernel measured faster
  // than the one reading gc (kernels/gla/cuda/NOTES.md, "The boundary kernel").
  bool chunk_final_state(const GlaShape& s, const void* k, const void* v, const void* g, float* gc, float* ht,
                         float* lambda, Stream st) override {
    const Dims d = dims_of(s);
    const auto* kb = static_cast<const bf16*>(k);
    const auto* vb = static_cast<const bf16*>(v);
    float* part = scratch(boundary_scratch_elems(d));
    const bool raw = boundary_reads_gates(d);
    if (raw) {
      launch_boundary_gates(d, false, kb, vb, static_cast<const bf16*>(g), ht, lambda, part, stream_of(st));
    } else {
      chunk_cumsum(s, g, gc, lambda, st);
      launch_boundary(d, false, kb, vb, gc, ht, part, stream_of(st));
    }
    remember_partials(BoundaryCall{false, k, v, d});
    return !raw;
  }
  bool final_state_reads_gates(const GlaShape& s) const override { return boundary_reads_gates(dims_of(s)); }
  void chunk_initial_dstate(const GlaShape& s, const void* q, const void* d_o, const void* g, const float* gc,
                            float* dh0, Stream st) override {
    const Dims d = dims_of(s);
    const auto* qb = static_cast<const bf16*>(q);
    const auto* ob = static_cast<const bf16*>(d_o);
    float* part = scratch(boundary_scratch_elems(d));
    if (kDstateFromGates && boundary_reads_gates(d))
      launch_boundary_gates(d, true, qb, ob, static_cast<const bf16*>(g), dh0, nullptr, part, stream_of(st));
    else
      launch_boundary(d, true, qb, ob, gc, dh0, part, stream_of(st));
    remember_partials(BoundaryCall{true, q, d_o, d});
  }

  void chunk_output(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc, const void* hs,
                    void* o, Stream st) override {
    launch_output(dims_of(s), static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v),
                  gc, static_cast<const bf16*>(hs), static_cast<bf16*>(o), stream_of(st));
  }

  void output_add_initial(const GlaShape& s, const void* q, const float* gc, const float* S_in, void* o,
                          Stream st) override {
    const Dims d = dims_of(s);
    const size_t smem = kOaSmemFixed + size_t((s.dk + 31) / 32) * 32 * 4;
    static const bool attr = [] {
      SPB_CUDA(cudaFuncSetAttribute(output_add_initial_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    200 * 1024));
      return true;
    }();
    (void)attr;
    const dim3 grid((s.dv + 63) / 64, (d.NT + kGroup - 1) / kGroup, d.pairs());
    output_add_initial_kernel<<<grid, 128, smem, stream_of(st)>>>(
        static_cast<const bf16*>(q), gc, S_in, static_cast<bf16*>(o), d, aligned16(q) && s.dk % 8 == 0,
        aligned16(gc) && s.dk % 4 == 0, aligned16(S_in) && s.dv % 4 == 0);
    SPB_CUDA_LAUNCH();
  }

  void states_add_initial(const GlaShape& s, const float* gc, const float* S_in, void* hs, float* ht,
                          Stream st) override {
    const Dims d = dims_of(s);
    const dim3 grid((d.NT + 1 + kGroup - 1) / kGroup, d.pairs());
    add_state_kernel<<<grid, 256, size_t(2) * s.dk * 4, stream_of(st)>>>(gc, S_in, static_cast<bf16*>(hs), ht, d);
    SPB_CUDA_LAUNCH();
  }

  void chunk_states_bwd(const GlaShape& s, const void* q, const void* d_o, const float* gc, const float* dht,
                        void* dhs, float* dh0, Stream st) override {
    states(s, true, q, d_o, gc, dht, static_cast<bf16*>(dhs), dh0, false, st);
  }
  void chunk_states_bwd_after_boundary(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                       const float* dht, void* dhs, float* dh0, Stream st) override {
    states(s, true, q, d_o, gc, dht, static_cast<bf16*>(dhs), dh0, true, st);
  }

  // The chunk states beside the scan that brings their initial state (gla_states_spans.cu, launch_states_spans' late):
  // each block adds it when it sees the word, at the start of a chunk; chunk_states_settle completes the blocks that
  // never did. Only the chunk states by spans take a late state (not set_states_variant(1)'s sequential walk).
  void chunk_states_fwd_arriving(const GlaShape& s, const void* k, const void* v, const float* gc,
                                 const ArrivingState& h0, void* hs, float* ht, Stream st) override {
    states_arriving(s, false, k, v, gc, h0, static_cast<bf16*>(hs), ht, st);
  }
  void chunk_states_bwd_arriving(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                 const ArrivingState& dht, void* dhs, float* dh0, Stream st) override {
    states_arriving(s, true, q, d_o, gc, dht, static_cast<bf16*>(dhs), dh0, st);
  }
  void chunk_states_settle(const GlaShape& s, bool reverse, const float* gc, const ArrivingState& init, void* hs,
                           float* fin, Stream st) override {
    const Dims d = dims_of(s);
    SPB_CHECK(pending_elems_ >= states_pending_count(d), "chunk_states_settle before chunk_states_*_arriving");
    launch_states_settle(d, reverse, gc, LateInit{init.state, init.ready, init.epoch, pending_},
                         static_cast<bf16*>(hs), fin, scratch(boundary_scratch_elems(d)), stream_of(st));
  }
  void signal_ready(uint32_t* ready, uint32_t epoch, Stream st) override {
    launch_signal_after(ready, epoch, 0, stream_of(st));
  }

  void chunk_grads(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc, const void* hs_,
                   const float* ht, const void* dhs_, const void* d_o, void* dq, void* dk, void* dv, void* dg,
                   Stream st) override {
    (void)ht;  // rowsum(dH * H1) is rebuilt from H0 and the chunk (gla_dqk.cu): the same function, one read less
    const Dims d = dims_of(s);
    const auto* qb = static_cast<const bf16*>(q);
    const auto* kb = static_cast<const bf16*>(k);
    const auto* vb = static_cast<const bf16*>(v);
    const auto* ob = static_cast<const bf16*>(d_o);
    const auto* hs = static_cast<const bf16*>(hs_);
    const auto* dhs = static_cast<const bf16*>(dhs_);
    launch_dqk(d, qb, kb, vb, ob, gc, hs, dhs, static_cast<bf16*>(dq), static_cast<bf16*>(dk), static_cast<bf16*>(dg),
               stream_of(st));
    launch_dv(d, qb, kb, ob, gc, dhs, static_cast<bf16*>(dv), stream_of(st));
  }

  ~CudaKernels() override {
    cudaFree(scratch_);
    cudaFree(pending_);
  }

  void state_fold(size_t rows, size_t cols, const float* decay, const float* x, const float* y, float* out,
                  Stream st) override {
    const size_t n = rows * cols;
    if (n == 0) return;
    fold_kernel<<<grid_for(long(n), 256), 256, 0, stream_of(st)>>>(rows, cols, decay, x, y, out);
    SPB_CUDA_LAUNCH();
  }

  void vec_add(size_t n, const float* a, const float* b, float* out, Stream st) override {
    if (n == 0) return;
    vec_add_kernel<<<grid_for(long(n), 256), 256, 0, stream_of(st)>>>(n, a, b, out);
    SPB_CUDA_LAUNCH();
  }

  void copy_4d(void* dst, const void* src, size_t eb, const int64_t dims[4], const int64_t dst_strides[4],
               const int64_t src_strides[4], Stream st) override {
    Copy4d c;
    int64_t total = 1;
    for (int i = 0; i < 4; ++i) {
      c.d[i] = dims[i], c.ds[i] = dst_strides[i], c.ss[i] = src_strides[i];
      total *= dims[i];
    }
    if (total <= 0 || eb == 0) return;
    auto* d = static_cast<char*>(dst);
    const auto* sp = static_cast<const char*>(src);
    const uintptr_t al = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
    const int grid = grid_for(total, 256);
    cudaStream_t stream = stream_of(st);
    if (eb == 2 && al % 2 == 0) copy4d_kernel<uint16_t><<<grid, 256, 0, stream>>>(d, sp, eb, c, total);
    else if (eb == 4 && al % 4 == 0) copy4d_kernel<uint32_t><<<grid, 256, 0, stream>>>(d, sp, eb, c, total);
    else if (eb == 8 && al % 8 == 0) copy4d_kernel<uint2><<<grid, 256, 0, stream>>>(d, sp, eb, c, total);
    else if (eb == 16 && al % 16 == 0) copy4d_kernel<uint4><<<grid, 256, 0, stream>>>(d, sp, eb, c, total);
    else copy4d_kernel<char><<<grid, 256, 0, stream>>>(d, sp, eb, c, total);
    SPB_CUDA_LAUNCH();
  }

 private:
  // The boundary calls (chunk_final_state / chunk_initial_dstate) whose per-span partials are still in scratch.
  // A pair's partials have their own place there (gla_boundary.cuh), so calls on disjoint pair ranges keep theirs;
  // a call that rewrites a pair's partials drops the entry that covered it, and a new scratch drops them all.
  struct BoundaryCall {
    bool reverse = false;
    const void* x = nullptr;
    const void* y = nullptr;
    Dims d{};
    bool operator==(const BoundaryCall& o) const {
      return reverse == o.reverse && x == o.x && y == o.y && d.B == o.d.B && d.T == o.d.T && d.H == o.d.H &&
             d.dk == o.d.dk && d.dv == o.d.dv && d.bh0 == o.d.bh0 && d.pairs() == o.d.pairs();
    }
  };
  std::vector<BoundaryCall> partials_;
  void forget_partials(const Dims& d) {
    partials_.erase(std::remove_if(partials_.begin(), partials_.end(),
                                   [&](const BoundaryCall& c) {
                                     return c.d.bh0 < d.bh0 + d.pairs() && d.bh0 < c.d.bh0 + c.d.pairs();
                                   }),
                    partials_.end());
  }
  void remember_partials(const BoundaryCall& c) {
    forget_partials(c.d);
    partials_.push_back(c);
  }
  bool has_partials(const BoundaryCall& c) const {
    return std::find(partials_.begin(), partials_.end(), c) != partials_.end();
  }

  // chunk_states_fwd / _bwd; after_boundary: reuse the partials of this range's boundary call if they are in scratch.
  void states(const GlaShape& s, bool reverse, const void* x, const void* y, const float* gc, const float* init,
              bf16* hs, float* fin, bool after_boundary, Stream st) {
    const Dims d = dims_of(s);
    const auto* xb = static_cast<const bf16*>(x);
    const auto* yb = static_cast<const bf16*>(y);
    if (states_variant() == 1 || !hs) {
      launch_states(d, reverse, xb, yb, gc, init, hs, fin, stream_of(st));
      return;
    }
    float* part = scratch(boundary_scratch_elems(d));
    const bool reuse = after_boundary && has_partials(BoundaryCall{reverse, x, y, d}) && states_reuse_boundary(d);
    launch_states_spans(d, reverse, xb, yb, gc, init, hs, fin, part, reuse, stream_of(st));
    forget_partials(d);  // the fold rewrote them
  }

  void states_arriving(const GlaShape& s, bool reverse, const void* x, const void* y, const float* gc,
                       const ArrivingState& init, bf16* hs, float* fin, Stream st) {
    SPB_CHECK(init.state && init.ready && hs, "chunk_states_*_arriving: the state, its word and hs are required");
    SPB_CHECK(states_variant() == 0, "chunk_states_*_arriving: the sequential walk takes no late initial state");
    const Dims d = dims_of(s);
    float* part = scratch(boundary_scratch_elems(d));
    const size_t np = states_pending_count(d);
    if (pending_elems_ < np) {
      if (pending_) SPB_CUDA(cudaFree(pending_));
      SPB_CUDA(cudaMalloc(&pending_, np * sizeof(int)));
      pending_elems_ = np;
    }
    const bool reuse = has_partials(BoundaryCall{reverse, x, y, d}) && states_reuse_boundary(d);
    const LateInit late{init.state, init.ready, init.epoch, pending_};
    launch_states_spans(d, reverse, static_cast<const bf16*>(x), static_cast<const bf16*>(y), gc, nullptr, hs, fin,
                        part, reuse, stream_of(st), &late);
    forget_partials(d);  // the fold rewrote them
  }

  // Grow-only device scratch (allocation synchronises; later calls reuse it). Calls on one stream at a time share it.
  float* scratch(size_t elems) {
    if (scratch_elems_ < elems) {
      if (scratch_) SPB_CUDA(cudaFree(scratch_));
      SPB_CUDA(cudaMalloc(&scratch_, elems * 4));
      scratch_elems_ = elems;
      partials_.clear();
    }
    return scratch_;
  }
  float* scratch_ = nullptr;
  size_t scratch_elems_ = 0;
  int* pending_ = nullptr;  // states_arriving's blocks that never saw their state, for chunk_states_settle
  size_t pending_elems_ = 0;
};

__global__ void tf32_bits_kernel(const float* in, uint32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tf32_bits(in[i]);
}

}  // namespace

void set_cumsum_vec(int v) { g_cumsum_vec = v; }

void launch_signal_after(uint32_t* ready, uint32_t epoch, double us, cudaStream_t stream) {
  signal_after_kernel<<<1, 1, 0, stream>>>(ready, epoch, static_cast<unsigned long long>(us * 1e3));
  SPB_CUDA_LAUNCH();
}

void launch_tf32_bits(const float* in, uint32_t* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  tf32_bits_kernel<<<(n + 255) / 256, 256, 0, stream>>>(in, out, n);
  SPB_CUDA_LAUNCH();
}

}  // namespace gla_cuda

std::unique_ptr<GlaKernels> make_cuda_kernels() { return std::make_unique<gla_cuda::CudaKernels>(); }

}  // namespace spb
