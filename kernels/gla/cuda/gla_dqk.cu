// dq, dk and dg of chunk_grads (dv is in gla_intra.cu). Per chunk, with s = dk^-1/2, dA = s tril(dO V^T):
//   dq_r = s exp(b_r) (H0 do_r)       + sum_{j<=r} dA_rj k_j exp(b_r - b_j)
//   dk_r = exp(B - b_r) (dH v_r)      + sum_{j>=r} dA_jr q_j exp(b_j - b_r)
//   db_r = q_r dq_r - k_r dk_r,  db_last += rowsum(dH * H1),  dg = in-chunk reverse cumsum of db
// H1 (the state after the chunk) is not read: H1 = diag(exp B) H0 + (K exp(B-b))^T V, so
//   rowsum(dH * H1) = exp(B) rowsum(dH * H0) + sum_t k_t * [exp(B - b_t) (dH v_t)],
// and the bracket is the inter part of dk, already in registers. That saves a [dk x dv] fp32 read per chunk.
//
// Design:
// - One block of 4 warps per (chunk, tile of DIT features, b*h); warp w owns rows 16w..16w+15 of dq, dk and dA. DIT
//   is 64, or 32 where dk <= 32 (GLA-1B's 32 heads of dk 32): a 64-feature tile would carry dk's half in zeros
//   through every feature product, exp and load; dA = dO V^T, over dv, is the same whole either way.
// - Phase 1 streams dv in slices of DJS = 16 (cp.async through a ring of 4 slots, 3 slices ahead): dO, V, and the
//   [64 x DJS] slices of H0 and dH (bf16, as hs / dhs are: exact tf32 operands, no rounding); 74 KB of shared memory
//   and <= 168 registers let 3 blocks (12 warps) share an SM. dA += dO V^T (bf16 mma: both exact), dq += dO H0^T,
//   dk += V dH^T (tf32), rowsum(dH * H0) on the fly; one barrier per slice. The slices come from DRAM at the rate the
//   bytes in flight allow: with one slice ahead (variant 1) phase 1 ran at ~2.3 TB/s at GLA-1B (fp32 states).
// - Phase 2 (q, k, gc of the tile loaded into the ring behind the last slice): the intra terms as tf32 mma with the
//   sub-chunk factorisation of gla_intra.cu: dq uses b_ref = first row of the warp's sub-chunk (keys scaled by
//   exp(b_ref - b_j) <= 1 off the diagonal), dk uses b_ref = last row of the sub-chunk (queries scaled by
//   exp(b_j - b_ref) <= 1 off the diagonal); the post-factors are <= 1. dA's register fragment is directly the A
//   operand of the dq product (k-permutation, see gla_cuda_common.cuh); dk needs dA^T, read from shared memory.
//   The diagonal blocks fall back to exact element-wise sums when the in-sub-chunk decay exceeds kMaxSubchunkDecay.
// - dg: the reverse cumsum runs on the accumulator fragments (warp shuffles, then the totals of later warps).
#include <algorithm>

#include "runtime/cuda_check.h"
#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
namespace {

constexpr int kMaxDit = 64;      // features per block at most (DIT: 64 or 32)
// Strides of a DIT-feature tile: the bf16 one of resident q, k (16-bit reads at rows 2t, 2t+1 -> banks 8t + g/2) and
// the fp32 one of resident gc (reads at rows 2t, 2t+1 -> banks 8t + g): DIT + 8 and DIT + 4 do that at 64 and 32.
template <int DIT> constexpr int drs() { return DIT + 8; }
template <int DIT> constexpr int dgr() { return DIT + 4; }
constexpr int DAS = 68;          // fp32 stride of dA in shared memory
constexpr int kDqkThreads = 128;
// The variant is the prefetch distance AHEAD: 1 (one slice in flight), 2, or 3 (the default).
constexpr int kDqkDefaultVariant = 3;
constexpr int DJS = 16;  // the dv slice of phase 1
constexpr int DSS = DJS + 8;  // bf16 stride of the slice buffers: 32-bit pair reads at (row g, col 2t) conflict-free
// Shared memory: a ring of NS slots, then misc. Phase 1 streams nsl dv slices through the slots, load i in slot
// i % NS, and after them two more loads: q and k (one slot), gc (the next); so phase 1 has every slot for its slices,
// and up to 3 of them in flight. Phase 2 puts dA and the exact-term slots in the slots of the last two slices, and
// the output tiles in slots 0 and 1 once q, k and gc are read. 74 KB: 3 blocks per SM (<= 168 registers).
struct DqkLayout {
  static constexpr int NS = 4;
  // What a slot holds in turn: a slice's dO, V, H0, dH (bf16 each); q and k; gc; dA.
  static constexpr size_t slice = size_t(kC) * DSS * 2 * 4, qk = size_t(2) * kC * drs<kMaxDit>() * 2,
                          gcb = size_t(kC) * dgr<kMaxDit>() * 4, dA = size_t(kC) * DAS * 4;
  static constexpr size_t slot = std::max({slice, qk, gcb, dA});
  static constexpr size_t misc = NS * slot;
  static constexpr size_t total = misc + size_t(64) * 9 * 4;  // rowsum[64], colsum[4][64], totals[4][64]
};

struct DqkParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const bf16* d_o;
  const float* gc;
  const bf16* hs;
  const bf16* dhs;
  bf16* dq;
  bf16* dk;
  bf16* dg;
  int B, T, H, dk_, dv_, NT;
  float scale;
  bool vq, vk, vv, vdo, vg, vh, vout;
  int bh0 = 0;     // the grid's pairs are bh0 + blockIdx.z (GlaShape::pair_range)
  long grad_row = 0;  // the row stride of dq and dk (GlaShape::grad_ld; 0: H * dk, as q's)
};

// Exact diagonal-block terms (only when the in-sub-chunk decay is past kMaxSubchunkDecay): out of line, so that the
// hot path stays small.
template <int DIT>
__device__ __noinline__ float exact_dq_diag(const float* dAs, const bf16* Kr, const float* Gr, int r, int fl, int j0) {
  constexpr int DRS = drs<DIT>(), DGR = dgr<DIT>();
  float x = 0.f;
  for (int j = j0; j <= r; ++j)
    x += dAs[r * DAS + j] * bf_at(Kr + j * DRS + fl) * exp_ftz(Gr[r * DGR + fl] - Gr[j * DGR + fl]);
  return x;
}
template <int DIT>
__device__ __noinline__ float exact_dk_diag(const float* dAs, const bf16* Qr, const float* Gr, int r, int fl,
                                            int jlast) {
  constexpr int DRS = drs<DIT>(), DGR = dgr<DIT>();
  float x = 0.f;
  for (int j = r; j <= jlast; ++j)
    x += dAs[j * DAS + r] * bf_at(Qr + j * DRS + fl) * exp_ftz(Gr[j * DGR + fl] - Gr[r * DGR + fl]);
  return x;
}

// Phase 2's tiles into the ring: q and k (which == 0) or gc (1). Out of line: it runs twice per block, and inline
// the compiler kept its 16 addresses per thread in registers through phase 1 (and spilled).
template <int DIT>
__device__ __noinline__ void load_phase2_tile(int which, bf16* Qr, float* Gr, const bf16* q, const bf16* k,
                                              const float* gc, long qrow, int len, int cmax, bool vq, bool vk,
                                              bool vg) {
  constexpr int DRS = drs<DIT>(), DGR = dgr<DIT>();
  if (which == 0) {
    load_tile<bf16, kC, DIT, kDqkThreads>(Qr, DRS, q, qrow, len, cmax, vq);
    load_tile<bf16, kC, DIT, kDqkThreads>(Qr + kC * DRS, DRS, k, qrow, len, cmax, vk);
  } else {
    load_tile<float, kC, DIT, kDqkThreads>(Gr, DGR, gc, qrow, len, cmax, vg);
  }
}

template <int AHEAD, int DIT>
__global__ void __launch_bounds__(kDqkThreads, 3) dqk_kernel(const DqkParams p) {
  static_assert(AHEAD >= 1 && AHEAD < DqkLayout::NS, "a load may only reuse the slot of a slice already consumed");
  static_assert(DIT == 64 || DIT == 32, "a warp's fragments cover 8-feature tiles; the guard reads 32 a lane step");
  constexpr int FT = DIT / 8;  // the 8-feature tiles of the block (the keys' tiles of dA stay 8: kC = 64)
  constexpr int DRS = drs<DIT>(), DGR = dgr<DIT>();
  using L = DqkLayout;
  extern __shared__ __align__(16) unsigned char smem[];
  float* rsum = reinterpret_cast<float*>(smem + L::misc);  // [DIT]
  float* csum = rsum + DIT;                                  // [4][DIT]
  float* wtot = csum + 4 * DIT;                              // [4][DIT]

  const int i0 = blockIdx.x * DIT, n = blockIdx.y, bh = p.bh0 + blockIdx.z;
  const int b = bh / p.H, h = bh % p.H;
  const int DK = p.dk_, DV = p.dv_;
  const int t0 = n * kC, len = min(kC, p.T - t0);
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const long qrow = long(p.H) * DK, vrow = long(p.H) * DV;
  const long qbase = ((long(b) * p.T + t0) * p.H + h) * DK;
  const long vbase = ((long(b) * p.T + t0) * p.H + h) * DV;
  const long sbase = (long(bh) * p.NT + n) * DK * DV;

  const int nsl = (DV + DJS - 1) / DJS;  // the dv slices
  auto slot = [&](int i) { return smem + (i % L::NS) * L::slot; };
  // Phase 2's tiles, in the slots of loads nsl and nsl + 1.
  bf16* const Qr = reinterpret_cast<bf16*>(slot(nsl));
  bf16* const Kr = Qr + kC * DRS;
  float* const Gr = reinterpret_cast<float*>(slot(nsl + 1));
  auto slice_ptrs = [&](int s, bf16*& DO, bf16*& V, bf16*& H0, bf16*& DH) {
    DO = reinterpret_cast<bf16*>(slot(s));
    V = DO + kC * DSS;
    H0 = V + kC * DSS;
    DH = H0 + kC * DSS;
  };
  // Load i of the block: dv slice i (i < nsl), then q and k, then gc; nothing past that.
  auto issue = [&](int i) {
    if (i < nsl) {
      const int js = i * DJS;
      bf16 *DO, *V, *H0, *DH;
      slice_ptrs(i, DO, V, H0, DH);
      load_tile<bf16, kC, DJS, kDqkThreads>(DO, DSS, p.d_o + vbase + js, vrow, len, DV - js, p.vdo);
      load_tile<bf16, kC, DJS, kDqkThreads>(V, DSS, p.v + vbase + js, vrow, len, DV - js, p.vv);
      load_tile<bf16, DIT, DJS, kDqkThreads>(H0, DSS, p.hs + sbase + long(i0) * DV + js, DV, DK - i0, DV - js, p.vh);
      load_tile<bf16, DIT, DJS, kDqkThreads>(DH, DSS, p.dhs + sbase + long(i0) * DV + js, DV, DK - i0, DV - js, p.vh);
    } else if (i < nsl + 2) {
      load_phase2_tile<DIT>(i - nsl, Qr, Gr, p.q + qbase + i0, p.k + qbase + i0, p.gc + qbase + i0, qrow, len, DK - i0,
                       p.vq, p.vk, p.vg);
    }
  };
  // One commit group per load (empty past the last), so that "load s landed" is always wait_group<AHEAD - 1>.
#pragma unroll
  for (int i = 0; i < AHEAD; ++i) {
    issue(i);
    cp_async_commit();
  }

  const int r0 = 16 * w + g, r1 = r0 + 8;
  const bool active = 16 * w < len;
  const int wlast = min(16 * w + 15, len - 1);
  float dA[8][4], dq[FT][4], dk[FT][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dA[i][e] = 0.f;
#pragma unroll
  for (int i = 0; i < FT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dq[i][e] = dk[i][e] = 0.f;
  // rowsum(dH * H0) of feature rs_row over the columns rs_half*DJS/2 .. of every slice, in fp32 from the bf16 values
  // (threads past the tile's DIT rows idle here).
  const int rs_row = tid >> 1, rs_half = tid & 1;
  const bool rs_on = rs_row < DIT;
  float rs = 0.f;

  // ---- phase 1: products over dv ----
  for (int s = 0; s < nsl; ++s) {
    cp_async_wait<AHEAD - 1>();
    __syncthreads();  // slice s visible; every warp is done with slice s - 1, whose slot load s + AHEAD may reuse
    issue(s + AHEAD);
    cp_async_commit();
    bf16 *DO, *V, *H0, *DH;
    slice_ptrs(s, DO, V, H0, DH);
    if (rs_on) {  // 8 columns of H0 and dH: one 16-byte read each
      static_assert(DJS / 2 == 8, "rowsum: one 16-byte read per tile and thread");
      const uint4 hw = *reinterpret_cast<const uint4*>(H0 + rs_row * DSS + rs_half * (DJS / 2));
      const uint4 dw = *reinterpret_cast<const uint4*>(DH + rs_row * DSS + rs_half * (DJS / 2));
      rs += bf_lo(hw.x) * bf_lo(dw.x) + bf_hi(hw.x) * bf_hi(dw.x) + bf_lo(hw.y) * bf_lo(dw.y) +
            bf_hi(hw.y) * bf_hi(dw.y);
      rs += bf_lo(hw.z) * bf_lo(dw.z) + bf_hi(hw.z) * bf_hi(dw.z) + bf_lo(hw.w) * bf_lo(dw.w) +
            bf_hi(hw.w) * bf_hi(dw.w);
    }
    if (active) {
#pragma unroll
      for (int k16 = 0; k16 < DJS / 16; ++k16) {
        // dO and V rows r0, r1 at columns c, c+1 and c+8, c+9: the A fragment of a bf16 m16n8k16 step as they are,
        // and, split into their halves, the A fragments of the two tf32 k8 steps (k-permutation).
        const int c = k16 * 16 + 2 * t;
        const uint32_t o[4] = {ld32(DO + r0 * DSS + c), ld32(DO + r1 * DSS + c), ld32(DO + r0 * DSS + c + 8),
                               ld32(DO + r1 * DSS + c + 8)};
        const uint32_t v[4] = {ld32(V + r0 * DSS + c), ld32(V + r1 * DSS + c), ld32(V + r0 * DSS + c + 8),
                               ld32(V + r1 * DSS + c + 8)};
        // dA += dO V^T: both operands exact bf16, so a bf16 mma loses nothing to tf32, takes 16 columns at once
        // and needs no unpacking.
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          if (nt <= 2 * w + 1) {
            const bf16* vr = V + (nt * 8 + g) * DSS + c;
            mma_bf16(dA[nt], o, ld32(vr), ld32(vr + 8));
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int ck = c + 8 * half;
          const uint32_t oa0 = bits_lo(o[2 * half]), oa2 = bits_hi(o[2 * half]);
          const uint32_t oa1 = bits_lo(o[2 * half + 1]), oa3 = bits_hi(o[2 * half + 1]);
          const uint32_t va0 = bits_lo(v[2 * half]), va2 = bits_hi(v[2 * half]);
          const uint32_t va1 = bits_lo(v[2 * half + 1]), va3 = bits_hi(v[2 * half + 1]);
#pragma unroll
          for (int nt = 0; nt < FT; ++nt) {
            // H0 and dH at columns ck, ck + 1 of row nt * 8 + g: one 32-bit read of two bf16, exact tf32 operands
            const uint32_t h2 = ld32(H0 + (nt * 8 + g) * DSS + ck), d2 = ld32(DH + (nt * 8 + g) * DSS + ck);
            mma_tf32(dq[nt], oa0, oa1, oa2, oa3, bits_lo(h2), bits_hi(h2));
            mma_tf32(dk[nt], va0, va1, va2, va3, bits_lo(d2), bits_hi(d2));
          }
        }
      }
    }
  }
  for (int i = nsl + AHEAD; i < nsl + 2; ++i) issue(i);  // what is left of q, k, gc at a short prefetch distance
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // q, k, gc visible; the slots of the last two slices are free from here on

  // ---- phase 2 ----
  float* dAs = reinterpret_cast<float*>(slot(nsl + 2));  // [64][DAS]
  // The exact diagonal terms (only when big) go through 32 slots per thread in the next ring slot, filled by a
  // runtime loop: one call site each for dq and dk instead of 32 in the unrolled epilogues, where that cold code made
  // the kernel longer and slower through its instruction fetch (kernels/gla/cuda/NOTES.md, "dq, dk, dg").
  float* xslot = reinterpret_cast<float*>(slot(nsl + 3)) + tid;
  static_assert(4 * FT * kDqkThreads * 4 <= L::slot, "the exact-term slots fit a ring slot");
  // dA: scale and causal mask; shared copy for dA^T.
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e < 2 ? r0 : r1, key = nt * 8 + 2 * t + (e & 1);
      dA[nt][e] = (nt <= 2 * w + 1 && key <= r && r < len) ? dA[nt][e] * p.scale : 0.f;
    }
    *reinterpret_cast<float2*>(dAs + r0 * DAS + nt * 8 + 2 * t) = make_float2(dA[nt][0], dA[nt][1]);
    *reinterpret_cast<float2*>(dAs + r1 * DAS + nt * 8 + 2 * t) = make_float2(dA[nt][2], dA[nt][3]);
  }
  rs += __shfl_xor_sync(0xffffffffu, rs, 1);
  if (rs_half == 0 && rs_on) rsum[rs_row] = rs;
  // Inter parts: dq *= s exp(b_r), dk *= exp(B - b_r); rows past the end are zeros. Then colsum of k * dk_inter.
  {
    float cs[FT][2];
#pragma unroll
    for (int nt = 0; nt < FT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e < 2 ? r0 : r1, fl = nt * 8 + 2 * t + (e & 1);
        const float gv = Gr[r * DGR + fl], Bf = Gr[(len - 1) * DGR + fl];
        dq[nt][e] = r < len ? dq[nt][e] * p.scale * exp_ftz(gv) : 0.f;
        dk[nt][e] = r < len ? dk[nt][e] * exp_ftz(Bf - gv) : 0.f;
      }
      const uint32_t k0 = ld32(Kr + r0 * DRS + nt * 8 + 2 * t), k1 = ld32(Kr + r1 * DRS + nt * 8 + 2 * t);
      cs[nt][0] = bf_lo(k0) * dk[nt][0] + bf_lo(k1) * dk[nt][2];
      cs[nt][1] = bf_hi(k0) * dk[nt][1] + bf_hi(k1) * dk[nt][3];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float x = cs[nt][j];
        x += __shfl_xor_sync(0xffffffffu, x, 4);
        x += __shfl_xor_sync(0xffffffffu, x, 8);
        x += __shfl_xor_sync(0xffffffffu, x, 16);
        if (g == 0) csum[w * DIT + nt * 8 + 2 * t + j] = x;
      }
    }
  }
  // Guard of the factorised diagonal blocks (features of this tile only).
  bool big = false;
  if (active) {
#pragma unroll
    for (int j = 0; j < DIT / 32; ++j) {
      const int f = lane + 32 * j;
      if (i0 + f < DK) big |= Gr[16 * w * DGR + f] - Gr[wlast * DGR + f] > kMaxSubchunkDecay;
    }
  }
  big = __any_sync(0xffffffffu, big);
  __syncthreads();  // dAs, rsum, csum visible

  if (active) {
    // dq intra: exp(b_r - b_ref) sum_j dA_rj [k_j exp(b_ref - b_j)], b_ref = b at row 16w. Runtime loops over the
    // key steps keep the code small (a fully unrolled phase 2 does not fit the instruction cache).
    float refq[FT], refk[FT];
#pragma unroll
    for (int nt = 0; nt < FT; ++nt) refq[nt] = Gr[16 * w * DGR + nt * 8 + g], refk[nt] = Gr[wlast * DGR + nt * 8 + g];
    float x2[FT][4];
#pragma unroll
    for (int i = 0; i < FT; ++i) x2[i][0] = x2[i][1] = x2[i][2] = x2[i][3] = 0.f;
    const int kq_end = big ? 2 * w : 2 * w + 2;  // the diagonal steps 2w, 2w+1 go exact when big
#pragma unroll 1
    for (int kk = 0; kk < kq_end; ++kk) {
      const int j0 = kk * 8 + 2 * t;
      const float2 x0 = ldf2(dAs + r0 * DAS + j0), x1 = ldf2(dAs + r1 * DAS + j0);
      const uint32_t a0 = tf32_bits(x0.x), a2 = tf32_bits(x0.y), a1 = tf32_bits(x1.x), a3 = tf32_bits(x1.y);
#pragma unroll
      for (int nt = 0; nt < FT; ++nt) {
        const int f = nt * 8 + g;
        const uint32_t b0 = tf32_bits(bf_at(Kr + j0 * DRS + f) * exp_ftz(refq[nt] - Gr[j0 * DGR + f]));
        const uint32_t b1 = tf32_bits(bf_at(Kr + (j0 + 1) * DRS + f) * exp_ftz(refq[nt] - Gr[(j0 + 1) * DGR + f]));
        mma_tf32(x2[nt], a0, a1, a2, a3, b0, b1);
      }
    }
    if (big) {
#pragma unroll 1
      for (int i = 0; i < 4 * FT; ++i) {
        const int nt = i >> 2, e = i & 3, r = e < 2 ? r0 : r1, fl = nt * 8 + 2 * t + (e & 1);
        xslot[i * kDqkThreads] = r < len ? exact_dq_diag<DIT>(dAs, Kr, Gr, r, fl, 16 * w) : 0.f;
      }
    }
#pragma unroll
    for (int nt = 0; nt < FT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e < 2 ? r0 : r1, fl = nt * 8 + 2 * t + (e & 1);
        float x = r < len ? x2[nt][e] * exp_ftz(Gr[r * DGR + fl] - Gr[16 * w * DGR + fl]) : 0.f;
        if (big && r < len) x += xslot[(nt * 4 + e) * kDqkThreads];
        dq[nt][e] += x;
      }
    }
    // dk intra: exp(b_ref - b_r) sum_{j>=r} dA_jr [q_j exp(b_j - b_ref)], b_ref = b at the sub-chunk's last row.
#pragma unroll
    for (int i = 0; i < FT; ++i) x2[i][0] = x2[i][1] = x2[i][2] = x2[i][3] = 0.f;
#pragma unroll 1
    for (int kk = big ? 2 * w + 2 : 2 * w; kk < 8; ++kk) {
      const int j0 = kk * 8 + 2 * t;
      const uint32_t a0 = tf32_bits(dAs[j0 * DAS + r0]), a2 = tf32_bits(dAs[(j0 + 1) * DAS + r0]);
      const uint32_t a1 = tf32_bits(dAs[j0 * DAS + r1]), a3 = tf32_bits(dAs[(j0 + 1) * DAS + r1]);
#pragma unroll
      for (int nt = 0; nt < FT; ++nt) {
        const int f = nt * 8 + g;
        const uint32_t b0 = j0 < len ? tf32_bits(bf_at(Qr + j0 * DRS + f) * exp_ftz(Gr[j0 * DGR + f] - refk[nt])) : 0u;
        const uint32_t b1 =
            j0 + 1 < len ? tf32_bits(bf_at(Qr + (j0 + 1) * DRS + f) * exp_ftz(Gr[(j0 + 1) * DGR + f] - refk[nt])) : 0u;
        mma_tf32(x2[nt], a0, a1, a2, a3, b0, b1);
      }
    }
    if (big) {
#pragma unroll 1
      for (int i = 0; i < 4 * FT; ++i) {
        const int nt = i >> 2, e = i & 3, r = e < 2 ? r0 : r1, fl = nt * 8 + 2 * t + (e & 1);
        xslot[i * kDqkThreads] = r < len ? exact_dk_diag<DIT>(dAs, Qr, Gr, r, fl, wlast) : 0.f;
      }
    }
#pragma unroll
    for (int nt = 0; nt < FT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e < 2 ? r0 : r1, fl = nt * 8 + 2 * t + (e & 1);
        float x = r < len ? x2[nt][e] * exp_ftz(Gr[wlast * DGR + fl] - Gr[r * DGR + fl]) : 0.f;
        if (big && r < len) x += xslot[(nt * 4 + e) * kDqkThreads];
        dk[nt][e] += x;
      }
    }
  }

  // ---- dg: db = q dq - k dk (+ the chunk-decay term on the last row), reverse cumsum over the rows ----
  float db[FT][4];
#pragma unroll
  for (int nt = 0; nt < FT; ++nt) {
    const int fl0 = nt * 8 + 2 * t;
    const uint32_t qa = ld32(Qr + r0 * DRS + fl0), qb = ld32(Qr + r1 * DRS + fl0);
    const uint32_t ka = ld32(Kr + r0 * DRS + fl0), kb = ld32(Kr + r1 * DRS + fl0);
    db[nt][0] = bf_lo(qa) * dq[nt][0] - bf_lo(ka) * dk[nt][0];
    db[nt][1] = bf_hi(qa) * dq[nt][1] - bf_hi(ka) * dk[nt][1];
    db[nt][2] = bf_lo(qb) * dq[nt][2] - bf_lo(kb) * dk[nt][2];
    db[nt][3] = bf_hi(qb) * dq[nt][3] - bf_hi(kb) * dk[nt][3];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e < 2 ? r0 : r1, fl = fl0 + (e & 1);
      if (r >= len) db[nt][e] = 0.f;
      if (r == len - 1)
        db[nt][e] += exp_ftz(Gr[(len - 1) * DGR + fl]) * rsum[fl] + csum[fl] + csum[DIT + fl] + csum[2 * DIT + fl] +
                     csum[3 * DIT + fl];
    }
    // Suffix sums over the warp's 16 rows: lanes 4g + t hold rows g (e = 0, 1) and g + 8 (e = 2, 3).
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float hi = db[nt][2 + j], lo = db[nt][j];
#pragma unroll
      for (int d = 1; d < 8; d *= 2) {
        const float yh = __shfl_down_sync(0xffffffffu, hi, 4 * d);
        const float yl = __shfl_down_sync(0xffffffffu, lo, 4 * d);
        if (g + d < 8) hi += yh, lo += yl;
      }
      const float tot_hi = __shfl_sync(0xffffffffu, hi, t);  // rows 8..15 of the warp
      lo += tot_hi;
      db[nt][2 + j] = hi;
      db[nt][j] = lo;
      const float tot = __shfl_sync(0xffffffffu, lo, t);  // the whole warp
      if (g == 0) wtot[w * DIT + fl0 + j] = tot;
    }
  }
  __syncthreads();

  // Stores: dq, dk, dg (bf16), rows < len, features < dk: staged in slots 0 and 1 (q, k, gc, dA are all read by now)
  // as bf16 tiles, then copied out 16 bytes at a time (fewer instructions and wider stores than a pair per thread and
  // row).
  bf16* Os = reinterpret_cast<bf16*>(smem);  // [dq, dk, dg][64][DRS]
  static_assert(size_t(3) * kC * DRS * 2 <= 2 * L::slot, "the output tiles fit two slots");
#pragma unroll
  for (int nt = 0; nt < FT; ++nt) {
    const int fl0 = nt * 8 + 2 * t;
    float later[2] = {0.f, 0.f};
    for (int ww = w + 1; ww < 4; ++ww) later[0] += wtot[ww * DIT + fl0], later[1] += wtot[ww * DIT + fl0 + 1];
    uint32_t* o0 = reinterpret_cast<uint32_t*>(Os + r0 * DRS + fl0);
    uint32_t* o1 = reinterpret_cast<uint32_t*>(Os + r1 * DRS + fl0);
    constexpr int next = kC * DRS / 2;  // the next output tile, in 32-bit words
    o0[0] = pack_bf16(dq[nt][0], dq[nt][1]), o1[0] = pack_bf16(dq[nt][2], dq[nt][3]);
    o0[next] = pack_bf16(dk[nt][0], dk[nt][1]), o1[next] = pack_bf16(dk[nt][2], dk[nt][3]);
    o0[2 * next] = pack_bf16(db[nt][0] + later[0], db[nt][1] + later[1]);
    o1[2 * next] = pack_bf16(db[nt][2] + later[0], db[nt][3] + later[1]);
  }
  __syncthreads();
  // dq and dk at their own row stride (grad_row), dg as q.
  const long grow = p.grad_row ? p.grad_row : qrow, gbase = (long(b) * p.T + t0) * grow + long(h) * DK;
  bf16* const outs[3] = {p.dq + gbase, p.dk + gbase, p.dg + qbase};
  const long rows[3] = {grow, grow, qrow};
#pragma unroll
  for (int i = 0; i < 3; ++i)
    store_tile<bf16, kC, DIT, kDqkThreads>(outs[i] + i0, rows[i], Os + i * kC * DRS, DRS, len, DK - i0, p.vout);
}

template <int AHEAD, int DIT>
void launch_dqk_t(const Dims& d, const DqkParams& p, cudaStream_t stream) {
  using L = DqkLayout;
  static const bool attr = [] {
    SPB_CUDA(cudaFuncSetAttribute(dqk_kernel<AHEAD, DIT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::total)));
    return true;
  }();
  (void)attr;
  const dim3 grid((d.dk + DIT - 1) / DIT, d.NT, d.pairs());
  dqk_kernel<AHEAD, DIT><<<grid, kDqkThreads, L::total, stream>>>(p);
  SPB_CUDA_LAUNCH();
}

template <int AHEAD>
void launch_dqk_t(const Dims& d, const DqkParams& p, cudaStream_t stream) {
  if (d.dk <= 32) launch_dqk_t<AHEAD, 32>(d, p, stream);
  else launch_dqk_t<AHEAD, kMaxDit>(d, p, stream);
}

int g_dqk_variant = 0;  // tuning override (0: the default)

}  // namespace

void set_dqk_variant(int v) { g_dqk_variant = v; }

void launch_dqk(const Dims& d, const bf16* q, const bf16* k, const bf16* v, const bf16* d_o, const float* gc,
                const bf16* hs, const bf16* dhs, bf16* dq, bf16* dk, bf16* dg, cudaStream_t stream) {
  const DqkParams p{q, k, v, d_o, gc, hs, dhs, dq, dk, dg, d.B, d.T, d.H, d.dk, d.dv, d.NT, d.scale,
                    aligned16(q) && d.dk % 8 == 0, aligned16(k) && d.dk % 8 == 0, aligned16(v) && d.dv % 8 == 0,
                    aligned16(d_o) && d.dv % 8 == 0, aligned16(gc) && d.dk % 4 == 0,
                    aligned16(hs) && aligned16(dhs) && d.dv % 8 == 0,
                    aligned16(dq) && aligned16(dk) && aligned16(dg) && d.dk % 8 == 0 && d.grad_ld % 8 == 0,
                    d.bh0, d.grad_ld};
  const int var = g_dqk_variant ? g_dqk_variant : kDqkDefaultVariant;
  if (var == 1) launch_dqk_t<1>(d, p, stream);
  else if (var == 2) launch_dqk_t<2>(d, p, stream);
  else launch_dqk_t<3>(d, p, stream);
}

}  // namespace gla_cuda
}  // namespace spb
