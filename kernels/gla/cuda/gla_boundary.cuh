// What the files of the boundary reduction and of the chunk states by spans share (internal to kernels/gla/cuda):
//   gla_boundary.cu         the boundary reduction: its design, the plans (variants, spans), the fold (stage 2), the
//                           launchers of gla_cuda_internal.h's boundary functions
//   gla_boundary_kernel.cu  boundary_kernel (stage 1; with STORE the chunk states by spans) and its configurations
//   gla_states_spans.cu     the chunk states by spans (launch_states_spans) and their late initial state
// Here: the kernel's shared-memory layout, its parameters (and the scratch layout of the spans), the late state's
// share (the STORE kernel's and settle_kernel's), the launch plan, and the host functions one file offers the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
namespace boundary_detail {

constexpr int kBThreads = 256;

// Shared memory of one block: NS stages of (x tile, y tile, gc tile rewritten in place as X~, the B_n row).
// RAW: NS stages of (x tile, y tile, bf16 g tile), then two X~ tiles and two B_n rows, alternating by step.
// (+ the STORE kernel's staged pieces where they do not fit in the x tile: StagedStore, gla_boundary_kernel.cu)
constexpr size_t layout_stage(int BK, int BN, int TS, bool RAW = false) {
  return RAW ? size_t(TS) * BK * 2 + size_t(TS) * (BN + 8) * 2 + size_t(TS) * BK * 2
             : size_t(TS) * BK * 2 + size_t(TS) * (BN + 8) * 2 + size_t(TS) * (BK + 4) * 4 + size_t(BK) * 4;
}
constexpr size_t layout_extra(int BK, int TS, bool RAW) {
  return RAW ? 2 * (size_t(TS) * (BK + 4) * 4 + size_t(BK) * 4) : 0;
}
// Blocks per SM a layout is sized for: 2 (<= 128 registers, <= 110 KB) where a warp holds <= 32 accumulators and
// three stages fit in 110 KB, else 1.
constexpr int layout_bps(int BK, int BN, int WM, int TS) {
  return (BK / WM / 16) * (BN / (8 / WM) / 8) <= 8 && 3 * layout_stage(BK, BN, TS) <= size_t(110) * 1024 ? 2 : 1;
}

template <int BK, int BN, int WM, int TS, bool RAW = false>
struct BoundaryLayout {
  static constexpr int WN = 8 / WM;        // warps: WM along dk, WN along dv
  static constexpr int MT = BK / WM / 16;  // m16 tiles per warp
  static constexpr int NT8 = BN / WN / 8;  // n8 tiles per warp
  static constexpr int BPS = layout_bps(BK, BN, WM, TS);
  static constexpr int XS = BK;       // bf16 stride of the raw x tile
  static constexpr int GS = BK + 4;   // fp32 stride of gc / X~ (in place): A-fragment float2 loads conflict-free
  static constexpr int YS = BN + 8;   // bf16 stride of y: ldmatrix rows 16 B apart modulo 128 B, conflict-free
  static constexpr size_t x_bytes = size_t(TS) * XS * 2, y_bytes = size_t(TS) * YS * 2;
  // RAW: the stage's g tile is bf16 [TS][BK] (16-byte chunks swizzled, raw_at); X~ [TS][GS] and B_n [BK] live
  // outside the stages, two of each (step parity).
  static constexpr size_t g_bytes = RAW ? size_t(TS) * BK * 2 : size_t(TS) * GS * 4, b_bytes = RAW ? 0 : size_t(BK) * 4;
  static constexpr size_t xt_bytes = size_t(TS) * GS * 4, extra = layout_extra(BK, TS, RAW);
  static constexpr size_t stage = x_bytes + y_bytes + g_bytes + b_bytes;
  static constexpr size_t budget = BPS == 1 ? size_t(220) * 1024 : size_t(110) * 1024;
  static constexpr int NS = int((budget - extra) / stage) < 6 ? int((budget - extra) / stage) : 6;
  static constexpr size_t total = NS * stage + extra;  // (+ NS mbarriers with BULK)
  static_assert(stage == layout_stage(BK, BN, TS, RAW), "layout");
  static_assert(NS >= 3, "the pipeline needs 3 stages");
  static_assert((WM == 2 || WM == 4) && MT >= 1 && NT8 >= 2 && NT8 % 2 == 0, "warp grid");
  static_assert(x_bytes % 16 == 0 && y_bytes % 16 == 0 && g_bytes % 16 == 0 && b_bytes % 16 == 0, "layout");
};

struct BoundaryParams {
  const bf16* x;
  const bf16* y;
  const float* gc;  // RAW: unused
  const bf16* g;    // RAW: the raw gates (each chunk scanned in the kernel); else unused
  float* lambda;    // RAW forward, nullable: sum of g over all tokens [B*H, dk] (S == 1: written here, else by the fold)
  float* out;  // S == 1: fin [B*H, dk, dv]; S > 1: scratch, the partial states (part_at)
  float* tau;  // S > 1: scratch, the spans' log-decays (tau_at)
  int B, T, H, dk, dv, NT;
  int span, S;  // chunks per span, spans per (b, h)
  float scale;
  bool vx, vy, vg;  // 16-byte loads allowed for x, y, and gc (RAW: g)
  // STORE (launch_states_spans): each span starts from init (S > 1: scratch at part_at; S == 1: h0 / dht [B*H, dk,
  // dv]; nullable: zero) and stores the state at the start of every chunk to hs [B*H, NT, dk, dv] (bf16, rounded to
  // nearest even from the fp32 accumulators); out = fin where S == 1 (nullable), unused otherwise.
  const float* init = nullptr;
  bf16* hs = nullptr;
  int bh0 = 0, nbh = 0;  // the grid's pairs: bh0 + blockIdx.z, blockIdx.z < nbh (GlaShape::pair_range)
  // The scratch of S spans: span s holds the partial states of all B*H pairs [B*H, dk, dv], then their log-decays
  // [B*H, dk]. A pair's entries stay where they are whatever the launch's pair range and span count, so launches on
  // disjoint ranges keep each other's partials. Span 0's partial states are laid out as a state [B*H, dk, dv].
  // After them, [S][B*H, dk]: the fold's (excl) log-decay from the rank's edge to each span's edge (the sum of the
  // spans' tau before it, after it in the backward), for a late initial state.
  __host__ __device__ long span_stride() const { return long(B) * H * (long(dk) * dv + dk); }
  __host__ __device__ long part_at(int s, long bh) const { return s * span_stride() + bh * dk * dv; }
  __host__ __device__ long tau_at(int s, long bh) const { return s * span_stride() + long(B) * H * dk * dv + bh * dk; }
  __host__ __device__ long excl_at(int s, long bh) const { return S * span_stride() + (long(s) * B * H + bh) * dk; }
};

// The STORE kernel's late initial state (LATE; launch_states_spans' `late`), in a parameter type of the LATE kernels
// alone: fields added to BoundaryParams change the registers ptxas gives every boundary kernel (with them there, the
// plain STORE kernel measured 3-8 % slower). init is then the zero-start state, and the block adds late's share, diag(exp(decay since
// the rank's edge)) late, once it sees *ready reach epoch at the start of a chunk, also to the states it stored
// before, and writes pending[block] = 0; a block that never sees it writes 1 and leaves its states to
// launch_states_settle. The decay to the span's edge is excl_at's (S > 1).
struct LateParams : BoundaryParams {
  const float* late = nullptr;  // [B*H, dk, dv]
  const uint32_t* ready = nullptr;
  uint32_t epoch = 0;
  int* pending = nullptr;  // [B*H][S][tiles]
};
template <bool LATE>
using KernelParams = std::conditional_t<LATE, LateParams, BoundaryParams>;

// The late state's share in the states a block of the STORE kernel stored before it saw the state: for the first `w`
// chunks of the walk of span sp (walk order), the tile (rows i0 .. i0+BK, columns j0 .. j0+BN) of each state
// += diag(exp run) late, by all kBThreads threads of the block (read-modify-writes of four elements, four + four loads
// in flight per thread, where the tile is whole and aligned; hs is bf16: read, added in fp32, rounded back). run
// (shared, [BK]): set here to the log-decay from the rank's edge to the span's edge (excl_at; 0 with one span), grown
// by each chunk's B_n as the walk's decay grows, so on return it is the decay to the state the walk stores next. Used in the walk (the STORE kernel, LATE) and after it
// (settle_kernel, for blocks that never saw the state).
template <bool REV>
__device__ __forceinline__ void add_late_share(const LateParams& p, float* run, int sp, int bh, int i0, int j0, int BK,
                                               int BN, int w) {
  constexpr int NTH = kBThreads;  // (settle_kernel's blocks too)
  const int tid = threadIdx.x, b = bh / p.H, h = bh % p.H;
  const long xrow = long(p.H) * p.dk, xbase = (long(b) * p.T * p.H + h) * p.dk;
  const int c0 = sp * p.span, c1 = min(p.NT, c0 + p.span);
  const float* excl = p.S > 1 ? p.tau + p.excl_at(sp, bh) : nullptr;
  for (int r = tid; r < BK; r += NTH) run[r] = excl && i0 + r < p.dk ? excl[i0 + r] : 0.f;
  __syncthreads();
  const float* Lt = p.late + (long(bh) * p.dk + i0) * p.dv + j0;
  const bool vec = p.dk - i0 >= BK && p.dv - j0 >= BN && p.dv % 4 == 0 && BK * BN % (16 * NTH) == 0 &&
                   (reinterpret_cast<uintptr_t>(p.late) & 15) == 0 && (reinterpret_cast<uintptr_t>(p.hs) & 7) == 0;
  const int Q = BN / 4, per = BK * Q / NTH;  // quads per row; per thread and chunk
  for (int k = 0; k < w; ++k) {
    const int n = REV ? c1 - 1 - k : c0 + k;
    bf16* H = p.hs + ((long(bh) * p.NT + n) * p.dk + i0) * p.dv + j0;
    if (vec) {
      for (int b4 = 0; b4 < per; b4 += 4) {
        float4 hv[4], lv[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int idx = tid + (b4 + u) * NTH, r = idx / Q, c = (idx % Q) * 4;
          hv[u] = ld_f4(H + long(r) * p.dv + c);
          lv[u] = ld_cg(reinterpret_cast<const float4*>(Lt + long(r) * p.dv + c));
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int idx = tid + (b4 + u) * NTH, r = idx / Q, c = (idx % Q) * 4;
          const float e = __expf(run[r]);
          st_f4(H + long(r) * p.dv + c, make_float4(hv[u].x + e * lv[u].x, hv[u].y + e * lv[u].y,
                                                    hv[u].z + e * lv[u].z, hv[u].w + e * lv[u].w));
        }
      }
    } else {  // edge tiles, odd sizes
      for (int idx = tid; idx < BK * BN; idx += NTH) {
        const int r = idx / BN, c = idx % BN;
        if (i0 + r < p.dk && j0 + c < p.dv) {
          bf16* h = H + long(r) * p.dv + c;
          st_f1(h, ld_f1(h) + __expf(run[r]) * ld_cg(Lt + long(r) * p.dv + c));
        }
      }
    }
    __syncthreads();  // everyone is done with run before it grows
    const long tl = min(n * kC + kC - 1, p.T - 1);  // the chunk's last token: B_n = gc there
    for (int r = tid; r < BK; r += NTH)
      if (i0 + r < p.dk) run[r] += p.gc[xbase + tl * xrow + i0 + r];
    __syncthreads();
  }
}

// The launch plan: kernel configuration (tile, warp grid, step, interleaving), chunks per span, spans per (b, h).
struct Plan {
  int bk, bn, wm, ts;
  bool il, bulk;
  int span, S;
  bool raw = false;  // reads g, not gc (launch_boundary_gates)
};

// --- what the files offer each other ----------------------------------------------------------------------------
// gla_boundary.cu: the plans (the reduction's, and the chunk states'), a launch's parameters, the fold of the spans'
// partials (stage 2, and the chunk states' initial states), stage 1 by a plan.
Plan plan_of(const Dims& d);
Plan states_plan_of(const Dims& d);
BoundaryParams params_of(const Dims& d, const Plan& pl, const bf16* x, const bf16* y, const float* gc, const bf16* g);
void launch_fold(const Dims& d, const Plan& pl, bool reverse, float* scratch, float* fin, float* lambda,
                 const float* init0, bool excl, cudaStream_t stream, bool decays = false);
void launch_stage1(const Dims& d, const Plan& pl, bool reverse, const bf16* x, const bf16* y, const float* gc,
                   const bf16* g, float* fin, float* lambda, float* scratch, cudaStream_t stream);

// gla_boundary_kernel.cu: boundary_kernel in the configuration c (the reduction: any plan_of makes; STORE: any
// states_plan_of makes).
template <bool REV>
void launch_r(const BoundaryParams& p, const Plan& c, cudaStream_t s);
template <bool REV, bool LATE>
void launch_store(const KernelParams<LATE>& p, const Plan& c, cudaStream_t s);

}  // namespace boundary_detail
}  // namespace gla_cuda
}  // namespace spb
