// The chunk-parallel stages that need the in-chunk score matrix A (DESIGN §2):
//   MODE_OUT (chunk_output):      o  = s (Q*exp b) hs[n] + tril(A) V
//   MODE_DV  (dv of chunk_grads): dv = (K*exp(B-b)) dhs[n] + tril(A)^T dO
// with A_rj = s sum_i q_ri k_ji exp(b_ri - b_ji), j <= r.
//
// Design:
// - One block of 4 warps per (chunk, dv tile of BV columns, b*h); warp w owns the 16 rows of sub-chunk w.
// - The feature dimension is streamed in slices of IKS = 16 (32 in variant 1; cp.async, double-buffered): 58 KB of
//   shared memory and <= 168 registers let 3 blocks (12 warps) share an SM, and any dk works with the same
//   shared memory: each slice adds to A and to the inter-chunk product (state slice [IKS x BV] of the bf16 hs / dhs,
//   tf32 mma: a bf16 value is an exact tf32 operand, so the slice needs no rounding).
// - A without overflow, the FLA way: warp w scales its queries by exp(b_r - b_ref) and the keys by exp(b_ref - b_j)
//   with b_ref = b at the first row of sub-chunk w. For keys of earlier sub-chunks both factors are <= 1. On the
//   diagonal 16x16 block the key factor is >= 1 but bounded by the decay inside 16 tokens; when that decay exceeds
//   kMaxSubchunkDecay anywhere (never with real gates, only with adversarial ones), the warp recomputes its
//   diagonal block exactly, element by element, from global memory.
// - A stays in registers; A V (or A^T dO) uses bf16 mma on a hi/lo split of A (A in fp32 to 16 bits) with V / dO
//   from ldmatrix.trans: V and dO are exact bf16, so nothing is rounded to bf16 but A's last 8 bits.
// - When dv > BV a block may walk several dv tiles of its chunk and build A once for all of them (intra_kernel,
//   intra_tiles_per_block); A never goes through global memory.
#include <algorithm>
#include <type_traits>

#include "runtime/cuda_check.h"
#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
namespace {

constexpr int MODE_OUT = 0, MODE_DV = 1;
constexpr int IAS = 68;        // fp32 stride of A in shared memory (MODE_DV): reads at rows 2t, 2t+1 -> banks 8t + g
constexpr int kIntraThreads = 128;
// 1: 32-feature slices, 2 blocks per SM; 2: 16-feature slices, 3 blocks per SM (registers <= 168);
// 3: as 2, with one barrier per slice (EARLY, see intra_kernel); 4: as 3, the state slice in quads (QUADS).
constexpr int kIntraDefaultVariant = 4;

// IKS: features per slice (32, or 16: half the shared memory, so that 3 blocks fit an SM); MINB: blocks per SM the
// register allocation is bounded for (2: up to 255 registers, 3: up to 168). QUADS: the state slice as fp32 quads
// (see quad_x) instead of bf16 rows.
template <int BV, int IKS, bool MULTI, bool QUADS>
struct IntraLayout {
  static constexpr int IQS = IKS + 8;  // bf16 stride of q, k slices: 32-bit reads at (row g, col 2t) conflict-free
  static constexpr int IGS = IKS + 8;  // fp32 stride of the gc slice: float2 reads at (row g, col 2t) conflict-free
  static constexpr int HS = BV + 8;  // bf16 stride of the state slice in rows: reads at rows 2t, 2t+1, col g -> banks
                                     // 8t + g/2 (two lanes per 32-bit word)
  static constexpr int WS = BV + 8;  // bf16 stride of V / dO: 16-byte ldmatrix rows, conflict-free
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + size_t(kC) * IQS * 2;
  static constexpr size_t g_off = k_off + size_t(kC) * IQS * 2;
  static constexpr size_t s_off = g_off + size_t(kC) * IGS * 4;
  static constexpr size_t stage = s_off + (QUADS ? size_t(IKS) * BV * 4 : size_t(IKS) * HS * 2);
  static constexpr size_t w_off = 2 * stage;
  static constexpr size_t af_off = w_off + size_t(kC) * WS * 2;
  static constexpr size_t total = af_off + (MULTI ? size_t(4) * 4 * 8 * 32 * 4 : 0);  // Af: [warp][kq][8][lane]
  static_assert(!MULTI || total - af_off >= size_t(kC) * kC * 4, "MULTI: A^T (64 x 64 fp32) passes through Af");
  static_assert(stage % 16 == 0 && size_t(kC) * IAS * 4 <= 2 * stage, "layout");  // A (MODE_DV) spans both stages
};

// QUADS: the state slice (16 rows x BV columns) as 16-byte units, unit (j, n) holding rows 2j, 2j+1, 2j+8, 2j+9 of
// column n: with the k-permutation of the fragments (slot t <-> row 2t, t+4 <-> 2t+1) that is b0, b1 of k-step 0 and
// b0, b1 of k-step 1 for lane (g, t) at column n = 8 nt + g, j = t: one 16-byte load per two mmas instead of four
// 4-byte loads. Unit (j, n) sits at j * BV + (n ^ x_j), x = 0, 3, 5, 6: a quarter-warp's 8 lanes meet the 8 distinct
// 16-byte bank groups both in the fragment loads (g = 0, 1; t = 0..3: x_t / 2 distinct) and in the stores of
// quads_finish (j = 0..3, c even and odd: x_j % 4 distinct). A plain n ^ 2j leaves those stores 4-way conflicted,
// and measured the kernel 18 % slower than the row layout (with fp32 states copied by cp.async).
__device__ __forceinline__ int quad_x(int j) { return 2 * j + ((j ^ (j >> 1)) & 1); }
// Thread idx < BV -> (row group j = idx % 4, 4-column chunk c = idx / 4): it loads rows 2j, 2j+1, 2j+8, 2j+9 of
// columns 4c .. 4c+3 of the slice (bf16, from `g`, row stride gstride; rows >= rmax and columns >= cmax as zeros) into
// registers, one 8-byte load per row (load_state_quads, issued a slice ahead like the cp.async of the other tiles), and
// quads_finish, when the slice's turn comes (before the barrier that publishes it), writes them widened to fp32 into
// its four units (j, 4c + i), column 4c + i in unit i. (4c + i) ^ x = (4c ^ (x & 4)) + (i ^ (x & 3)): one base per
// thread.
template <int BV>
__device__ __forceinline__ int quad_base(int idx) {
  const int j = idx & 3, x = quad_x(j);
  return j * BV + ((4 * (idx >> 2)) ^ (x & 4));
}
// Row r of the thread's four: 2j, 2j+1, 2j+8, 2j+9.
__device__ __forceinline__ int quad_row(int idx, int i) { return 2 * (idx & 3) + (i & 1) + (i >> 1) * 8; }
__device__ __noinline__ uint2 load_state_quad_edge(const bf16* g, long gstride, int r, int c0, int rmax, int cmax,
                                                   bool vec) {
  if (r >= rmax || c0 >= cmax) return make_uint2(0u, 0u);
  const bf16* src = g + r * gstride + c0;
  if (vec && c0 + 4 <= cmax) return *reinterpret_cast<const uint2*>(src);
  uint32_t e[4];
  for (int i = 0; i < 4; ++i) e[i] = c0 + i < cmax ? bf_bits_at(src + i) >> 16 : 0u;
  return make_uint2(e[0] | e[1] << 16, e[2] | e[3] << 16);
}
// The common case (whole slice in range, 16-byte aligned rows) inline and straight-line, as load_tile.
template <int BV, int NTH>
__device__ __forceinline__ void load_state_quads(uint2 (&w)[4], const bf16* g, long gstride, int rmax, int cmax,
                                                 bool vec) {
  static_assert(BV <= NTH, "one thread per 4-column chunk and row group");
  const int idx = threadIdx.x, c0 = 4 * (idx >> 2);
  if (idx >= BV) return;
  if (vec && rmax >= 16 && cmax >= BV) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = *reinterpret_cast<const uint2*>(g + quad_row(idx, i) * gstride + c0);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = load_state_quad_edge(g, gstride, quad_row(idx, i), c0, rmax, cmax, vec);
  }
}
// The thread's rows (load_state_quads) into its units, transposed: unit (j, 4c + i) = rows 2j, 2j+1, 2j+8, 2j+9 of
// column 4c + i, each widened exactly from bf16 (an exact tf32 operand).
template <int BV>
__device__ __forceinline__ void quads_finish(float* s, const uint2 (&w)[4]) {
  const int idx = threadIdx.x;
  if (idx >= BV) return;
  float4* s4 = reinterpret_cast<float4*>(s);
  const int base = quad_base<BV>(idx), xl = quad_x(idx & 3) & 3;
  s4[base + (0 ^ xl)] = make_float4(bf_lo(w[0].x), bf_lo(w[1].x), bf_lo(w[2].x), bf_lo(w[3].x));
  s4[base + (1 ^ xl)] = make_float4(bf_hi(w[0].x), bf_hi(w[1].x), bf_hi(w[2].x), bf_hi(w[3].x));
  s4[base + (2 ^ xl)] = make_float4(bf_lo(w[0].y), bf_lo(w[1].y), bf_lo(w[2].y), bf_lo(w[3].y));
  s4[base + (3 ^ xl)] = make_float4(bf_hi(w[0].y), bf_hi(w[1].y), bf_hi(w[2].y), bf_hi(w[3].y));
}

struct IntraParams {
  const bf16* q;
  const bf16* k;
  const float* gc;
  const bf16* state;   // MODE_OUT: hs; MODE_DV: dhs
  const bf16* w;       // MODE_OUT: v;  MODE_DV: do
  bf16* out;           // MODE_OUT: o;  MODE_DV: dv
  int B, T, H, dk, dv, NT;
  float scale;
  bool vq, vk, vg, vs, vw;
  int tiles;  // column tiles per block (launch_intra)
  int bh0 = 0, nbh = 0;  // the grid's pairs: bh0 + blockIdx.z, blockIdx.z < nbh (GlaShape::pair_range)
  long out_row = 0;      // the row stride of out (MODE_DV: GlaShape::grad_ld; 0: H * dv, as w's)
};

// A_rj (unscaled) summed element by element with exact exponents, from global memory: the fallback for diagonal
// blocks whose in-sub-chunk decay is past kMaxSubchunkDecay. Out of line: it never runs with real gates.
__device__ __noinline__ float exact_score(const bf16* q, const bf16* k, const float* gc, long row, int r, int j,
                                          int dk) {
  const bf16* qr = q + r * row;
  const bf16* kj = k + j * row;
  const float* gq = gc + r * row;
  const float* gj = gc + j * row;
  float x = 0.f;
  for (int f = 0; f < dk; ++f) x += bf_at(qr + f) * bf_at(kj + f) * __expf(gq[f] - gj[f]);
  return x;
}

// EARLY (variant 3): one barrier per slice instead of two. A slice is complete once each thread's own copies have
// landed (QUADS: and the thread has written its own units, quads_finish), so the barrier right after the wait
// publishes it, and the next slice's loads are issued after that barrier; and the V / dO tile gets a cp.async group of
// its own after slice 0, so the first wait is for slice 0 alone (W is needed only at the end).
//
// MULTI (with EARLY; launch_intra_v, where dv > BV): a block covers p.tiles column tiles of its chunk and builds A
// once for all of them, in a pass of its own over the feature slices (q, k, gc only). A's bf16 hi / lo fragments,
// split once, wait in shared memory (Af, 16 KB) for the A V (A^T dO) product of each tile; each tile's pass holds no
// A in registers and streams only what its inter-chunk product needs: q (MODE_OUT) or k (MODE_DV), gc, the state
// slice. Splitting the passes also keeps A (32 registers) and the accumulators (64) out of each other's way: fused,
// the 168-register cap spilled 240-530 bytes. All the passes' slices form one pipeline (the next pass's first slice
// is loaded during the last slice of a pass); MODE_DV's A^T goes through Af (swizzled fp32, asx) instead of the
// stage buffers, which then hold that slice.
//
// QUADS (with EARLY): the state slice in fp32 quads (unit (j, n) at j * BV + (n ^ x_j), see quad_x), through
// registers (load_state_quads, quads_finish): each lane's B fragments of both k-steps of a slice in one 16-byte load.
// The products and their order are those of the row layout, so the outputs are the same bits. Measured (with fp32
// states copied by cp.async): 9-10 % faster than rows at one tile per block; with MULTI 11 % slower (0.535 against
// 0.482 ms at GLA-1B, with fewer instructions executed; not understood), so launch_intra_v pairs QUADS with one tile
// per block only. Neither layout is measured with bf16 states yet.
template <int MODE, int BV, int IKS, int MINB, bool EARLY, bool MULTI, bool QUADS>
__global__ void __launch_bounds__(kIntraThreads, MINB) intra_kernel(const IntraParams p) {
  static_assert(EARLY || !MULTI, "MULTI is written for the one-barrier pipeline");
  static_assert(!QUADS || (EARLY && IKS == 16), "QUADS: 16-feature slices (two k-steps), written before the barrier");
  using L = IntraLayout<BV, IKS, MULTI, QUADS>;
  constexpr int IQS = L::IQS, IGS = L::IGS;
  constexpr int NTV = BV / 8;  // n-tiles of the output tile
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* Ws = reinterpret_cast<bf16*>(smem + L::w_off);

  const int n = blockIdx.y, bh = p.bh0 + blockIdx.z;
  const int tile0 = MULTI ? blockIdx.x * p.tiles : blockIdx.x;
  const int ntile = MULTI ? min(p.tiles, (p.dv + BV - 1) / BV - tile0) : 1;
  const int b = bh / p.H, h = bh % p.H;
  const int t0 = n * kC, len = min(kC, p.T - t0);
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const long qrow = long(p.H) * p.dk, vrow = long(p.H) * p.dv;
  const long qbase = ((long(b) * p.T + t0) * p.H + h) * p.dk;
  const long vbase = ((long(b) * p.T + t0) * p.H + h) * p.dv;
  const long sbase = (long(bh) * p.NT + n) * p.dk * p.dv;
  const long orow = p.out_row ? p.out_row : vrow, obase = (long(b) * p.T + t0) * orow + long(h) * p.dv;
  const int nsl = (p.dk + IKS - 1) / IKS;

  // Passes: MULTI: pass 0 builds A, pass 1 + jt is column tile jt's inter-chunk product; otherwise pass 0 does both
  // for the block's one tile.
  auto tile_of = [&](int pass) { return MULTI ? pass - 1 : 0; };
  auto load_w = [&](int jt) {
    const int j0 = (tile0 + jt) * BV;
    load_tile<bf16, kC, BV, kIntraThreads>(Ws, L::WS, p.w + vbase + j0, vrow, len, p.dv - j0, p.vw);
  };
  uint2 sq[4];  // QUADS: the thread's rows of the state slice of the last load_slice, until its quads_finish
  // Slice s of a pass into stage st: what the pass needs of q, k, gc and the state (QUADS: into sq).
  auto load_slice = [&](int pass, int s, int st) {
    const bool build = !MULTI || pass == 0, inter = !MULTI || pass > 0;
    const int f0 = s * IKS;
    unsigned char* base = smem + st * L::stage;
    if (build || MODE == MODE_OUT)
      load_tile<bf16, kC, IKS, kIntraThreads>(reinterpret_cast<bf16*>(base + L::q_off), IQS, p.q + qbase + f0, qrow,
                                              len, p.dk - f0, p.vq);
    if (build || MODE == MODE_DV)
      load_tile<bf16, kC, IKS, kIntraThreads>(reinterpret_cast<bf16*>(base + L::k_off), IQS, p.k + qbase + f0, qrow,
                                              len, p.dk - f0, p.vk);
    load_tile<float, kC, IKS, kIntraThreads>(reinterpret_cast<float*>(base + L::g_off), IGS, p.gc + qbase + f0, qrow,
                                             len, p.dk - f0, p.vg);
    if (inter) {
      const int j0 = (tile0 + tile_of(pass)) * BV;
      const bf16* ssrc = p.state + sbase + long(f0) * p.dv + j0;
      if (QUADS) load_state_quads<BV, kIntraThreads>(sq, ssrc, p.dv, p.dk - f0, p.dv - j0, p.vs);
      else load_tile<bf16, IKS, BV, kIntraThreads>(reinterpret_cast<bf16*>(base + L::s_off), L::HS, ssrc, p.dv,
                                                   p.dk - f0, p.dv - j0, p.vs);
    }
  };
  // V (or dO) tile first, then feature slice 0: one cp.async group (EARLY: slice 0, then W, two groups; MULTI: W
  // before each tile's pass).
  if (!EARLY) load_w(0);
  load_slice(0, 0, 0);
  cp_async_commit();
  if (EARLY && !MULTI) {
    load_w(0);
    cp_async_commit();
  }

  const int r0 = 16 * w + g, r1 = r0 + 8;  // this thread's rows (queries in A, output rows)
  const bool ok0 = r0 < len, ok1 = r1 < len;
  const bool active = 16 * w < len;  // warp-uniform: the sub-chunk has at least one token
  const int wlast = min(16 * w + 15, len - 1);
  float acc[NTV][4];  // the output tile; zeroed right before each pass that adds to it (MULTI: not live in pass 0)
  auto zero_acc = [&] {
#pragma unroll
    for (int i = 0; i < NTV; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  };

  // One pass over the feature slices: with BUILD, A += the slices' part of the scores; with INTER, acc += the
  // inter-chunk product. The stage parity carries over from pass to pass (nsl slices each).
  auto run_pass = [&](auto build, auto inter, int pass, float (&A)[8][4], bool& big) {
    constexpr bool BUILD = decltype(build)::value, INTER = decltype(inter)::value;
    const int npass = MULTI ? ntile + 1 : 1;
    // The next pass's first slice is loaded during this pass's last slice.
    const bool cross = pass + 1 < npass;
    // W: in the first wait only where a W group follows slice 0 (EARLY: the one tile; MULTI: every tile's pass).
    const bool w_follows = EARLY && (!MULTI || INTER);
    int st = (pass * nsl) & 1;
    for (int s = 0; s < nsl; ++s, st ^= 1) {
      const bool prefetch = s + 1 < nsl || cross;
      if (w_follows && s == 0) cp_async_wait<1>();  // slice 0 (this tile's W may still be in flight)
      else cp_async_wait<0>();
      if (!EARLY) {
        __syncthreads();  // slice s (and the W tile) visible; every warp is done with the previous slice
        if (prefetch) load_slice(s + 1 < nsl ? pass : pass + 1, s + 1 < nsl ? s + 1 : 0, st ^ 1);
        cp_async_commit();
      }
      if (INTER && QUADS) quads_finish<BV>(reinterpret_cast<float*>(smem + st * L::stage + L::s_off), sq);
      __syncthreads();  // EARLY: slice s visible; every warp is done with the previous slice
      if (EARLY) {
        if (prefetch) load_slice(s + 1 < nsl ? pass : pass + 1, s + 1 < nsl ? s + 1 : 0, st ^ 1);
        cp_async_commit();
      }
      if (!active) continue;
      const unsigned char* base = smem + st * L::stage;
      const bf16* Q = reinterpret_cast<const bf16*>(base + L::q_off);
      const bf16* K = reinterpret_cast<const bf16*>(base + L::k_off);
      const float* G = reinterpret_cast<const float*>(base + L::g_off);
      const float* S = reinterpret_cast<const float*>(base + L::s_off);  // QUADS: fp32 quads
      const bf16* Sb = reinterpret_cast<const bf16*>(base + L::s_off);   // rows: bf16
      if (BUILD && lane < IKS && s * IKS + lane < p.dk)
        big |= G[16 * w * IGS + lane] - G[wlast * IGS + lane] > kMaxSubchunkDecay;
      uint32_t ea[IKS / 8][4];  // the inter-chunk operand of each k-step (QUADS: used after the last)
#pragma unroll
      for (int kk = 0; kk < IKS / 8; ++kk) {
        const int c = kk * 8 + 2 * t;
        const float2 g0 = ldf2(G + r0 * IGS + c), g1 = ldf2(G + r1 * IGS + c);
        uint32_t ia0 = 0, ia1 = 0, ia2 = 0, ia3 = 0;
        float2 gr = make_float2(0.f, 0.f);
        if (BUILD) {
          gr = ldf2(G + 16 * w * IGS + c);  // b_ref: first row of this warp's sub-chunk
          const uint32_t q0 = ld32(Q + r0 * IQS + c), q1 = ld32(Q + r1 * IQS + c);
          // Intra queries q * exp(b - b_ref) <= q; rows past the chunk end forced to 0 (their b is 0, not <= b_ref).
          ia0 = ok0 ? tf32_bits(bf_lo(q0) * exp_ftz(g0.x - gr.x)) : 0u;
          ia2 = ok0 ? tf32_bits(bf_hi(q0) * exp_ftz(g0.y - gr.y)) : 0u;
          ia1 = ok1 ? tf32_bits(bf_lo(q1) * exp_ftz(g1.x - gr.x)) : 0u;
          ia3 = ok1 ? tf32_bits(bf_hi(q1) * exp_ftz(g1.y - gr.y)) : 0u;
        }
        if (INTER) {
          // The inter-chunk operand: q * exp(b) (MODE_OUT) or k * exp(B - b) (MODE_DV), rows past the end zeros.
          uint32_t &ea0 = ea[kk][0], &ea1 = ea[kk][1], &ea2 = ea[kk][2], &ea3 = ea[kk][3];
          if (MODE == MODE_OUT) {
            const uint32_t q0 = ld32(Q + r0 * IQS + c), q1 = ld32(Q + r1 * IQS + c);
            ea0 = tf32_bits(bf_lo(q0) * exp_ftz(g0.x));
            ea2 = tf32_bits(bf_hi(q0) * exp_ftz(g0.y));
            ea1 = tf32_bits(bf_lo(q1) * exp_ftz(g1.x));
            ea3 = tf32_bits(bf_hi(q1) * exp_ftz(g1.y));
          } else {
            const float2 gB = ldf2(G + (len - 1) * IGS + c);
            const uint32_t k0w = ld32(K + r0 * IQS + c), k1w = ld32(K + r1 * IQS + c);
            ea0 = tf32_bits(bf_lo(k0w) * exp_ftz(gB.x - g0.x));
            ea2 = tf32_bits(bf_hi(k0w) * exp_ftz(gB.y - g0.y));
            ea1 = tf32_bits(bf_lo(k1w) * exp_ftz(gB.x - g1.x));
            ea3 = tf32_bits(bf_hi(k1w) * exp_ftz(gB.y - g1.y));
          }
          if (QUADS && kk + 1 == IKS / 8) {  // both k-steps, each acc[nt] in k-step order as below
            // This lane's unit of n-tile 0; n-tile nt's is 8 nt further (unit (t, 8 nt + g), as g ^ x_t < 8), so the
            // loads take immediate offsets.
            const float4* Sq = reinterpret_cast<const float4*>(S) + t * BV + (g ^ quad_x(t));
#pragma unroll
            for (int nt = 0; nt < NTV; ++nt) {
              const float4 bq = Sq[nt * 8];
              mma_tf32(acc[nt], ea[0][0], ea[0][1], ea[0][2], ea[0][3], __float_as_uint(bq.x), __float_as_uint(bq.y));
              mma_tf32(acc[nt], ea[1][0], ea[1][1], ea[1][2], ea[1][3], __float_as_uint(bq.z), __float_as_uint(bq.w));
            }
          }
#pragma unroll
          for (int nt = 0; nt < (QUADS ? 0 : NTV); ++nt) {
            const uint32_t b0 = bf_bits_at(Sb + (kk * 8 + 2 * t) * L::HS + nt * 8 + g);
            const uint32_t b1 = bf_bits_at(Sb + (kk * 8 + 2 * t + 1) * L::HS + nt * 8 + g);
            mma_tf32(acc[nt], ea0, ea1, ea2, ea3, b0, b1);
          }
        }
        if (BUILD) {
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
            if (nt <= 2 * w + 1) {  // keys 0 .. 16w+15
              const int key = nt * 8 + g;
              const uint32_t kw = ld32(K + key * IQS + c);
              const float2 gk = ldf2(G + key * IGS + c);
              const uint32_t b0 = tf32_bits(bf_lo(kw) * exp_ftz(gr.x - gk.x));
              const uint32_t b1 = tf32_bits(bf_hi(kw) * exp_ftz(gr.y - gk.y));
              mma_tf32(A[nt], ia0, ia1, ia2, ia3, b0, b1);
            }
          }
        }
      }
    }
    if (w_follows && nsl == 1) {  // W was not covered by the wait of a later slice
      cp_async_wait<0>();
      __syncthreads();
    }
  };

  const int lr = (lane & 7) + ((lane >> 3) & 1) * 8, lc = (lane >> 4) * 8;  // ldmatrix.x4.trans row / column
  // acc += A V (keys 16kq .. 16kq+15, MODE_OUT) or A^T dO (queries 16kq .., MODE_DV) from A's hi / lo fragments.
  auto add_aw = [&](int kq, const uint32_t (&hi)[4], const uint32_t (&lo)[4]) {
#pragma unroll
    for (int np = 0; np < BV / 16; ++np) {
      uint32_t bb[4];
      ldmatrix_x4_trans(bb, Ws + (16 * kq + lr) * L::WS + np * 16 + lc);
      mma_bf16(acc[2 * np], hi, bb[0], bb[1]);
      mma_bf16(acc[2 * np], lo, bb[0], bb[1]);
      mma_bf16(acc[2 * np + 1], hi, bb[2], bb[3]);
      mma_bf16(acc[2 * np + 1], lo, bb[2], bb[3]);
    }
  };
  // The key (MODE_OUT) or query (MODE_DV) blocks this warp's rows meet in A.
  auto uses = [&](int kq) { return MODE == MODE_OUT ? kq <= w : kq >= w; };
  auto scale_acc = [&] {  // MODE_OUT: o = s (Q exp b) hs + A V with A already scaled
    if (MODE == MODE_OUT) {
#pragma unroll
      for (int i = 0; i < NTV; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] *= p.scale;
    }
  };
  auto store_tile = [&](int jt) {
    const int j0 = (tile0 + jt) * BV;
#pragma unroll
    for (int nt = 0; nt < NTV; ++nt) {
      const int c = j0 + nt * 8 + 2 * t;
      if (ok0) store2(p.out + obase + r0 * orow + c, c, p.dv, acc[nt][0], acc[nt][1]);
      if (ok1) store2(p.out + obase + r1 * orow + c, c, p.dv, acc[nt][2], acc[nt][3]);
    }
  };
  // Af: word e of the hi (e < 4) / lo (e >= 4) fragment of block kq, of this lane: conflict-free by lane.
  uint32_t* Af = reinterpret_cast<uint32_t*>(smem + L::af_off) + w * 4 * 8 * 32 + lane;

  {  // ---- A (and, without MULTI, the one tile) ----
    float A[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) A[i][0] = A[i][1] = A[i][2] = A[i][3] = 0.f;
    bool big = false;
    if (!MULTI) zero_acc();
    run_pass(std::true_type(), std::integral_constant<bool, !MULTI>(), 0, A, big);
    // Exact diagonal block when the factorised one could overflow (see kMaxSubchunkDecay).
    big = __any_sync(0xffffffffu, big);
    if (big && active) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (nt == 2 * w || nt == 2 * w + 1) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = e < 2 ? r0 : r1, key = nt * 8 + 2 * t + (e & 1);
            A[nt][e] = (key <= r && r < len)
                           ? exact_score(p.q + qbase, p.k + qbase, p.gc + qbase, qrow, r, key, p.dk)
                           : 0.f;
          }
        }
      }
    }
    // Scale and causal mask (key <= row < len).
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e < 2 ? r0 : r1, key = nt * 8 + 2 * t + (e & 1);
        A[nt][e] = (nt <= 2 * w + 1 && key <= r && r < len) ? A[nt][e] * p.scale : 0.f;
      }
    // MODE_DV: A^T is needed (rows of dv are keys), so A goes through shared memory: the stage buffers (free now)
    // or, MULTI, Af (the stages hold the next slice already), as 64 x 64 fp32 with its columns swizzled by rows so
    // that the transposed reads below meet distinct banks.
    float* As = reinterpret_cast<float*>(smem + (MULTI ? L::af_off : 0));
    auto asx = [](int row, int col) { return MULTI ? row * 64 + (col ^ ((row & 6) << 2)) : row * IAS + col; };
    if (MODE == MODE_DV) {
      __syncthreads();  // every warp is done with the stage buffers
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        *reinterpret_cast<float2*>(As + asx(r0, nt * 8 + 2 * t)) = make_float2(A[nt][0], A[nt][1]);
        *reinterpret_cast<float2*>(As + asx(r1, nt * 8 + 2 * t)) = make_float2(A[nt][2], A[nt][3]);
      }
      __syncthreads();
    }
    if (!MULTI) scale_acc();
    if (active) {
#pragma unroll
      for (int kq = 0; kq < 4; ++kq) {
        if (uses(kq)) {
          uint32_t hi[4], lo[4];
          if (MODE == MODE_OUT) {
            split_bf16(A[2 * kq][0], A[2 * kq][1], hi[0], lo[0]);
            split_bf16(A[2 * kq][2], A[2 * kq][3], hi[1], lo[1]);
            split_bf16(A[2 * kq + 1][0], A[2 * kq + 1][1], hi[2], lo[2]);
            split_bf16(A[2 * kq + 1][2], A[2 * kq + 1][3], hi[3], lo[3]);
          } else {  // A[query][key] = 0 for query < key
            const int qa = 16 * kq + 2 * t;
            split_bf16(As[asx(qa, r0)], As[asx(qa + 1, r0)], hi[0], lo[0]);
            split_bf16(As[asx(qa, r1)], As[asx(qa + 1, r1)], hi[1], lo[1]);
            split_bf16(As[asx(qa + 8, r0)], As[asx(qa + 9, r0)], hi[2], lo[2]);
            split_bf16(As[asx(qa + 8, r1)], As[asx(qa + 9, r1)], hi[3], lo[3]);
          }
          if (MULTI) {  // kept in A's registers until every warp is done reading As (MODE_DV: the same space as Af)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              A[2 * kq][e] = __uint_as_float(hi[e]), A[2 * kq + 1][e] = __uint_as_float(lo[e]);
          } else {
            add_aw(kq, hi, lo);
          }
        }
      }
      if (!MULTI) store_tile(0);
    }
    if (MULTI) {
      if (MODE == MODE_DV) __syncthreads();
      if (active) {
#pragma unroll
        for (int kq = 0; kq < 4; ++kq)
          if (uses(kq)) {
#pragma unroll
            for (int e = 0; e < 4; ++e)
              Af[(kq * 8 + e) * 32] = __float_as_uint(A[2 * kq][e]),
                                 Af[(kq * 8 + 4 + e) * 32] = __float_as_uint(A[2 * kq + 1][e]);
          }
      }
    }
  }

  if (MULTI) {  // ---- the column tiles, A from Af ----
    float none[8][4];  // not used without BUILD
    bool no_big = false;
    for (int jt = 0; jt < ntile; ++jt) {
      __syncthreads();  // every warp is done with W
      load_w(jt);
      cp_async_commit();
      zero_acc();
      run_pass(std::false_type(), std::true_type(), 1 + jt, none, no_big);
      scale_acc();
      if (active) {
#pragma unroll
        for (int kq = 0; kq < 4; ++kq) {
          if (uses(kq)) {
            uint32_t hi[4], lo[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) hi[e] = Af[(kq * 8 + e) * 32], lo[e] = Af[(kq * 8 + 4 + e) * 32];
            add_aw(kq, hi, lo);
          }
        }
        store_tile(jt);
      }
    }
  }
}

template <int MODE, int BV, int IKS, int MINB, bool EARLY, bool MULTI, bool QUADS>
void launch_intra_t(const IntraParams& p, cudaStream_t stream) {
  using L = IntraLayout<BV, IKS, MULTI, QUADS>;
  static const bool attr = [] {
    SPB_CUDA(cudaFuncSetAttribute(intra_kernel<MODE, BV, IKS, MINB, EARLY, MULTI, QUADS>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::total)));
    return true;
  }();
  (void)attr;
  const int ntile = (p.dv + BV - 1) / BV;
  const dim3 grid((ntile + p.tiles - 1) / p.tiles, p.NT, p.nbh);
  intra_kernel<MODE, BV, IKS, MINB, EARLY, MULTI, QUADS><<<grid, kIntraThreads, L::total, stream>>>(p);
  SPB_CUDA_LAUNCH();
}

int g_intra_variant = 0;  // tuning override (0: the default below)
int g_intra_tiles = 0;    // tuning override of the column tiles per block (0: intra_tiles_per_block)

// Variants 1 and 2 rebuild A for every column tile (one tile per block); variants 3 and 4 walk several where the
// plan (or set_intra_tiles) says so, both with the state slice in rows there (variant 4 has quads at one tile).
template <int MODE, int BV>
void launch_intra_v(IntraParams p, cudaStream_t stream) {
  constexpr int MINB = 3;  // blocks per SM of the 16-feature-slice variants (2, 3): the plan's wave is MINB x SMs
  const int v = g_intra_variant ? g_intra_variant : kIntraDefaultVariant;
  const int ntile = (p.dv + BV - 1) / BV;
  p.tiles = v < 3 ? 1 : std::min(ntile, g_intra_tiles ? g_intra_tiles
                                                      : intra_tiles_per_block(ntile, long(p.NT) * p.nbh,
                                                                              MINB * sm_count()));
  if (v == 1) launch_intra_t<MODE, BV, 32, 2, false, false, false>(p, stream);
  else if (v == 2) launch_intra_t<MODE, BV, 16, MINB, false, false, false>(p, stream);
  else if (v == 3 && p.tiles == 1) launch_intra_t<MODE, BV, 16, MINB, true, false, false>(p, stream);
  else if (v == 3) launch_intra_t<MODE, BV, 16, MINB, true, true, false>(p, stream);
  else if (p.tiles == 1) launch_intra_t<MODE, BV, 16, MINB, true, false, true>(p, stream);
  else launch_intra_t<MODE, BV, 16, MINB, true, true, false>(p, stream);  // quads measured slower here: see QUADS
}

template <int MODE>
void launch_intra(const Dims& d, const bf16* q, const bf16* k, const float* gc, const bf16* state, const bf16* w,
                  bf16* out, cudaStream_t stream, int bv) {
  const IntraParams p{q,    k,    gc,   state, w,    out,     d.B,
                      d.T,  d.H,  d.dk, d.dv,  d.NT, d.scale, aligned16(q) && d.dk % 8 == 0,
                      aligned16(k) && d.dk % 8 == 0, aligned16(gc) && d.dk % 4 == 0,
                      aligned16(state) && d.dv % 8 == 0, aligned16(w) && d.dv % 8 == 0, 1, d.bh0, d.pairs(),
                      MODE == MODE_DV ? d.grad_ld : 0};
  // 128 columns per block where dv allows, 64 for small dv.
  if (bv == 0) bv = d.dv > 64 ? 128 : 64;
  if (bv == 128) launch_intra_v<MODE, 128>(p, stream);
  else launch_intra_v<MODE, 64>(p, stream);
}

}  // namespace

// A block walking c column tiles builds A once for all c: about c + 1 units of work (A costs about as much as one
// tile's inter-chunk product: per feature, ~2.5 key rows of exps, casts and mmas per warp against 16 state columns of
// mmas and loads) instead of 2c. Fewer, longer blocks also fill the last wave less evenly; the plan minimises
// waves x block length, with `resident` blocks per wave.
int intra_tiles_per_block(int ntile, long other_blocks, int resident) {
  int best = 1;
  long best_cost = -1;
  for (int c = 1; c <= ntile; ++c) {
    const long blocks = other_blocks * ((ntile + c - 1) / c);
    const long cost = (blocks + resident - 1) / resident * (c + 1);
    if (best_cost < 0 || cost < best_cost) best = c, best_cost = cost;
  }
  return best;
}

void set_intra_variant(int v) { g_intra_variant = v; }
void set_intra_tiles(int tiles) { g_intra_tiles = tiles; }

void launch_output(const Dims& d, const bf16* q, const bf16* k, const bf16* v, const float* gc, const bf16* hs,
                   bf16* o, cudaStream_t stream, int bv) {
  launch_intra<MODE_OUT>(d, q, k, gc, hs, v, o, stream, bv);
}

void launch_dv(const Dims& d, const bf16* q, const bf16* k, const bf16* d_o, const float* gc, const bf16* dhs,
               bf16* dv, cudaStream_t stream, int bv) {
  launch_intra<MODE_DV>(d, q, k, gc, dhs, d_o, dv, stream, bv);
}

}  // namespace gla_cuda
}  // namespace spb
