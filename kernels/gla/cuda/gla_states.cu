// The inter-chunk state recurrence on the GPU (chunk_states_fwd and chunk_states_bwd).
//
//   forward:  S <- diag(exp B_n) S + (K_n * exp(B_n - b))^T V_n,   hs[n] = S before chunk n, ht = S at the end
//   backward: S <- diag(exp B_n) S + (s Q_n * exp(b))^T dO_n,      chunks in reverse, dhs[n] = S before, dh0 at the end
//
// Design:
// - The recurrence is sequential over chunks, so a block owns one (b, h, BK-row dk tile, 64-column dv tile) of the
//   state and walks every chunk; the state tile lives in mma accumulator registers for the whole walk (8 warps).
//   Rows of the state (features) are independent, so tiles never talk to each other.
// - All exponents are <= 0: B_n - b_t (later minus earlier) and b_t (cumsum from the chunk start).
// - The walk is NT steps in series, so the time per step is what counts, and it is instruction-latency bound (ncu,
//   8 warps per SM: ~3000 cycles per step, DRAM at 23 %). Hence: loads run 3 chunks ahead (cp.async, 4 stages) on
//   a straight-line path; X~ of chunk n+1 is built while chunk n is multiplied (double-buffered, one barrier per
//   step); X~ is stored transposed so an A fragment is two 8-byte loads; y (v or do) fragments come from
//   ldmatrix.trans (one instruction feeds four mmas); BK = 16 rows per block where the grid would otherwise leave
//   SMs with one block, so that 16 warps per SM hide each other's latency.
// - X~ is rounded to tf32 once when it is written; y is exact in tf32 (bf16 bits); accumulation in fp32 registers,
//   odd k-steps into a second register set to halve the dependent mma chain. hs / dhs get the accumulators rounded
//   to bf16 (nearest even) when they are stored; the walk itself goes on in fp32, and fin is stored in fp32.
#include "runtime/cuda_check.h"
#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
namespace {

constexpr int SBV = 64;  // state columns (dv) per block
constexpr int SNS = 4;   // cp.async stages
constexpr int SYS = SBV + 8;  // bf16 stride of y: ldmatrix rows 144 B apart, conflict-free
constexpr int STT = kC + 8;   // fp32 stride of the transposed X~ [feature][token]: float2 reads at (g, 2t) conflict-free
constexpr int kStatesThreads = 256;

template <int BK>
struct StatesLayout {
  static constexpr int XS = BK + 8;  // bf16 stride of the raw x tile
  static constexpr int GS = BK + 4;  // fp32 stride of the gc tile
  static constexpr int WM = BK / 16, WN = 8 / WM;  // warps along rows / columns
  static constexpr int NTW = SBV / WN / 8;          // n8-tiles per warp (2 or 1)
  static constexpr int TPT = kC * BK / kStatesThreads;  // tokens per thread in make_xt
  static constexpr size_t x_bytes = size_t(kC) * XS * 2, y_bytes = size_t(kC) * SYS * 2, g_bytes = size_t(kC) * GS * 4;
  static constexpr size_t stage = x_bytes + y_bytes + g_bytes;
  static constexpr size_t t_off = SNS * stage;
  static constexpr size_t total = t_off + size_t(2) * BK * STT * 4;
  static_assert(x_bytes % 16 == 0 && y_bytes % 16 == 0 && g_bytes % 16 == 0, "layout");
};

struct StatesParams {
  const bf16* x;
  const bf16* y;
  const float* gc;
  const float* init;
  bf16* hs;  // bf16: rounded to nearest even from the fp32 accumulators
  float* fin;
  int B, T, H, dk, dv, NT;
  float scale;
  bool vx, vy, vg;
  int bh0 = 0, nbh = 0;  // the grid's pairs: bh0 + blockIdx.z, blockIdx.z < nbh (GlaShape::pair_range)
};

template <bool REV, int BK>
__global__ void __launch_bounds__(kStatesThreads) states_kernel(const StatesParams p) {
  using L = StatesLayout<BK>;
  extern __shared__ __align__(16) unsigned char smem[];
  float* Ts = reinterpret_cast<float*>(smem + L::t_off);  // [2][BK][STT]

  const int j0 = blockIdx.x * SBV, i0 = blockIdx.y * BK, bh = p.bh0 + blockIdx.z;
  const int b = bh / p.H, h = bh % p.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wm = warp % L::WM, wn = warp / L::WM;  // this warp's piece: rows wm*16, columns wn*8*NTW
  const long xrow = long(p.H) * p.dk, yrow = long(p.H) * p.dv;
  const long xbase = (long(b) * p.T * p.H + h) * p.dk;  // token 0 of (b, h)
  const long ybase = (long(b) * p.T * p.H + h) * p.dv;
  const long sbase = long(bh) * p.dk * p.dv;

  auto X_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * L::stage); };
  auto Y_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * L::stage + L::x_bytes); };
  auto G_of = [&](int st) { return reinterpret_cast<float*>(smem + st * L::stage + L::x_bytes + L::y_bytes); };
  auto chunk_of = [&](int s) { return REV ? p.NT - 1 - s : s; };
  auto load_step = [&](int s) {
    const int n = chunk_of(s), t0 = n * kC, len = min(kC, p.T - t0), st = s % SNS;
    load_tile<bf16, kC, BK, kStatesThreads>(X_of(st), L::XS, p.x + xbase + t0 * xrow + i0, xrow, len, p.dk - i0,
                                            p.vx);
    load_tile<bf16, kC, SBV, kStatesThreads>(Y_of(st), SYS, p.y + ybase + t0 * yrow + j0, yrow, len, p.dv - j0,
                                             p.vy);
    load_tile<float, kC, BK, kStatesThreads>(G_of(st), L::GS, p.gc + xbase + t0 * xrow + i0, xrow, len, p.dk - i0,
                                             p.vg);
  };
  // X~ of step s (tf32-rounded, zero beyond the chunk), transposed into Ts[s & 1]: thread = (feature, TPT tokens).
  const int xf = tid % BK, xr = (tid / BK) * L::TPT;
  auto make_xt = [&](int s) {
    const int n = chunk_of(s), len = min(kC, p.T - n * kC), st = s % SNS;
    const bf16* X = X_of(st);
    const float* G = G_of(st);
    float* Tt = Ts + (s & 1) * BK * STT + xf * STT + xr;
    const float Bf = G[(len - 1) * L::GS + xf];
    float e[L::TPT];
#pragma unroll
    for (int i = 0; i < L::TPT; ++i) {
      const int r = xr + i;
      const float xv = bf_at(X + r * L::XS + xf), gv = G[r * L::GS + xf];
      const float v = REV ? p.scale * xv * __expf(gv) : xv * __expf(Bf - gv);
      e[i] = r < len ? tf32_round(v) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < L::TPT; i += 4)
      *reinterpret_cast<float4*>(Tt + i) = make_float4(e[i], e[i + 1], e[i + 2], e[i + 3]);
  };

  // The accumulator fragment: rows ra, ra + 8 (state rows = features), columns col(nt), col(nt) + 1.
  const int ra = i0 + wm * 16 + g, rb = ra + 8;
  const int cbase = j0 + wn * 8 * L::NTW;
  const bool full_tile = i0 + BK <= p.dk && j0 + SBV <= p.dv && (p.dv & 1) == 0;
  float acc[L::NTW][4];
#pragma unroll
  for (int nt = 0; nt < L::NTW; ++nt) {
    const int c = cbase + nt * 8 + 2 * t;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e < 2 ? ra : rb, cc = c + (e & 1);
      acc[nt][e] = (p.init && r < p.dk && cc < p.dv) ? p.init[sbase + long(r) * p.dv + cc] : 0.f;
    }
  }
  auto store_state = [&](auto* dst) {  // hs (bf16) or fin (fp32)
#pragma unroll
    for (int nt = 0; nt < L::NTW; ++nt) {
      const int c = cbase + nt * 8 + 2 * t;
      if (full_tile && (reinterpret_cast<uintptr_t>(dst) & (2 * sizeof(*dst) - 1)) == 0) {
        st_f2(dst + long(ra) * p.dv + c, acc[nt][0], acc[nt][1]);
        st_f2(dst + long(rb) * p.dv + c, acc[nt][2], acc[nt][3]);
      } else {
        if (ra < p.dk) store2(dst + long(ra) * p.dv + c, c, p.dv, acc[nt][0], acc[nt][1]);
        if (rb < p.dk) store2(dst + long(rb) * p.dv + c, c, p.dv, acc[nt][2], acc[nt][3]);
      }
    }
  };

  load_step(0);
  cp_async_commit();
  if (1 < p.NT) load_step(1);
  cp_async_commit();
  if (2 < p.NT) load_step(2);
  cp_async_commit();
  cp_async_wait<2>();
  __syncthreads();
  make_xt(0);

  // ldmatrix.x4.trans of y: lane L addresses row L%8 of matrix L/8. NTW == 2: matrices (k-step 2j, n-tile 0),
  // (2j+1, 0), (2j, 1), (2j+1, 1); NTW == 1: k-steps 4j .. 4j+3 of the warp's n-tile.
  const int lrow = (lane & 7) + (L::NTW == 2 ? ((lane >> 3) & 1) * 8 : (lane >> 3) * 8);
  const int lcol = wn * 8 * L::NTW + (L::NTW == 2 ? (lane >> 4) * 8 : 0);
  for (int s = 0; s < p.NT; ++s) {
    cp_async_wait<1>();  // step s+1 has landed (only step s+2 may still be in flight)
    __syncthreads();     // ... and is visible; X~(s) is complete; every warp is done with step s-1
    if (s + 3 < p.NT) load_step(s + 3);  // into the stage of step s-1
    cp_async_commit();
    if (s + 1 < p.NT) make_xt(s + 1);  // independent of the products below: the scheduler interleaves them

    const int n = chunk_of(s), len = min(kC, p.T - n * kC), st = s % SNS;
    if (p.hs) store_state(p.hs + (long(bh) * p.NT + n) * p.dk * p.dv);
    const float* G = G_of(st);
    const float da = __expf(G[(len - 1) * L::GS + wm * 16 + g]), db = __expf(G[(len - 1) * L::GS + wm * 16 + g + 8]);
#pragma unroll
    for (int nt = 0; nt < L::NTW; ++nt) acc[nt][0] *= da, acc[nt][1] *= da, acc[nt][2] *= db, acc[nt][3] *= db;

    const float* Tt = Ts + (s & 1) * BK * STT + (wm * 16 + g) * STT + 2 * t;
    const bf16* Y = Y_of(st) + lrow * SYS + lcol;
    float odd[L::NTW][4] = {};
#pragma unroll
    for (int kq = 0; kq < kC / (8 * 4 / L::NTW); ++kq) {  // one ldmatrix per 4 mmas
      uint32_t yb[4];
      ldmatrix_x4_trans(yb, Y + kq * (8 * 4 / L::NTW) * SYS);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int kk = L::NTW == 2 ? 2 * kq + (i & 1) : 4 * kq + i, nt = L::NTW == 2 ? (i >> 1) : 0;
        const float2 alo = ldf2(Tt + kk * 8), ahi = ldf2(Tt + 8 * STT + kk * 8);
        const uint32_t a0 = __float_as_uint(alo.x), a2 = __float_as_uint(alo.y);
        const uint32_t a1 = __float_as_uint(ahi.x), a3 = __float_as_uint(ahi.y);
        if (kk & 1) mma_tf32(odd[nt], a0, a1, a2, a3, bits_lo(yb[i]), bits_hi(yb[i]));
        else mma_tf32(acc[nt], a0, a1, a2, a3, bits_lo(yb[i]), bits_hi(yb[i]));
      }
    }
#pragma unroll
    for (int nt = 0; nt < L::NTW; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] += odd[nt][e];
  }
  if (p.fin) store_state(p.fin + sbase);
}

int g_states_bk = 0;  // tuning override (0: choose by grid size)

template <bool REV, int BK>
void launch_states_t(const StatesParams& p, cudaStream_t stream) {
  using L = StatesLayout<BK>;
  static const bool attr = [] {
    SPB_CUDA(cudaFuncSetAttribute(states_kernel<REV, BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::total)));
    return true;
  }();
  (void)attr;
  const dim3 grid((p.dv + SBV - 1) / SBV, (p.dk + BK - 1) / BK, p.nbh);
  states_kernel<REV, BK><<<grid, kStatesThreads, L::total, stream>>>(p);
  SPB_CUDA_LAUNCH();
}

template <bool REV>
void launch_states_r(const StatesParams& p, int bk, cudaStream_t stream) {
  if (bk == 16) launch_states_t<REV, 16>(p, stream);
  else launch_states_t<REV, 32>(p, stream);
}

}  // namespace

void set_states_bk(int bk) { g_states_bk = bk; }

namespace {
int g_states_variant = 0;
}
void set_states_variant(int v) { g_states_variant = v; }
int states_variant() { return g_states_variant; }

void launch_states(const Dims& d, bool reverse, const bf16* x, const bf16* y, const float* gc, const float* init,
                   bf16* hs, float* fin, cudaStream_t stream) {
  StatesParams p{x, y, gc, init, hs, fin, d.B, d.T, d.H, d.dk, d.dv, d.NT, d.scale,
                 aligned16(x) && d.dk % 8 == 0, aligned16(y) && d.dv % 8 == 0, aligned16(gc) && d.dk % 4 == 0,
                 d.bh0, d.pairs()};
  // 16 rows per block where the grid of 16-row tiles still fits one wave (two blocks per SM): twice the warps to hide
  // latency; 32 rows otherwise (fewer blocks, each doing more per step).
  int bk = g_states_bk;
  if (bk == 0) {
    const long blocks16 = long(d.pairs()) * ((d.dk + 15) / 16) * ((d.dv + SBV - 1) / SBV);
    bk = blocks16 <= 2L * sm_count() ? 16 : 32;
  }
  if (reverse) launch_states_r<true>(p, bk, stream);
  else launch_states_r<false>(p, bk, stream);
}

}  // namespace gla_cuda
}  // namespace spb
