// The boundary state of a rank alone, without the chunk states: a chunk-parallel reduction (ZeCO / LASP-2 need only
// M_p and D_p before any communication; the ordinary recurrence then runs once with the true boundary states).
//
//   forward:  fin = sum_n diag(exp(sum_{m>n} B_m)) (K_n * exp(B_n - b))^T V_n     = launch_states' ht, init = 0
//   backward: fin = sum_n diag(exp(sum_{m<n} B_m)) (s Q_n * exp(b))^T dO_n        = launch_states' dh0, init = 0
//
// Design:
// - Stage 1 (boundary_kernel): block = (b*h, span of `span` consecutive chunks, BK-row dk tile, BN-column dv tile),
//   8 warps in a 2 x 4 grid, each owning a (BK/2) x (BN/4) piece of the tile in mma accumulator registers. The block
//   runs the recurrence of gla_states.cu over its span only, from a zero state (acc = diag(exp B_n) acc + X~_n^T Y_n,
//   chunks ascending forward, descending backward), and writes the span's partial state P_s and its total log-decay
//   tau_s = sum of B_n over the span (per dk row) to scratch. The spans give the parallelism, so the tiles can be big
//   (128 x 128, or 128 x 256 where dv > 128): per 32 tokens a warp does 64 (128) mmas against 32 8-byte loads of X~
//   and 4 (8) ldmatrix of y, where the recurrence needs 16 x 64 tiles to fill the GPU and is latency-bound.
// - Stage 2 (boundary_fold_kernel): fin = the spans folded in order, acc = diag(exp tau_s) acc + P_s (s = 0 .. S-1
//   forward, S-1 .. 0 backward), one thread per 4 state elements. With one span (S == 1) stage 1 writes fin itself
//   and stage 2 is skipped. Deterministic: fixed orders, no atomics.
// - Numerics are the recurrence's: X~ = k * exp(B - b) (forward) or (s * q) * exp(b) (backward) by the same
//   expression as gla_states.cu, rounded to tf32 once; y (v or do) is exact in tf32 (bf16 bits); fp32 accumulation on
//   mma.sync m16n8k8 tf32; the chunk decay is applied to the accumulators in fp32 as the recurrence does. Only the
//   order of the fp32 sums differs (and exp(sum B) instead of the product of exp(B) across spans): ~1e-7 relative.
// - Pipeline: a step is half a chunk (32 tokens), so a stage is small (x, y and gc tiles plus the gc row of the chunk's
//   last token, which holds B_n for both halves) and the pipeline can be deep: NS = 5-6 stages at 128-row tiles, NS - 2
//   steps in flight (124-134 KB per SM; a memory-bound shape needs ~30 KB per SM in flight to reach ~4 TB/s, and the
//   2-block layouts below keep 59-138 KB). X~ of step s+1 is built IN
//   PLACE of its gc tile (same fp32 size; each thread rewrites only the elements it read) while step s is multiplied,
//   so there is no separate X~ buffer and one barrier per step. X~ stays [token][feature] (stride BK + 4 floats): the
//   mma rows are permuted (row g <-> feature 2g, row g+8 <-> feature 2g+1 of each 16-row tile) on top of the
//   k-permutation of gla_cuda_common.cuh, so an A fragment is two conflict-free 8-byte loads (token 2t: features 2g,
//   2g+1; token 2t+1: the same) and an accumulator fragment covers rows 2g, 2g+1. y fragments by ldmatrix.x4.trans.
//   A partial last chunk gives a second half with no tokens: it is loaded as zeros and costs one empty step per head.
// - Spans: S spans per (b, h) chosen so that the grid fills whole waves (minimising waves x (chunks per span + 2)):
//   B=1 T=16384 H=16 dk=dv=128 -> 8 spans of 32 chunks, 128 blocks on 132 SMs (one wave, one block per SM);
//   B=1 T=16384 H=4 dk=256 dv=512 -> 8 spans of 32 chunks, 2 dk x 2 dv tiles, 128 blocks. Blocks of one (b*h, span)
//   are adjacent in the grid (tile index fastest), so they run together and share their x / gc / y tiles through L2.
// - Resources (nvcc 13.0, -arch=sm_90a -Xptxas -v; no spills), registers forward / backward:
//     BK x BN    regs     smem (stages)        blocks/SM
//     128 x 128  194/192  201 KB (6 x 33.5 KB)  1   <- B1 T16384 H16 dk=dv=128
//     128 x 256  254/255  207.5 KB (5 x 41.5)   1   <- B1 T16384 H4 dk=256 dv=512 (the k16 loop is not unrolled
//                                                      there: fully unrolled it needs 255 registers and spills)
//     64 x 256   182/181  175.5 KB (6 x 29.3)   1
//     128 x 64   126/124  88.5 KB (3 x 29.5)    2   (__launch_bounds__(256, 2): <= 128 registers)
//     64 x 128   122/120  106 KB (5 x 21.3)     2
//     64 x 64    101/96   103.5 KB (6 x 17.3)   2
//   Fold: 32 / 40 registers (4 / 1 columns per thread), no shared memory.
// - Expected on one H200 (not yet measured): dk=dv=128 moves 268 MB (k, v bf16; gc fp32) + 8 MB of partials and is
//   DRAM-bound, ~65-70 us for stage 1 at 3.9-4.1 TB/s (its tensor work, 8.6 GFLOP at ~330 TFLOP/s of tf32
//   mma.sync, would take ~27 us) plus ~3 us for the fold; dk=256 dv=512 moves 168 MB + 16 MB (~45 us) but does
//   17.2 GFLOP of tf32 mma.sync, ~52 us at ~330 TFLOP/s on 128 of 132 SMs: tensor-bound, ~58-66 us in all.
// - Any T >= 1, B, H; any dk, dv (tiles masked; element copies where a tensor is not 16-byte aligned, as
//   gla_states.cu's vx / vy / vg).
#include <algorithm>

#include "harness/cuda_check.h"
#include "kernels/cuda/gla_cuda_common.cuh"
#include "kernels/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
namespace {

constexpr int kBThreads = 256;
constexpr int kTS = 32;  // tokens per pipeline step: half a chunk

template <int BK, int BN>
struct BoundaryLayout {
  static constexpr int MT = BK / 32;   // m16 tiles per warp (warps: 2 along dk, 4 along dv)
  static constexpr int NT8 = BN / 32;  // n8 tiles per warp
  // Blocks per SM the layout is sized for: 2 (<= 128 registers) where a warp holds <= 32 accumulators, else 1.
  static constexpr int BPS = MT * NT8 <= 8 ? 2 : 1;
  static constexpr int XS = BK;                                  // bf16 stride of the raw x tile
  static constexpr int GS = BK + 4;   // fp32 stride of gc / X~ (in place): A-fragment float2 loads conflict-free
  static constexpr int YS = BN + 8;   // bf16 stride of y: ldmatrix rows 16 B apart modulo 128 B, conflict-free
  static constexpr size_t x_bytes = size_t(kTS) * XS * 2, y_bytes = size_t(kTS) * YS * 2;
  static constexpr size_t g_bytes = size_t(kTS) * GS * 4, b_bytes = size_t(BK) * 4;
  static constexpr size_t stage = x_bytes + y_bytes + g_bytes + b_bytes;
  static constexpr size_t budget = BPS == 1 ? size_t(220) * 1024 : size_t(110) * 1024;
  static constexpr int NS = int(budget / stage) < 6 ? int(budget / stage) : 6;
  static constexpr size_t total = NS * stage;
  static_assert(NS >= 3, "the pipeline needs 3 stages");
  static_assert(x_bytes % 16 == 0 && y_bytes % 16 == 0 && g_bytes % 16 == 0 && b_bytes % 16 == 0, "layout");
};

struct BoundaryParams {
  const bf16* x;
  const bf16* y;
  const float* gc;
  float* out;  // S == 1: fin [B*H, dk, dv]; S > 1: the partial states [B*H, S, dk, dv]
  float* tau;  // S > 1: the spans' log-decays [B*H, S, dk]
  int B, T, H, dk, dv, NT;
  int span, S;  // chunks per span, spans per (b, h)
  float scale;
  bool vx, vy, vg;
};

template <bool REV, int BK, int BN>
__global__ void __launch_bounds__(kBThreads, (BoundaryLayout<BK, BN>::BPS)) boundary_kernel(const BoundaryParams p) {
  using L = BoundaryLayout<BK, BN>;
  constexpr int NS = L::NS, MT = L::MT, NT8 = L::NT8;
  extern __shared__ __align__(16) unsigned char smem[];

  const int ntn = (p.dv + BN - 1) / BN;
  const int tile = blockIdx.x, sp = blockIdx.y, bh = blockIdx.z;
  const int i0 = (tile / ntn) * BK, j0 = (tile % ntn) * BN;
  const int b = bh / p.H, h = bh % p.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wm = warp & 1, wn = warp >> 1;  // this warp's piece: rows wm*BK/2, columns wn*BN/4
  const long xrow = long(p.H) * p.dk, yrow = long(p.H) * p.dv;
  const long xbase = (long(b) * p.T * p.H + h) * p.dk;  // token 0 of (b, h)
  const long ybase = (long(b) * p.T * p.H + h) * p.dv;
  const int c0 = sp * p.span, c1 = min(p.NT, c0 + p.span);  // this span's chunks [c0, c1)
  const int nsteps = 2 * (c1 - c0);

  auto X_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * L::stage); };
  auto Y_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * L::stage + L::x_bytes); };
  auto G_of = [&](int st) { return reinterpret_cast<float*>(smem + st * L::stage + L::x_bytes + L::y_bytes); };
  auto B_of = [&](int st) {
    return reinterpret_cast<float*>(smem + st * L::stage + L::x_bytes + L::y_bytes + L::g_bytes);
  };
  // Step s = half (s & 1) of chunk chunk_of(s); the chunks of the span in the recurrence's order.
  auto chunk_of = [&](int s) { return REV ? c1 - 1 - (s >> 1) : c0 + (s >> 1); };
  auto load_step = [&](int s) {
    const int n = chunk_of(s), t0 = n * kC + (s & 1) * kTS, st = s % NS;
    const int len = min(kTS, p.T - t0);        // <= 0: the empty second half of a short last chunk (zeros)
    const int tl = min(kC, p.T - n * kC) - 1;  // the chunk's last token: B_n = gc there
    const long tx = min(t0, p.T - 1);          // (a valid row address even for an empty half)
    load_tile<bf16, kTS, BK, kBThreads>(X_of(st), L::XS, p.x + xbase + tx * xrow + i0, xrow, len, p.dk - i0, p.vx);
    load_tile<bf16, kTS, BN, kBThreads>(Y_of(st), L::YS, p.y + ybase + tx * yrow + j0, yrow, len, p.dv - j0, p.vy);
    load_tile<float, kTS, BK, kBThreads>(G_of(st), L::GS, p.gc + xbase + tx * xrow + i0, xrow, len, p.dk - i0,
                                         p.vg);
    load_tile<float, 1, BK, kBThreads>(B_of(st), BK, p.gc + xbase + long(n * kC + tl) * xrow + i0, xrow, 1,
                                       p.dk - i0, p.vg);
  };
  // X~ of step s, tf32-rounded, zero beyond the sequence, written over the gc tile it was computed from: thread =
  // (4 features, every (256 / (BK/4))-th token); each element is read and rewritten by the same thread.
  constexpr int GPR = BK / 4;  // float4 groups per row
  const int xf = (tid % GPR) * 4, xr = tid / GPR;
  auto make_xt = [&](int s) {
    const int n = chunk_of(s), t0 = n * kC + (s & 1) * kTS, len = min(kTS, p.T - t0), st = s % NS;
    const bf16* X = X_of(st);
    float* G = G_of(st);
    const float4 Bf = *reinterpret_cast<const float4*>(B_of(st) + xf);
#pragma unroll
    for (int i = 0; i < kTS * GPR / kBThreads; ++i) {
      const int r = xr + i * (kBThreads / GPR);
      float4* gp = reinterpret_cast<float4*>(G + r * L::GS + xf);
      const float4 gv = *gp;
      const uint2 xw = *reinterpret_cast<const uint2*>(X + r * L::XS + xf);
      const float x0 = bf_lo(xw.x), x1 = bf_hi(xw.x), x2 = bf_lo(xw.y), x3 = bf_hi(xw.y);
      float4 e;
      if (REV) {  // (s q) exp(b), the expression of gla_states.cu
        e = make_float4(p.scale * x0 * __expf(gv.x), p.scale * x1 * __expf(gv.y), p.scale * x2 * __expf(gv.z),
                        p.scale * x3 * __expf(gv.w));
      } else {  // k exp(B - b)
        e = make_float4(x0 * __expf(Bf.x - gv.x), x1 * __expf(Bf.y - gv.y), x2 * __expf(Bf.z - gv.z),
                        x3 * __expf(Bf.w - gv.w));
      }
      *gp = r < len ? make_float4(tf32_round(e.x), tf32_round(e.y), tf32_round(e.z), tf32_round(e.w))
                    : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };

  float acc[MT][NT8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
  float tau = 0.f;  // thread tid < BK: sum of B_n over the span, row i0 + tid

#pragma unroll
  for (int i = 0; i < NS - 1; ++i) {
    if (i < nsteps) load_step(i);
    cp_async_commit();
  }
  cp_async_wait<NS - 2>();  // step 0 has landed
  __syncthreads();
  make_xt(0);

  // ldmatrix.x4.trans of y per 16 tokens and n-tile pair (2np, 2np+1): lane L addresses row L%8 of matrix L/8;
  // matrices (k-step 2kq, n-tile 2np), (2kq+1, 2np), (2kq, 2np+1), (2kq+1, 2np+1).
  const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int lcol = wn * (BN / 4) + (lane >> 4) * 8;
  const int frow = wm * (BK / 2) + 2 * g;  // feature of accumulator row g of m-tile 0 (row g+8: frow + 1)
  for (int s = 0; s < nsteps; ++s) {
    cp_async_wait<NS - 3>();  // step s+1 has landed (steps s+2 .. s+NS-2 may still be in flight)
    __syncthreads();          // ... and is visible; X~(s) is complete; every warp is done with step s-1
    if (s + NS - 1 < nsteps) load_step(s + NS - 1);  // into the stage of step s-1
    cp_async_commit();
    if (s + 1 < nsteps) make_xt(s + 1);  // independent of the products below: the scheduler interleaves them

    const int st = s % NS;
    if ((s & 1) == 0) {  // the first step of a chunk: acc = diag(exp B_n) acc
      const float* Bv = B_of(st);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const float2 bb = ldf2(Bv + frow + mt * 16);
        const float da = __expf(bb.x), db = __expf(bb.y);
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt) {
          acc[mt][nt][0] *= da, acc[mt][nt][1] *= da;
          acc[mt][nt][2] *= db, acc[mt][nt][3] *= db;
        }
      }
      if (tid < BK) tau += Bv[tid];
    }

    const float* Xt = G_of(st) + 2 * t * L::GS + frow;
    const bf16* Y = Y_of(st) + lrow * L::YS + lcol;
#pragma unroll(NT8 == 8 ? 1 : kTS / 16)
    for (int kq = 0; kq < kTS / 16; ++kq) {  // not unrolled at BN = 256: 255 registers and a spill otherwise
      uint32_t yb[NT8 / 2][4];
#pragma unroll
      for (int np = 0; np < NT8 / 2; ++np) ldmatrix_x4_trans(yb[np], Y + kq * 16 * L::YS + np * 16);
#pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        const float* Xk = Xt + (kq * 16 + kh * 8) * L::GS;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          // A[g][t] = X~[token 2t][feature 2g], A[g+8][t] = [2t][2g+1], A[g][t+4] = [2t+1][2g], A[g+8][t+4] = ...
          const float2 lo = ldf2(Xk + mt * 16), hi = ldf2(Xk + L::GS + mt * 16);
          const uint32_t a0 = __float_as_uint(lo.x), a1 = __float_as_uint(lo.y);
          const uint32_t a2 = __float_as_uint(hi.x), a3 = __float_as_uint(hi.y);
#pragma unroll
          for (int nt = 0; nt < NT8; ++nt) {
            const uint32_t w = yb[nt >> 1][kh + 2 * (nt & 1)];
            mma_tf32(acc[mt][nt], a0, a1, a2, a3, bits_lo(w), bits_hi(w));
          }
        }
      }
    }
  }

  // The span's result: fin itself when there is one span, else the partial state and (dv tile 0) the log-decay.
  float* dst = p.S == 1 ? p.out + long(bh) * p.dk * p.dv : p.out + (long(bh) * p.S + sp) * p.dk * p.dv;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int ra = i0 + frow + mt * 16, rb = ra + 1;
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt) {
      const int c = j0 + wn * (BN / 4) + nt * 8 + 2 * t;
      if (ra < p.dk) store2(dst + long(ra) * p.dv + c, c, p.dv, acc[mt][nt][0], acc[mt][nt][1]);
      if (rb < p.dk) store2(dst + long(rb) * p.dv + c, c, p.dv, acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
  if (p.S > 1 && tile % ntn == 0 && tid < BK && i0 + tid < p.dk) p.tau[(long(bh) * p.S + sp) * p.dk + i0 + tid] = tau;
}

// fin[bh][r][c] = fold over the spans of the partial states, acc = exp(tau_s[r]) acc + P_s[r][c]; VEC: 4 columns per
// thread (dv % 4 == 0, 16-byte aligned fin and scratch), else one.
template <bool VEC>
__global__ void __launch_bounds__(256) boundary_fold_kernel(const float* part, const float* tau, float* fin, int BH,
                                                            int S, int dk, int dv, bool rev) {
  constexpr int E = VEC ? 4 : 1;
  const int cg = dv / E;
  const long n = long(BH) * dk * cg;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const int c = int(i % cg) * E;
    const long row = i / cg;  // bh * dk + r
    const int r = int(row % dk);
    const long bh = row / dk;
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int k = 0; k < S; ++k) {
      const long s = rev ? S - 1 - k : k;
      const float d = __expf(tau[(bh * S + s) * dk + r]);
      const float* P = part + ((bh * S + s) * dk + r) * dv + c;
      if constexpr (VEC) {
        const float4 v = *reinterpret_cast<const float4*>(P);
        a.x = d * a.x + v.x, a.y = d * a.y + v.y, a.z = d * a.z + v.z, a.w = d * a.w + v.w;
      } else {
        a.x = d * a.x + P[0];
      }
    }
    if constexpr (VEC) *reinterpret_cast<float4*>(fin + row * dv + c) = a;
    else fin[row * dv + c] = a.x;
  }
}

int g_boundary_span = 0;  // tuning / test override of the chunks per span (0: choose by grid size)

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) !=
                                                  cudaSuccess)
      v = 132;
    return v > 0 ? v : 132;
  }();
  return n;
}

// The launch plan: tile shape, chunks per span and spans per (b, h).
struct Plan {
  int bk, bn, span, S;
};
Plan plan_of(const Dims& d) {
  Plan pl;
  pl.bk = d.dk > 64 ? 128 : 64;
  pl.bn = d.dv > 128 ? 256 : d.dv > 64 ? 128 : 64;
  const int bps = (pl.bk / 32) * (pl.bn / 32) <= 8 ? 2 : 1;  // BoundaryLayout::BPS
  const long units = long(d.B) * d.H * ((d.dk + pl.bk - 1) / pl.bk) * ((d.dv + pl.bn - 1) / pl.bn);
  const long slots = long(bps) * sm_count();
  int span = g_boundary_span;
  if (span <= 0) {
    // Blocks of one wave run together and a block's time is ~ its chunks plus a fixed cost (pipeline fill, partial
    // store, its share of the fold) of ~2 chunks: minimise waves x (chunks per span + 2); ties to longer spans.
    long best = -1;
    for (int L = d.NT; L >= 1; --L) {
      const long S = (d.NT + L - 1) / L;
      const long cost = (units * S + slots - 1) / slots * (L + 2);
      if (best < 0 || cost < best) best = cost, span = L;
    }
  }
  span = span < d.NT ? span : d.NT;
  if ((d.NT + span - 1) / span > 65535) span = (d.NT + 65534) / 65535;  // grid.y limit
  pl.span = span;
  pl.S = (d.NT + span - 1) / span;
  return pl;
}

template <bool REV, int BK, int BN>
void launch_t(const BoundaryParams& p, cudaStream_t stream) {
  using L = BoundaryLayout<BK, BN>;
  static const bool attr = [] {
    SPB_CUDA(cudaFuncSetAttribute(boundary_kernel<REV, BK, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(L::total)));
    return true;
  }();
  (void)attr;
  const dim3 grid(((p.dk + BK - 1) / BK) * ((p.dv + BN - 1) / BN), p.S, p.B * p.H);
  boundary_kernel<REV, BK, BN><<<grid, kBThreads, L::total, stream>>>(p);
  SPB_CUDA_LAUNCH();
}

template <bool REV, int BK>
void launch_bk(const BoundaryParams& p, int bn, cudaStream_t stream) {
  if (bn == 64) launch_t<REV, BK, 64>(p, stream);
  else if (bn == 128) launch_t<REV, BK, 128>(p, stream);
  else launch_t<REV, BK, 256>(p, stream);
}

template <bool REV>
void launch_r(const BoundaryParams& p, int bk, int bn, cudaStream_t stream) {
  if (bk == 64) launch_bk<REV, 64>(p, bn, stream);
  else launch_bk<REV, 128>(p, bn, stream);
}

}  // namespace

void set_boundary_span(int chunks) { g_boundary_span = chunks; }

size_t boundary_scratch_elems(const Dims& d) {
  const Plan pl = plan_of(d);
  if (pl.S == 1) return 0;
  const size_t bh = size_t(d.B) * d.H;
  return bh * pl.S * d.dk * d.dv + bh * pl.S * d.dk;
}

void launch_boundary(const Dims& d, bool reverse, const bf16* x, const bf16* y, const float* gc, float* fin,
                     float* scratch, cudaStream_t stream) {
  const Plan pl = plan_of(d);
  const size_t bh = size_t(d.B) * d.H;
  float* part = pl.S == 1 ? fin : scratch;  // [B*H, S, dk, dv]
  float* tau = pl.S == 1 ? nullptr : scratch + bh * pl.S * d.dk * d.dv;
  BoundaryParams p{x, y, gc, part, tau, d.B, d.T, d.H, d.dk, d.dv, d.NT, pl.span, pl.S, d.scale,
                   aligned16(x) && d.dk % 8 == 0, aligned16(y) && d.dv % 8 == 0, aligned16(gc) && d.dk % 4 == 0};
  if (reverse) launch_r<true>(p, pl.bk, pl.bn, stream);
  else launch_r<false>(p, pl.bk, pl.bn, stream);
  if (pl.S == 1) return;
  const bool vec = d.dv % 4 == 0 && aligned16(fin) && aligned16(scratch);
  const long n = long(bh) * d.dk * (vec ? d.dv / 4 : d.dv);
  const int blocks = int(std::min<long>((n + 255) / 256, 16L * sm_count()));
  if (vec) boundary_fold_kernel<true><<<blocks, 256, 0, stream>>>(part, tau, fin, int(bh), pl.S, d.dk, d.dv, reverse);
  else boundary_fold_kernel<false><<<blocks, 256, 0, stream>>>(part, tau, fin, int(bh), pl.S, d.dk, d.dv, reverse);
  SPB_CUDA_LAUNCH();
}

}  // namespace gla_cuda
}  // namespace spb
