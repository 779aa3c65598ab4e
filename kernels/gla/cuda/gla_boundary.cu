// The boundary state of a rank alone, without the chunk states: a chunk-parallel reduction (ZeCO / LASP-2 need only
// M_p and D_p before any communication; the ordinary recurrence then runs once with the true boundary states).
//
//   forward:  fin = sum_n diag(exp(sum_{m>n} B_m)) (K_n * exp(B_n - b))^T V_n     = launch_states' ht, init = 0
//   backward: fin = sum_n diag(exp(sum_{m<n} B_m)) (s Q_n * exp(b))^T dO_n        = launch_states' dh0, init = 0
//
// Design:
// - Stage 1 (boundary_kernel; its numerics and pipeline: gla_boundary_kernel.cu): block = (b*h, span of `span`
//   consecutive chunks, BK-row dk tile, BN-column dv tile), 8 warps in a WM x (8 / WM) grid, each owning a
//   (BK/WM) x (BN*WM/8) piece of the tile in mma accumulator registers. The block runs the recurrence of
//   gla_states.cu over its span only, from a zero state (acc = diag(exp B_n) acc + X~_n^T Y_n, chunks ascending
//   forward, descending backward), and writes the span's partial state P_s and its total log-decay tau_s = sum of
//   B_n over the span (per dk row) to scratch.
// - Stage 2 (boundary_fold_kernel): fin = the spans folded in order, acc = diag(exp tau_s) acc + P_s (s = 0 .. S-1
//   forward, S-1 .. 0 backward), one thread per 4 state elements. With one span (S == 1) stage 1 writes fin itself
//   and stage 2 is skipped. Deterministic: fixed orders, no atomics.
// - Spans: S spans per (b, h) chosen so that the grid fills whole waves (minimising waves x (chunks per span + 2)) of
//   the layout's blocks per SM. Blocks of one (b*h, span) are adjacent in the grid (tile index fastest), so they run
//   together and share their x / gc / y tiles through L2.
//
// Variants (set_boundary_variant; 0 = the default = 7, the fastest measured at every shape). kernels/gla/cuda/NOTES.md
// ("The boundary kernel") has the per-step budget behind them.
//   1  plain: 2 x 4 warps, 32-token steps, X~(s+1) built before the products of step s (its own basic block,
//      __expf), tiles 128 x 128 / 128 x 256 / 64 x ..., 1 block/SM.
//   2  1 with 64-row tiles (64 x 128 where dv > 64): 2 blocks per SM, the two dk halves of a head share y in L2.
//   3  1 with 64-column tiles (128 x 64): 2 blocks per SM; x / gc and the exps are duplicated per dv half.
//   4  1 with spans of 16 chunks (two waves at T = 16K, four at 32K; twice the partials).
//   5  IL at 1's tiles: X~(s+1) built inside the products of step s (loads at the step's start, one quarter of the
//      values per 8-token k-step, the stores after the products) with exp_ftz (ex2.approx.ftz); 4 x 2 warps on
//      128 x 128 and 128 x 64 (half the A-fragment loads); at 128 x 256 (k-loop not unrolled) X~(s+1) after the
//      products.
//   6  IL with 64-row tiles (64 x 128): 2 blocks per SM.
//   7  as 5 with 64-token steps (half the barriers and waits; three stages only); 32-token at BN = 256.
//   8  as 6 with bulk copies: whole-tile steps loaded by one cp.async.bulk per row (warp 0) completing on the
//      stage's mbarrier (the TMA without a tensor map) instead of 16-byte cp.async per thread; edge tiles cp.async.
//   9  as 5 with bulk copies (128 x 64 stays on cp.async: it spills at 128 registers).
// Resources (nvcc 13.0, -arch=sm_90a -Xptxas -v; no spills anywhere), registers forward / backward:
//   config (tile, warps, step)      variant  regs     smem (stages)          blocks/SM
//   128 x 128, 2x4, 32, plain       1 4      194/192  201 KB (6 x 33.5 KB)   1
//   128 x 256, 2x4, 32, plain       1 4      254/255  207.5 KB (5 x 41.5)    1
//   64 x 128, 2x4, 32, plain        2        122/120  106.2 KB (5 x 21.2)    2
//   128 x 64, 2x4, 32, plain        3        126/124  88.5 KB (3 x 29.5)     2
//   128 x 128, 4x2, 32, IL          5        202/200  201 KB (6 x 33.5)      1
//   128 x 256, 2x4, 32, IL          5 7      254/255  207.5 KB (5 x 41.5)    1
//   64 x 128, 2x4, 32, IL           6        126/122  106.2 KB (5 x 21.2)    2
//   128 x 128, 4x2, 64, IL          7        209/206  199.5 KB (3 x 66.5)    1
//   64 x 128, 2x4, 32, IL+bulk      8        128/128  106.3 KB (5 x 21.2)    2
//   128 x 128, 4x2, 32, IL+bulk     9        226/220  201.1 KB (6 x 33.5)    1
//   128 x 256, 2x4, 32, IL+bulk     9        255/255  207.6 KB (5 x 41.5)    1
//   (others, edge shapes only: plain 64 x 256 182/181, 64 x 64 101/96; IL 64 x 256 190/192, 64 x 64 112/109,
//   128 x 64 4x2 111/112; IL 64-token 128 x 64 211/212, 64 x 128 158/160, 64 x 64 114/110; bulk 64 x 256 208/202,
//   64 x 64 117/114.) Fold: 32 / 40 registers, no shared memory.
// Grids: B1 T16K H16 128/128: variants 1/5/7/9 8 spans x 32 chunks, 128 blocks (1/SM); 2/3/6/8 8 x 32, 256 blocks
//   (2/SM); 4 16 x 16, 256 blocks (1/SM, 2 waves). T32K: the same with 64-chunk spans (4: 32 x 16, 512 blocks, 4
//   waves). B1 T16K H4 256/512: 1/5/9 128 x 256 tiles, 8 x 32, 128 blocks (and 7 in the table below); 2/6/8 64 x
//   128, 4 spans x 64, 256 blocks (each x / gc tile read by 4 blocks, y by 4); 3 128 x 64, 4 x 64, 256 blocks; 4 16
//   x 16, 256 blocks; the default 7 now 128 x 128 (plan_of).
// tf32 mma.sync at ~4 clocks per m16n8k8 per SM, which fits variant 1's 116 us, puts a floor of ~71 us under stage 1
// at T = 16K H16 and ~142 us at H4 256/512. Measured, one H200, each alone, median of 20, stage 1 + fold (sha
// 45a324d, results/logs/nvidia-h200-x4_collective_session.log):
//   variant                      1    2    3    4    5    6    7    8    9
//   B1 T16K H16 128/128 (us):  117  108  140  128   98  102   93  256  257
//   B1 T32K H16 128/128 (us):  219  204  267  242  181  190  171  504  504
//   B1 T16K H4 256/512 (us):   165  194  256  174  147  181  147  499  295
//   Default 7, with 128 x 128 tiles where dv > 128 (not timed alone there; the table's 7 at H4 256/512 ran 128 x
//   256 tiles): the chunk states then reuse its reduction (plan_of). launch_boundary_gates runs 7 with RAW (reads g, scans each chunk itself; 128-row
//   tiles, dv <= 128 per tile: 228 / 234 registers, 220 KB): 96 / 94 us at T16K, 173 / 172 at T32K (sha 1fb919a,
//   results/logs/dev/boundary_from_raw_gates_session.log). The bulk copies (8, 9) are 2.5x slower than their
//   cp.async twins, not understood (a guess: one warp issuing a 256-byte copy per row serialises the stage's
//   requests).
#include <algorithm>

#include "runtime/cuda_check.h"
#include "runtime/error.h"
#include "kernels/gla/cuda/gla_boundary.cuh"
#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
using namespace boundary_detail;
namespace {

// fin[bh][r][c] = fold over the spans of the partial states, acc = exp(tau_s[r]) acc + P_s[r][c], for the pairs
// bh of sc's range (sc: the launch's BoundaryParams, for its scratch layout); VEC: 4 columns per thread (dv % 4 == 0,
// 16-byte aligned fin, scratch and init0), else one.
// lambda (nullable, forward): the sum of the spans' tau_s, in span order, by the thread of column 0.
// excl (launch_states_spans): acc starts at init0 (nullable: 0) and each P_s is replaced, in place, by acc before it
// (the span's true initial state); fin is then nullable. DECAYS (with excl, for a late initial state): the sum of the
// tau before each span (after it, backward) goes to excl_at.
template <bool VEC, bool DECAYS = false>
__global__ void __launch_bounds__(256) boundary_fold_kernel(float* scratch, float* fin, float* lambda,
                                                            const float* init0, bool excl, int nbh,
                                                            const BoundaryParams sc, bool rev) {
  constexpr int E = VEC ? 4 : 1;
  const int dk = sc.dk, dv = sc.dv, S = sc.S;
  const int cg = dv / E;
  const long n = long(nbh) * dk * cg;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const int c = int(i % cg) * E;
    const long row = long(sc.bh0) * dk + i / cg;  // bh * dk + r
    const int r = int(row % dk);
    const long bh = row / dk;
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
    if (init0) {
      if constexpr (VEC) a = *reinterpret_cast<const float4*>(init0 + row * dv + c);
      else a.x = init0[row * dv + c];
    }
    float lam = 0.f;
#pragma unroll 4
    for (int k = 0; k < S; ++k) {
      const long s = rev ? S - 1 - k : k;
      const float ts = scratch[sc.tau_at(int(s), bh) + r], d = __expf(ts);
      if (DECAYS && c == 0) scratch[sc.excl_at(int(s), bh) + r] = lam;
      lam += ts;
      float* P = scratch + sc.part_at(int(s), bh) + long(r) * dv + c;
      if constexpr (VEC) {
        const float4 v = *reinterpret_cast<const float4*>(P);
        if (excl) *reinterpret_cast<float4*>(P) = a;
        a.x = d * a.x + v.x, a.y = d * a.y + v.y, a.z = d * a.z + v.z, a.w = d * a.w + v.w;
      } else {
        const float v = P[0];
        if (excl) P[0] = a.x;
        a.x = d * a.x + v;
      }
    }
    if (fin) {
      if constexpr (VEC) *reinterpret_cast<float4*>(fin + row * dv + c) = a;
      else fin[row * dv + c] = a.x;
    }
    if (lambda && c == 0) lambda[row] = lam;
  }
}

int g_boundary_span = 0;     // tuning / test override of the chunks per span (0: the variant's choice)
int g_boundary_variant = 0;  // tuning / test override of the kernel variant (0: the default)

// The variants (header comment): 1 the plain kernel; 2 1 with 64-row tiles (2 blocks per SM where dv <= 128);
// 3 1 with 64-column tiles (2 blocks per SM); 4 1 with spans of 16 chunks; 5 IL at 1's tiles (4 x 2 warps on
// 128 x 128 and 128 x 64); 6 IL with 64-row tiles; 7 as 5 with 64-token steps (32-token where 64 does not fit);
// 8 as 6 with bulk copies; 9 as 5 with bulk copies. 0: the default, 7 (the fastest measured at every shape), with
// 128-column tiles where dv > 128 and 32 x 64 tiles where dk <= 32 and dv <= 64 (plan_of).
constexpr int kBoundaryVariants = 9;

// pl.span and pl.S: `span` chunks per span if > 0, else the span that fills pl's grid best.
void set_spans(const Dims& d, Plan& pl, int span) {
  const int bps = layout_bps(pl.bk, pl.bn, pl.wm, pl.ts);
  const long units = long(d.pairs()) * ((d.dk + pl.bk - 1) / pl.bk) * ((d.dv + pl.bn - 1) / pl.bn);
  const long slots = long(bps) * sm_count();
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
}

}  // namespace

namespace boundary_detail {

Plan plan_of(const Dims& d) {
  int v = g_boundary_variant;
  if (v < 1 || v > kBoundaryVariants) v = 7;
  Plan pl;
  const int bk1 = d.dk > 64 ? 128 : 64, bn1 = d.dv > 128 ? 256 : d.dv > 64 ? 128 : 64;
  pl.bk = bk1, pl.bn = bn1, pl.wm = 2, pl.ts = 32, pl.il = v >= 5, pl.bulk = v >= 8;
  int span = g_boundary_span;
  if (v == 2 || v == 6 || v == 8) pl.bk = 64, pl.bn = d.dv > 64 ? 128 : 64;
  if (v == 3) pl.bn = 64;
  // The default keeps to 128 columns where dv > 128 too: the chunk states' STORE pass cannot hold 128 x 256 tiles
  // (states_plan_of), and only a reduction of its own tiles is one it reuses, so that an SP rank's M_p / D_p and its
  // chunk states cost one reduction, not two.
  if (v == 7 && pl.bn > 128) pl.bn = 128;
  if (v == 4 && span <= 0) span = 16;
  if ((v == 5 || v == 7 || v == 9) && pl.bk == 128 && pl.bn <= 128) pl.wm = 4;
  if (v == 7 && pl.bn <= 128) pl.ts = 64;  // 128 x 256 does not fit three 64-token stages
  if (v == 7 && d.dk <= 32 && d.dv <= 64) pl.bk = 32;  // GLA-1B's 32 heads of 32 x 64: 64 rows are half zeros
  if (pl.bulk && pl.bk == 128 && pl.bn == 64) pl.bulk = false;  // 128 x 64 with bulk copies spills at 128 registers
  set_spans(d, pl, span);
  return pl;
}
// The chunk states by spans (launch_states_spans): the STORE kernel at variant 7's configuration with at most 128 columns
// per tile (128 x 256 holds 128 accumulators per warp at 255 registers: no room for the stores), and the spans of
// plan_of(d) where its tiles are the same (the reduction an SP rank ran first is then reused), else its own. Not
// affected by set_boundary_variant (the span override applies).
Plan states_plan_of(const Dims& d) {
  const Plan red = plan_of(d);
  Plan pl;
  pl.bk = d.dk > 64 ? 128 : 64, pl.bn = d.dv > 64 ? 128 : 64, pl.wm = pl.bk == 128 ? 4 : 2, pl.ts = 64;
  if (d.dk <= 32 && d.dv <= 64) pl.bk = 32;  // as plan_of's
  pl.il = true, pl.bulk = false;
  if (red.bk == pl.bk && red.bn == pl.bn) pl.span = red.span, pl.S = red.S;
  else set_spans(d, pl, g_boundary_span);
  return pl;
}

}  // namespace boundary_detail

void set_boundary_span(int chunks) { g_boundary_span = chunks; }
void set_boundary_variant(int v) { g_boundary_variant = v; }
int boundary_variants() { return kBoundaryVariants; }

size_t boundary_scratch_elems(const Dims& d) {
  const size_t bh = size_t(d.B) * d.H;  // every pair has its place (BoundaryParams::part_at), whatever d's range
  size_t n = 0;
  for (const Plan& pl : {plan_of(d), states_plan_of(d)})
    if (pl.S > 1) n = std::max(n, bh * pl.S * d.dk * d.dv + 2 * bh * pl.S * d.dk);  // (+ excl_at's)
  return n;
}

namespace boundary_detail {

BoundaryParams params_of(const Dims& d, const Plan& pl, const bf16* x, const bf16* y, const float* gc, const bf16* g) {
  const bool vg = pl.raw ? aligned16(g) && d.dk % 8 == 0 : aligned16(gc) && d.dk % 4 == 0;
  BoundaryParams p{x,    y,    gc,   g,    nullptr, nullptr, nullptr, d.B,     d.T,
                   d.H,  d.dk, d.dv, d.NT, pl.span, pl.S,    d.scale, aligned16(x) && d.dk % 8 == 0,
                   aligned16(y) && d.dv % 8 == 0,    vg};
  p.bh0 = d.bh0, p.nbh = d.pairs();
  return p;
}
// The fold of the spans' partials in scratch: fin (nullable where excl) and lambda (nullable); excl: the partials
// become the spans' initial states, from init0 (nullable: 0); decays (with excl): the decay to each span's edge too.
void launch_fold(const Dims& d, const Plan& pl, bool reverse, float* scratch, float* fin, float* lambda,
                 const float* init0, bool excl, cudaStream_t stream, bool decays) {
  const BoundaryParams sc = params_of(d, pl, nullptr, nullptr, nullptr, nullptr);  // (the scratch layout)
  const bool vec = d.dv % 4 == 0 && (!fin || aligned16(fin)) && (!init0 || aligned16(init0)) && aligned16(scratch);
  const long n = long(d.pairs()) * d.dk * (vec ? d.dv / 4 : d.dv);
  const int blocks = int(std::min<long>((n + 255) / 256, 16L * sm_count()));
  const int nbh = d.pairs();
  if (decays && vec)
    boundary_fold_kernel<true, true><<<blocks, 256, 0, stream>>>(scratch, fin, lambda, init0, excl, nbh, sc, reverse);
  else if (decays)
    boundary_fold_kernel<false, true><<<blocks, 256, 0, stream>>>(scratch, fin, lambda, init0, excl, nbh, sc, reverse);
  else if (vec)
    boundary_fold_kernel<true><<<blocks, 256, 0, stream>>>(scratch, fin, lambda, init0, excl, nbh, sc, reverse);
  else
    boundary_fold_kernel<false><<<blocks, 256, 0, stream>>>(scratch, fin, lambda, init0, excl, nbh, sc, reverse);
  SPB_CUDA_LAUNCH();
}
// Stage 1 by plan pl: fin where S == 1, else the partials and decays in scratch. g / lambda only where pl.raw.
void launch_stage1(const Dims& d, const Plan& pl, bool reverse, const bf16* x, const bf16* y, const float* gc,
                   const bf16* g, float* fin, float* lambda, float* scratch, cudaStream_t stream) {
  BoundaryParams p = params_of(d, pl, x, y, gc, g);
  p.lambda = lambda;
  p.out = pl.S == 1 ? fin : scratch;
  p.tau = pl.S == 1 ? nullptr : scratch;  // (tau_at places the decays)
  if (reverse) launch_r<true>(p, pl, stream);
  else launch_r<false>(p, pl, stream);
}

}  // namespace boundary_detail

namespace {
// Stage 1, then (S > 1) the fold.
void launch_plan(const Dims& d, const Plan& pl, bool reverse, const bf16* x, const bf16* y, const float* gc,
                 const bf16* g, float* fin, float* lambda, float* scratch, cudaStream_t stream) {
  launch_stage1(d, pl, reverse, x, y, gc, g, fin, lambda, scratch, stream);
  if (pl.S > 1) launch_fold(d, pl, reverse, scratch, fin, lambda, nullptr, false, stream);
}
}  // namespace

void launch_boundary(const Dims& d, bool reverse, const bf16* x, const bf16* y, const float* gc, float* fin,
                     float* scratch, cudaStream_t stream) {
  launch_plan(d, plan_of(d), reverse, x, y, gc, nullptr, fin, nullptr, scratch, stream);
}

bool boundary_reads_gates(const Dims& d) {
  if (g_boundary_variant != 0) return false;
  const Plan pl = plan_of(d);
  return pl.il && !pl.bulk && pl.ts == 64 && pl.bk == 128 && pl.wm == 4 && pl.bn <= 128;
}

void launch_boundary_gates(const Dims& d, bool reverse, const bf16* x, const bf16* y, const bf16* g, float* fin,
                           float* lambda, float* scratch, cudaStream_t stream) {
  SPB_CHECK(boundary_reads_gates(d), "launch_boundary_gates: this shape / variant reads gc (boundary_reads_gates)");
  Plan pl = plan_of(d);
  pl.raw = true;
  launch_plan(d, pl, reverse, x, y, nullptr, g, fin, reverse ? nullptr : lambda, scratch, stream);
}

}  // namespace gla_cuda
}  // namespace spb
