// boundary_kernel: stage 1 of the boundary reduction (gla_boundary.cu: the design, the variants and their plans) and,
// with STORE, the chunk states by spans (gla_states_spans.cu); its launchers for every configuration the plans make.
//
// - Numerics are the recurrence's: X~ = k * exp(B - b) (forward) or (s * q) * exp(b) (backward) by the same
//   expression as gla_states.cu, rounded to tf32 once (tf32_round); y (v or do) is exact in tf32 (bf16
//   bits); fp32 accumulation on mma.sync m16n8k8 tf32; the chunk decay is applied to the accumulators in fp32 as the
//   recurrence does. Only the order of the fp32 sums differs (and exp(sum B) instead of the product of exp(B) across
//   spans): ~1e-7 relative. The variants (gla_boundary.cu) sum in the same order for the same span (the emulator
//   gives them identical bits); IL's exp is ex2.approx.ftz (__expf without its subnormal fix-up: subnormal results
//   become 0).
// - Pipeline: a step is TS tokens (32: half a chunk; 64: a chunk); a stage holds the x, y and gc tiles plus the gc
//   row of the chunk's last token (B_n); NS = 3-6 stages, steps s+2 .. s+NS-2 in flight during step s. X~ of step
//   s+1 is built IN PLACE of its gc tile (each thread rewrites only the elements it read) while step s is
//   multiplied, so one barrier per step. X~ stays [token][feature] (stride BK + 4 floats): the mma rows are permuted
//   (row g <-> feature 2g, row g+8 <-> feature 2g+1 of each 16-row tile) on top of the k-permutation of
//   gla_cuda_common.cuh, so an A fragment is two conflict-free 8-byte loads. y fragments by ldmatrix.x4.trans.
//   A partial last chunk gives a second half with no tokens: it is loaded as zeros and costs one empty step.
// - Any T >= 1, B, H; any dk, dv (tiles masked; element copies where a tensor is not 16-byte aligned, as
//   gla_states.cu's vx / vy / vg).
#include <cstdlib>
#ifdef SPB_GLA_EMU
#include <cstdio>
#include <cstring>
#include <mutex>
#include <tuple>
#include <vector>
#endif

#include "runtime/cuda_check.h"
#include "kernels/gla/cuda/gla_boundary.cuh"
#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
using namespace boundary_detail;
namespace {

// 1-D bulk copies global -> shared (the TMA, no tensor map) completing on an mbarrier: the copies of a step are
// tracked by one transaction count instead of 16-byte requests per thread.
#ifndef SPB_GLA_EMU
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "RETRY:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra RETRY;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
// Orders this thread's generic-proxy writes to shared memory before later bulk copies (async proxy) into or out of it.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void sync_warp() { __syncwarp(); }
// 1-D bulk copies shared -> global (STAGED), tracked per issuing thread by bulk async-groups: wait_read returns once
// every copy this thread committed has read its source, so the source may be rewritten (the global writes complete
// by the end of the kernel).
__device__ __forceinline__ void bulk_s2g(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_u32(src)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
#else
// Emulation: a bulk copy lands when a thread waits on its mbarrier (as cp.async lands at its wait_group), so a read
// that runs ahead of its wait sees the old contents.
struct BulkPending {
  std::mutex m;
  std::vector<std::tuple<void*, std::vector<unsigned char>, uint64_t*>> q;
};
inline BulkPending& bulk_pending() {
  static BulkPending b;
  return b;
}
inline void mbar_init(uint64_t*, uint32_t) {}
inline void mbar_init_fence() {}
inline void mbar_arrive_tx(uint64_t*, uint32_t) {}
inline void mbar_arrive(uint64_t*) {}
inline void mbar_wait(uint64_t* bar, uint32_t) {
  BulkPending& b = bulk_pending();
  std::lock_guard<std::mutex> l(b.m);
  decltype(b.q) rest;
  for (auto& c : b.q) {
    if (std::get<2>(c) == bar) std::memcpy(std::get<0>(c), std::get<1>(c).data(), std::get<1>(c).size());
    else rest.push_back(std::move(c));
  }
  b.q.swap(rest);
}
inline void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  BulkPending& b = bulk_pending();
  std::lock_guard<std::mutex> l(b.m);
  const auto* s = static_cast<const unsigned char*>(src);
  b.q.emplace_back(dst, std::vector<unsigned char>(s, s + bytes), bar);
}
inline void fence_proxy_async() {}
inline void sync_warp() { ::emu::ctx().warp->bar.wait(); }  // (a lane may read what another wrote before it)
// Shared -> global: the source is read when the copy is issued and written to global memory at the issuing thread's
// wait_read; a source changed in between (a rewrite before the wait) aborts, so a missing wait or barrier shows.
struct BulkStore {
  void* dst;
  const void* src;
  std::vector<unsigned char> data;
};
inline std::vector<BulkStore>& bulk_stores() {
  thread_local std::vector<BulkStore> q;  // per issuing thread, as the bulk async-groups (each emulated thread is new)
  return q;
}
inline void bulk_s2g(void* dst, const void* src, uint32_t bytes) {
  const auto* s = static_cast<const unsigned char*>(src);
  bulk_stores().push_back({dst, src, std::vector<unsigned char>(s, s + bytes)});
}
inline void bulk_commit() {}
inline void bulk_wait_read() {
  for (const BulkStore& c : bulk_stores()) {
    if (std::memcmp(c.src, c.data.data(), c.data.size()) != 0) {
      std::fprintf(stderr, "emu: the source of a bulk store changed before its wait_group.read\n");
      std::abort();
    }
    std::memcpy(c.dst, c.data.data(), c.data.size());
  }
  bulk_stores().clear();
}
#endif

// RAW: element (r, c) of a bf16 [rows][BK] tile whose 16-byte chunks are swizzled, chunk c / 8 of row r stored at
// chunk (c / 8) ^ (2 (r / 8) % 8): the raw build's half-warps read rows 8 apart (4 row groups x 2 chunks), which would
// otherwise all hit the same banks.
template <int BK>
__device__ __forceinline__ int raw_at(int r, int c) {
  return r * BK + ((((c >> 3) ^ (r >> 2)) & 6) | ((c >> 3) & ~6)) * 8 + (c & 7);
}
// Loads a bf16 tile into that layout; rows >= rmax and columns >= cmax become zeros (as load_tile).
template <int R, int BK, int NTH>
__device__ __noinline__ void load_raw_edge(bf16* s, const bf16* g, long gstride, int rmax, int cmax, bool vec) {
  for (int idx = threadIdx.x; idx < R * (BK / 8); idx += NTH) {
    const int r = idx / (BK / 8), c = (idx % (BK / 8)) * 8;
    bf16* d = s + raw_at<BK>(r, c);
    if (r < rmax && vec && c + 8 <= cmax) {
      cp_async16(d, g + r * gstride + c);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) d[e] = (r < rmax && c + e < cmax) ? g[r * gstride + c + e] : zero_of<bf16>();
    }
  }
}
template <int R, int BK, int NTH>
__device__ __forceinline__ void load_raw(bf16* s, const bf16* g, long gstride, int rmax, int cmax, bool vec) {
  static_assert((R * BK / 8) % NTH == 0 && BK % 64 == 0, "load_raw");
  if (vec && rmax >= R && cmax >= BK) {
#pragma unroll
    for (int i = 0; i < R * BK / 8 / NTH; ++i) {
      const int idx = threadIdx.x + i * NTH, r = idx / (BK / 8), c = (idx % (BK / 8)) * 8;
      cp_async16(s + raw_at<BK>(r, c), g + r * gstride + c);
    }
  } else {
    load_raw_edge<R, BK, NTH>(s, g, gstride, rmax, cmax, vec);
  }
}

// STAGED: how the STORE kernel stages a chunk's state tile for its bulk stores. Each warp stages its own piece (its
// MT*16 rows x BN/WN columns, bf16) and stores it with one bulk copy per row, issued by lane = row after a __syncwarp:
// no block barrier beyond the step's. Slots: local row mt*16 + 2g + h (rows 2g, 2g + 1 are the features of fragment
// row g) at slot mt*16 + 8h + g, so a store instruction's 8 rows (2g + h, g = 0..7) are 8 consecutive slots; the slot
// stride is an odd multiple of 16 bytes, so they fall on 8 distinct 16-byte bank groups (conflict-free) and every row
// starts 16-byte aligned. The first `in_x` warps stage in the step's raw x tile, which nobody reads during the step
// (X~ of the step was built from it during the step before; the tile is reloaded after the next step's barrier), the
// others in `extra` bytes after the layout: 128 x 128 tiles fit beside their 3 stages only so (36 KiB of pieces
// against 27.5 KiB to spare).
template <int BK, int BN, int WM>
struct StagedStore {
  static constexpr int rows = BK / WM;                 // a warp's rows (MT * 16)
  static constexpr int cols = BN / (8 / WM);           // its columns
  static constexpr int stride = cols + 8;              // bf16 per slot
  static constexpr size_t piece = size_t(rows) * stride * 2;
  static constexpr size_t x_bytes = size_t(64) * BK * 2;  // the raw x tile of a 64-token step (BoundaryLayout::x_bytes)
  static constexpr int in_x = int(x_bytes / piece) < 8 ? int(x_bytes / piece) : 8;
  static constexpr size_t extra = (8 - in_x) * piece;
  static constexpr bool valid = (cols * 2) % 16 == 0 && (stride * 2 / 16) % 2 == 1 && rows <= 32;
};

// BK x BN: the state tile; WM: warps along dk; TS: tokens per pipeline step (32: half a chunk, 64: a chunk); IL: X~ of
// step s+1 is built inside the products of step s (a part per 8-token k-step, stored after the products), with
// exp_ftz; else (variants 1-4) before them with __expf. BULK (with IL): whole-tile steps are loaded by
// 1-D bulk copies (one per row, issued by warp 0) completing on the stage's mbarrier; partial tiles by cp.async.
// RAW (with IL, TS = 64, BK = 128): the kernel reads the raw gates g (bf16) instead of gc (fp32) and scans each chunk
// itself (raw_prefix .. raw_store below): 25 % fewer bytes, and the caller need not run chunk_cumsum first.
// STORE (with IL, TS = 64, neither RAW nor BULK): the chunk states themselves, span by span (launch_states_spans):
// the span starts from its true initial state and stores the accumulators at the first step of every chunk; with a
// late initial state (LATE: p.late), from its zero-start one, adding late's share when it arrives (BoundaryParams).
// LATE is a template parameter so that the kernel without it carries no late code: the late branches, dead at run
// time, cost the plain kernel 3-8 % as a run-time test.
// STAGED (STORE without LATE, whole tiles, hs 16-byte aligned: launch_store): the chunk's state tile goes to hs
// through shared memory (StagedStore) and 1-D bulk copies instead of 4-byte global stores from the fragments: as
// many 4-byte shared stores (conflict-free) and one bulk copy per lane, and the copies run beside the chunk's
// products (each issuing lane waits for their reads before the next step's barrier). LATE stays on the fragment
// stores: add_late_share reads hs back in global memory.
template <bool REV, int BK, int BN, int WM, int TS, bool IL, bool BULK, bool RAW = false, bool STORE = false,
          bool LATE = false, bool STAGED = false>
__global__ void __launch_bounds__(kBThreads, layout_bps(BK, BN, WM, TS))
    boundary_kernel(const KernelParams<LATE> p) {
  using L = BoundaryLayout<BK, BN, WM, TS, RAW>;
  using SS = StagedStore<BK, BN, WM>;
  static_assert(!STAGED || (STORE && !LATE), "STAGED: the STORE kernel without a late state");
  static_assert(!STAGED || (SS::valid && SS::x_bytes == L::x_bytes), "STAGED: rows of 16-byte chunks, one per lane");
  static_assert(!RAW || (IL && !BULK && TS == 64 && BK == 128), "RAW: the 64-token IL kernel at 128 rows");
  static_assert(!STORE || (IL && !BULK && !RAW && TS == 64), "STORE: the 64-token IL kernel reading gc");
  static_assert(!LATE || STORE, "LATE: a late initial state of the STORE kernel");
  constexpr int NS = L::NS, MT = L::MT, NT8 = L::NT8, WN = L::WN;
  constexpr int SPC = kC / TS, SPC_LOG = SPC == 2 ? 1 : 0;  // steps per chunk (s >= 0: shifts, not divisions)
  static_assert((TS == 32 || TS == 64) && kC == 64, "step");
  extern __shared__ __align__(16) unsigned char smem[];

  const int ntn = (p.dv + BN - 1) / BN;
  const int tile = blockIdx.x, sp = blockIdx.y, bh = p.bh0 + blockIdx.z;
  const int i0 = (tile / ntn) * BK, j0 = (tile % ntn) * BN;
  const int b = bh / p.H, h = bh % p.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  // this warp's piece: rows wm*BK/WM, columns wn*BN/WN (shifts: warp % WM costs instructions and registers)
  const int wm = warp & (WM - 1), wn = warp >> (WM == 4 ? 2 : 1);
  const long xrow = long(p.H) * p.dk, yrow = long(p.H) * p.dv;
  const long xbase = (long(b) * p.T * p.H + h) * p.dk;  // token 0 of (b, h)
  const long ybase = (long(b) * p.T * p.H + h) * p.dv;
  const int c0 = sp * p.span, c1 = min(p.NT, c0 + p.span);  // this span's chunks [c0, c1)
  const int nsteps = SPC * (c1 - c0);

  auto X_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * L::stage); };
  auto Y_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * L::stage + L::x_bytes); };
  auto G_of = [&](int st) { return reinterpret_cast<float*>(smem + st * L::stage + L::x_bytes + L::y_bytes); };
  auto B_of = [&](int st) {
    return reinterpret_cast<float*>(smem + st * L::stage + L::x_bytes + L::y_bytes + L::g_bytes);
  };
  // RAW: the raw g tile of a stage; X~ and B_n of step s (parity s & 1), after the stages
  auto R_of = [&](int st) { return reinterpret_cast<bf16*>(smem + st * L::stage + L::x_bytes + L::y_bytes); };
  auto XT_of = [&](int s) { return reinterpret_cast<float*>(smem + NS * L::stage + (s & 1) * L::xt_bytes); };
  auto BR_of = [&](int s) {
    return reinterpret_cast<float*>(smem + NS * L::stage + 2 * L::xt_bytes) + (s & 1) * BK;
  };
  // Step s = part (s % SPC) of chunk chunk_of(s); the chunks of the span in the recurrence's order.
  auto chunk_of = [&](int s) { return REV ? c1 - 1 - (s >> SPC_LOG) : c0 + (s >> SPC_LOG); };
  auto bar_of = [&](int st) { return reinterpret_cast<uint64_t*>(smem + NS * L::stage) + st; };
  auto load_step = [&](int s) {
    const int n = chunk_of(s), t0 = n * kC + (s & (SPC - 1)) * TS, st = s % NS;
    const int len = min(TS, p.T - t0);         // <= 0: the empty second half of a short last chunk (zeros)
    const int tl = min(kC, p.T - n * kC) - 1;  // the chunk's last token: B_n = gc there
    const long tx = min(t0, p.T - 1);          // (a valid row address even for an empty half)
    static_assert(!BULK || (IL && TS == 32), "bulk copies: one row per lane of warp 0");
    if constexpr (BULK) {
      if (len == TS && p.dk - i0 >= BK && p.dv - j0 >= BN && p.vx && p.vy && p.vg) {  // (uniform in the block)
        if (warp == 0) {
          uint64_t* bar = bar_of(st);
          if (lane == 0) mbar_arrive_tx(bar, uint32_t(TS * BK * 2 + TS * BN * 2 + TS * BK * 4 + BK * 4));
          sync_warp();  // the expected bytes first (a negative transaction count would be legal too)
          const long tr = t0 + lane;  // lane = row (TS == 32)
          bulk_g2s(X_of(st) + lane * L::XS, p.x + xbase + tr * xrow + i0, BK * 2, bar);
          bulk_g2s(Y_of(st) + lane * L::YS, p.y + ybase + tr * yrow + j0, BN * 2, bar);
          bulk_g2s(G_of(st) + lane * L::GS, p.gc + xbase + tr * xrow + i0, BK * 4, bar);
          if (lane == 0) bulk_g2s(B_of(st), p.gc + xbase + long(n * kC + tl) * xrow + i0, BK * 4, bar);
        }
        return;
      }
      if (tid == 0) mbar_arrive(bar_of(st));  // a partial tile: cp.async below, covered by cp_async_wait
    }
    if constexpr (RAW) {  // x and g swizzled (raw_at), no B_n row: the build computes it (raw_carry)
      load_raw<TS, BK, kBThreads>(X_of(st), p.x + xbase + tx * xrow + i0, xrow, len, p.dk - i0, p.vx);
      load_tile<bf16, TS, BN, kBThreads>(Y_of(st), L::YS, p.y + ybase + tx * yrow + j0, yrow, len, p.dv - j0, p.vy);
      load_raw<TS, BK, kBThreads>(R_of(st), p.g + xbase + tx * xrow + i0, xrow, len, p.dk - i0, p.vg);
      return;
    }
    load_tile<bf16, TS, BK, kBThreads>(X_of(st), L::XS, p.x + xbase + tx * xrow + i0, xrow, len, p.dk - i0, p.vx);
    load_tile<bf16, TS, BN, kBThreads>(Y_of(st), L::YS, p.y + ybase + tx * yrow + j0, yrow, len, p.dv - j0, p.vy);
    load_tile<float, TS, BK, kBThreads>(G_of(st), L::GS, p.gc + xbase + tx * xrow + i0, xrow, len, p.dk - i0, p.vg);
    load_tile<float, 1, BK, kBThreads>(B_of(st), BK, p.gc + xbase + long(n * kC + tl) * xrow + i0, xrow, 1,
                                       p.dk - i0, p.vg);
  };
  // X~ of step s, tf32-rounded, zero beyond the sequence, written over the gc tile it was computed from: thread =
  // (4 features, rows xr, xr + RSTEP, ...); each element is read and rewritten by the same thread.
  constexpr int GPR = BK / 4;              // float4 groups per row
  constexpr int RSTEP = kBThreads / GPR;   // rows per pass
  constexpr int XI = TS / RSTEP;           // passes (4 elements each) per thread and step
  static_assert(kBThreads % GPR == 0 && TS % RSTEP == 0, "make_xt");
  const int xf = (tid % GPR) * 4, xr = tid / GPR;
  auto x_value = [&](float4 Bf, float4 gv, uint2 xw) {
    const float x0 = bf_lo(xw.x), x1 = bf_hi(xw.x), x2 = bf_lo(xw.y), x3 = bf_hi(xw.y);
    if (REV) {  // (s q) exp(b), the expression of gla_states.cu
      if (IL)
        return make_float4(p.scale * x0 * exp_ftz(gv.x), p.scale * x1 * exp_ftz(gv.y), p.scale * x2 * exp_ftz(gv.z),
                           p.scale * x3 * exp_ftz(gv.w));
      return make_float4(p.scale * x0 * __expf(gv.x), p.scale * x1 * __expf(gv.y), p.scale * x2 * __expf(gv.z),
                         p.scale * x3 * __expf(gv.w));
    }
    // k exp(B - b)
    if (IL)
      return make_float4(x0 * exp_ftz(Bf.x - gv.x), x1 * exp_ftz(Bf.y - gv.y), x2 * exp_ftz(Bf.z - gv.z),
                         x3 * exp_ftz(Bf.w - gv.w));
    return make_float4(x0 * __expf(Bf.x - gv.x), x1 * __expf(Bf.y - gv.y), x2 * __expf(Bf.z - gv.z),
                       x3 * __expf(Bf.w - gv.w));
  };
  auto x_round = [&](float4 e, bool in) {
    return in ? make_float4(tf32_round(e.x), tf32_round(e.y), tf32_round(e.z), tf32_round(e.w))
              : make_float4(0.f, 0.f, 0.f, 0.f);
  };
  // Step s's length in tokens (<= 0: an empty half; also for s == nsteps, where IL builds a dummy step of zeros).
  auto len_of = [&](int s) {
    return s < nsteps ? min(TS, p.T - (chunk_of(s) * kC + (s & (SPC - 1)) * TS)) : 0;
  };
  auto make_xt = [&](int s) {  // the whole step at once (plain; IL: the first step, and every step where !kUnroll)
    const int len = IL ? len_of(s) : min(TS, p.T - (chunk_of(s) * kC + (s & (SPC - 1)) * TS)), st = s % NS;
    const bf16* X = X_of(st);
    float* G = G_of(st);
    const float4 Bf = *reinterpret_cast<const float4*>(B_of(st) + xf);
#pragma unroll
    for (int i = 0; i < XI; ++i) {
      const int r = xr + i * RSTEP;
      float4* gp = reinterpret_cast<float4*>(G + r * L::GS + xf);
      *gp = x_round(x_value(Bf, *gp, *reinterpret_cast<const uint2*>(X + r * L::XS + xf)), r < len);
    }
  };

  // RAW build: thread = (4 features rxf, the 8 consecutive rows 8 rg .. 8 rg + 7), lane = 4 rg + (feature group
  // % 4), so the 8 row groups of a feature group are 8 lanes of one warp, 4 apart: the chunk's scan is 8 sums in
  // registers and 3 shuffle steps. Its sums run in another order than chunk_cumsum's (gc may differ in the last bit;
  // B_n is the group total). (rg = lane % 8 put the 8 rows of one feature group in one quarter-warp: the X~ stores
  // then measured 29 wavefronts per request instead of 4, and the kernel 123 us against 94 from gc at T = 16K.)
  constexpr int RR = TS / 8;  // rows per thread
  const int rg = lane >> 2, rxf = (warp * 4 + (lane & 3)) * 4;
  auto raw_load = [&](int s, uint2(&gw)[RR], uint2(&xw)[RR]) {
    const bf16* G = R_of(s % NS);
    const bf16* X = X_of(s % NS);
#pragma unroll
    for (int i = 0; i < RR; ++i) {
      const int at = raw_at<BK>(rg * RR + i, rxf);
      gw[i] = *reinterpret_cast<const uint2*>(G + at);
      xw[i] = *reinterpret_cast<const uint2*>(X + at);
    }
  };
  auto shfl4 = [&](float4 v, int src) {
    return make_float4(__shfl_sync(0xffffffffu, v.x, src), __shfl_sync(0xffffffffu, v.y, src),
                       __shfl_sync(0xffffffffu, v.z, src), __shfl_sync(0xffffffffu, v.w, src));
  };
  // The chunk's scan in parts, so that the IL loop can spread its dependent chain over the k-steps (one part per
  // k-step, each consuming what the previous one produced). Measured with lane = rg + 8 x feature group: the same time
  // as the whole scan in one k-step (the stores were what cost); it costs nothing. Branch-free: selects, and + 0 where
  // a lane has nothing to add (exact).
  // raw_prefix: gv = the in-thread inclusive sums of its 8 rows; inc = their total.
  auto raw_prefix = [&](const uint2(&gw)[RR], float4(&gv)[RR], float4& inc) {
    float4 run = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < RR; ++i) {
      run.x += bf_lo(gw[i].x), run.y += bf_hi(gw[i].x), run.z += bf_lo(gw[i].y), run.w += bf_hi(gw[i].y);
      gv[i] = run;
    }
    inc = run;
  };
  // one step (d = 1, 2, 4) of the inclusive scan of the totals over the 8 lanes of the group
  auto raw_round = [&](float4& inc, int d) {
    const float4 o = shfl4(inc, lane - 4 * d);
    const bool take = rg >= d;
    inc.x += take ? o.x : 0.f, inc.y += take ? o.y : 0.f, inc.z += take ? o.z : 0.f, inc.w += take ? o.w : 0.f;
  };
  // ex = the total of the lanes before this one; B = the chunk's total (the same in the 8 lanes of the group)
  auto raw_carry = [&](const float4& inc, float4& ex, float4& B) {
    const float4 e = shfl4(inc, lane - 4);
    const bool take = rg > 0;
    ex = make_float4(take ? e.x : 0.f, take ? e.y : 0.f, take ? e.z : 0.f, take ? e.w : 0.f);
    B = shfl4(inc, lane | 28);
  };
  auto raw_add = [&](float4& gv, const float4& ex) { gv.x += ex.x, gv.y += ex.y, gv.z += ex.z, gv.w += ex.w; };
  // the whole scan at once (the first step): gv = gc of this thread's rows, returns B_n
  auto raw_scan = [&](const uint2(&gw)[RR], float4(&gv)[RR]) {
    float4 inc, ex, B;
    raw_prefix(gw, gv, inc);
#pragma unroll
    for (int d = 1; d < 8; d <<= 1) raw_round(inc, d);
    raw_carry(inc, ex, B);
#pragma unroll
    for (int i = 0; i < RR; ++i) raw_add(gv[i], ex);
    return B;
  };
  // X~ of step s (zero beyond the sequence) and its B_n row. A quarter-warp stores for row groups 2p and 2p + 1;
  // the odd one stores its rows in the order i ^ 4 (16 banks further on), so the 8 lanes hit 32 distinct banks.
  auto raw_store = [&](int s, const float4(&xe)[RR], float4 Bt, int len) {
    float* XT = XT_of(s);
    const bool odd = rg & 1;
#pragma unroll
    for (int i = 0; i < RR; ++i) {
      const int r = rg * RR + (odd ? i ^ 4 : i);
      *reinterpret_cast<float4*>(XT + r * L::GS + rxf) = x_round(odd ? xe[i ^ 4] : xe[i], r < len);
    }
    if (rg == 7) *reinterpret_cast<float4*>(BR_of(s) + rxf) = Bt;
  };

  float acc[MT][NT8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
  float tau = 0.f;  // thread tid < BK: sum of B_n over the span, row i0 + tid
  if constexpr (BULK) {
    if (tid == 0) {
      for (int st = 0; st < NS; ++st) mbar_init(bar_of(st), 1);
      mbar_init_fence();
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < NS - 1; ++i) {
    if (i < nsteps) load_step(i);
    cp_async_commit();
  }
  if constexpr (LATE) {  // a late state in before the walk: the first state takes it (slot 1, read after the barrier)
    if (tid == 0)
      reinterpret_cast<uint32_t*>(smem + L::total)[1] = epoch_seen(ld_acquire_gpu(p.ready), p.epoch);
  }
  cp_async_wait<NS - 2>();  // step 0 has landed
  if constexpr (BULK) mbar_wait(bar_of(0), 0);
  __syncthreads();
  if constexpr (RAW) {
    uint2 gw[RR], xw[RR];
    float4 gv[RR], xe[RR];
    raw_load(0, gw, xw);
    const float4 Bt = raw_scan(gw, gv);
#pragma unroll
    for (int i = 0; i < RR; ++i) xe[i] = x_value(Bt, gv[i], xw[i]);
    raw_store(0, xe, Bt, len_of(0));
  } else {
    make_xt(0);
  }
  if constexpr (BULK) fence_proxy_async();  // X~ (generic writes) before later bulk copies into the stage

  // ldmatrix.x4.trans of y per 16 tokens and n-tile pair (2np, 2np+1): lane L addresses row L%8 of matrix L/8;
  // matrices (k-step 2kq, n-tile 2np), (2kq+1, 2np), (2kq, 2np+1), (2kq+1, 2np+1).
  const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int lcol = wn * (BN / WN) + (lane >> 4) * 8;
  const int frow = wm * (BK / WM) + 2 * g;  // feature of accumulator row g of m-tile 0 (row g+8: frow + 1)
  // The accumulator fragment (mt, nt): rows i0 + frow + mt * 16 and the next, columns col_of(nt) and the next.
  auto col_of = [&](int nt) { return j0 + wn * (BN / WN) + nt * 8 + 2 * t; };
  auto store_acc = [&](auto* dst) {  // hs (bf16: rounded to nearest even), fin or the partial states (fp32)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int ra = i0 + frow + mt * 16, rb = ra + 1;
#pragma unroll
      for (int nt = 0; nt < NT8; ++nt) {
        const int c = col_of(nt);
        if (ra < p.dk) store2(dst + long(ra) * p.dv + c, c, p.dv, acc[mt][nt][0], acc[mt][nt][1]);
        if (rb < p.dk) store2(dst + long(rb) * p.dv + c, c, p.dv, acc[mt][nt][2], acc[mt][nt][3]);
      }
    }
  };
  // STAGED: the chunk's state at hs_n, this warp's piece staged at its slots (StagedStore) and stored row by row.
  auto store_staged = [&](bf16* hs_n, int st) {
    bf16* piece = warp < SS::in_x ? X_of(st) + warp * (SS::piece / 2)
                                  : reinterpret_cast<bf16*>(smem + L::total) + (warp - SS::in_x) * (SS::piece / 2);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        bf16* slot = piece + (mt * 16 + 8 * h + g) * SS::stride + 2 * t;
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt) st_f2(slot + nt * 8, acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
      }
    fence_proxy_async();  // this thread's slots before the bulk copies (async proxy) read them
    sync_warp();          // every lane's slots written
    if (lane < SS::rows) {
      const int at = (lane >> 4) * 16 + 8 * (lane & 1) + ((lane >> 1) & 7);  // the slot of local row `lane`
      bulk_s2g(hs_n + long(i0 + wm * SS::rows + lane) * p.dv + j0 + wn * SS::cols, piece + at * SS::stride,
               SS::cols * 2);
      bulk_commit();
    }
  };
  // STORE with p.late: whether late was added (uniform in the block); *ready seen at the top of step s (thread 0
  // writes slot s & 1 before the step's barrier, everyone reads it after: the slot is rewritten two barriers later).
  bool applied = !LATE;
  uint32_t* late_seen = reinterpret_cast<uint32_t*>(smem + L::total);
  if constexpr (STORE && !LATE) {  // the span's initial state (elements outside the state stay 0)
    if (p.init) {
      const float* src = p.init + p.part_at(sp, bh);  // (S == 1: bh's state)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = i0 + frow + mt * 16 + (e >> 1), c = col_of(nt) + (e & 1);
            if (r < p.dk && c < p.dv) acc[mt][nt][e] = src[long(r) * p.dv + c];
          }
    }
  }
  if constexpr (LATE) {  // the same, with late's share if it is in already
    const bool pre = late_seen[1];
    if (p.init || pre) {
      const float* src = p.init ? p.init + p.part_at(sp, bh) : nullptr;  // (S == 1: bh's state)
      const float* excl = pre && p.S > 1 ? p.tau + p.excl_at(sp, bh) : nullptr;
      const float* Lp = pre ? p.late + long(bh) * p.dk * p.dv : nullptr;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = i0 + frow + mt * 16 + h;
          const float f = excl && r < p.dk ? __expf(excl[r]) : 1.f;
#pragma unroll
          for (int nt = 0; nt < NT8; ++nt)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int c = col_of(nt) + j;
              if (r < p.dk && c < p.dv)
                acc[mt][nt][2 * h + j] = (src ? src[long(r) * p.dv + c] : 0.f) +
                                         (Lp ? f * ld_cg(Lp + long(r) * p.dv + c) : 0.f);
            }
        }
    }
    applied = pre;
  }
  // The k-loop is not unrolled where a warp holds 128 accumulators (128 x 256 at WM = 2): 255 registers and a
  // spill otherwise (the plain kernel: not where NT8 == 8). IL then builds X~(s+1) after the products.
  constexpr bool kUnroll = IL ? MT * NT8 < 32 : NT8 != 8;
  static_assert(!RAW || kUnroll, "RAW builds X~ inside the unrolled products");
  constexpr int SUB = TS / 8;  // k-steps per step
  for (int s = 0; s < nsteps; ++s) {
    if constexpr (LATE) {
      if (!applied && tid == 0) late_seen[s & 1] = epoch_seen(ld_acquire_gpu(p.ready), p.epoch);
    }
    cp_async_wait<NS - 3>();  // step s+1 has landed (steps s+2 .. s+NS-2 may still be in flight)
    if constexpr (STAGED) bulk_wait_read();  // step s-1's pieces read: its x tile is reloaded, the extra rewritten
    if constexpr (BULK) {
      if (s + 1 < nsteps) mbar_wait(bar_of((s + 1) % NS), ((s + 1) / NS) & 1);
    }
    __syncthreads();          // ... and is visible; X~(s) is complete; every warp is done with step s-1
    if (s + NS - 1 < nsteps) load_step(s + NS - 1);  // into the stage of step s-1
    cp_async_commit();
    if (!IL && s + 1 < nsteps) make_xt(s + 1);  // plain: before the products (a separate basic block)

    const int st = s % NS;
    if ((s & (SPC - 1)) == 0) {  // the first step of a chunk: acc = diag(exp B_n) acc
      if constexpr (STORE) {  // the state before it
        if constexpr (LATE) {
          if (!applied && late_seen[s & 1]) {
            // Seen at the start of a chunk (uniform in the block): late's share added to the states stored before
            // it (they were stored microseconds ago and sit in L2), then to the accumulators with run, the decay to
            // the state about to be stored.
            float* run = reinterpret_cast<float*>(smem + L::total + 16);  // [BK]
            add_late_share<REV>(p, run, sp, bh, i0, j0, BK, BN, s >> SPC_LOG);
            const int c0c = col_of(0);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              const int ra = i0 + frow + mt * 16, rb = ra + 1;
              const float ea = __expf(run[frow + mt * 16]), eb = __expf(run[frow + mt * 16 + 1]);
              const float* La = opaque(p.late + (long(bh) * p.dk + ra) * p.dv + c0c);
              const float* Lb = La + p.dv;
#pragma unroll
              for (int nt = 0; nt < NT8; ++nt) {
                const int c = c0c + nt * 8;
                if (ra < p.dk && c < p.dv) acc[mt][nt][0] += ea * ld_cg(La + nt * 8);
                if (ra < p.dk && c + 1 < p.dv) acc[mt][nt][1] += ea * ld_cg(La + nt * 8 + 1);
                if (rb < p.dk && c < p.dv) acc[mt][nt][2] += eb * ld_cg(Lb + nt * 8);
                if (rb < p.dk && c + 1 < p.dv) acc[mt][nt][3] += eb * ld_cg(Lb + nt * 8 + 1);
              }
            }
            applied = true;
          }
        }
        if constexpr (STAGED) store_staged(p.hs + (long(bh) * p.NT + chunk_of(s)) * p.dk * p.dv, st);
        else store_acc(p.hs + (long(bh) * p.NT + chunk_of(s)) * p.dk * p.dv);
      }
      const float* Bv = RAW ? BR_of(s) : B_of(st);
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

    // IL: this thread's part of X~(s+1) (stage s+1 has landed): loads now, values between the k-steps, stores after
    // the products. Unconditional (no branch to split the block): past the last step it writes zeros to a stage no
    // one reads.
    const int sn = (s + 1) % NS, lenn = IL ? len_of(s + 1) : 0;
    float* Gn = G_of(sn);
    float4 xgv[IL ? XI : 1], xe[IL ? XI : 1];
    uint2 xxw[IL ? XI : 1];
    float4 xBf = make_float4(0.f, 0.f, 0.f, 0.f);
    uint2 rgw[RAW ? RR : 1], rxw[RAW ? RR : 1];  // RAW: raw gates and x of step s+1
    float4 rgv[RAW ? RR : 1], rxe[RAW ? RR : 1], rB = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 rinc = rB, rex = rB;
    if constexpr (RAW) {
      raw_load(s + 1, rgw, rxw);
    } else if constexpr (IL && kUnroll) {
      if (!REV) xBf = *reinterpret_cast<const float4*>(B_of(sn) + xf);
#pragma unroll
      for (int i = 0; i < XI; ++i) {
        const int r = xr + i * RSTEP;
        xgv[i] = *reinterpret_cast<const float4*>(Gn + r * L::GS + xf);
        xxw[i] = *reinterpret_cast<const uint2*>(X_of(sn) + r * L::XS + xf);
      }
    }

    const float* Xt = (RAW ? XT_of(s) : G_of(st)) + 2 * t * L::GS + frow;
    const bf16* Y = Y_of(st) + lrow * L::YS + lcol;
#pragma unroll(kUnroll ? TS / 16 : 1)
    for (int kq = 0; kq < TS / 16; ++kq) {
      uint32_t yb[NT8 / 2][4];
#pragma unroll
      for (int np = 0; np < NT8 / 2; ++np) ldmatrix_x4_trans(yb[np], Y + kq * 16 * L::YS + np * 16);
#pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        if constexpr (RAW) {  // k-steps 0-3: the scan in parts; 4-7: two rows of X~(s+1) each
          static_assert(SUB == 8 && RR == 8, "the RAW schedule");
          const int ks = kq * 2 + kh;
          if (ks == 0) raw_prefix(rgw, rgv, rinc);
          if (ks == 1) raw_round(rinc, 1);
          if (ks == 2) raw_round(rinc, 2);
          if (ks == 3) {
            raw_round(rinc, 4);
            raw_carry(rinc, rex, rB);
          }
#pragma unroll
          for (int i = 0; i < RR; ++i)
            if (ks >= 4 && i / 2 == ks - 4) {
              raw_add(rgv[i], rex);
              rxe[i] = x_value(rB, rgv[i], rxw[i]);
            }
        } else if constexpr (IL && kUnroll) {  // the parts of X~(s+1) assigned to this k-step
#pragma unroll
          for (int i = 0; i < XI; ++i)
            if (i * SUB / XI == kq * 2 + kh) xe[i] = x_value(xBf, xgv[i], xxw[i]);
        }
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
    if constexpr (RAW) {
      raw_store(s + 1, rxe, rB, lenn);  // past the last step: zeros and a B_n no one reads
    } else if constexpr (IL && !kUnroll) {
      make_xt(s + 1);  // zeros past the last step
    } else if constexpr (IL && kUnroll) {
#pragma unroll
      for (int i = 0; i < XI; ++i) {
        const int r = xr + i * RSTEP;
        *reinterpret_cast<float4*>(Gn + r * L::GS + xf) = x_round(xe[i], r < lenn);
      }
    }
    if constexpr (BULK) fence_proxy_async();  // this step's generic writes (X~, edge loads) before bulk copies
  }

  if constexpr (STORE) {  // fin from the walk's last span (where the fold did not write it: one span, or late)
    if (p.out && (LATE ? sp == (REV ? 0 : p.S - 1) : p.S == 1)) store_acc(p.out + long(bh) * p.dk * p.dv);
    if constexpr (LATE) {
      if (tid == 0) p.pending[(long(bh) * p.S + sp) * gridDim.x + tile] = applied ? 0 : 1;
    }
    if constexpr (STAGED) bulk_wait_read();  // the last pieces read before the block's shared memory goes
    return;
  }
  // The span's result: fin itself when there is one span, else the partial state and (dv tile 0) the log-decay.
  store_acc(p.S == 1 ? p.out + long(bh) * p.dk * p.dv : p.out + p.part_at(sp, bh));
  if (p.S > 1 && tile % ntn == 0 && tid < BK && i0 + tid < p.dk) p.tau[p.tau_at(sp, bh) + i0 + tid] = tau;
  if (RAW && p.S == 1 && p.lambda && tile % ntn == 0 && tid < BK && i0 + tid < p.dk)
    p.lambda[long(bh) * p.dk + i0 + tid] = tau;
}

template <bool REV, int BK, int BN, int WM, int TS, bool IL, bool BULK, bool RAW = false, bool STORE = false,
          bool LATE = false, bool STAGED = false>
void launch_t(const KernelParams<LATE>& p, cudaStream_t stream) {
  // (+ the mbarriers; LATE: the late state's two words and its decay per row; STAGED: the pieces beyond the x tile)
  constexpr size_t smem = BoundaryLayout<BK, BN, WM, TS, RAW>::total + (BULK ? 64 : 0) + (LATE ? 16 + BK * 4 : 0) +
                          (STAGED ? StagedStore<BK, BN, WM>::extra : 0);
  // sm_90: 227 KiB for one block; two blocks of an SM share 228 KiB, less 1 KiB each
  static_assert(!STAGED || smem <= (layout_bps(BK, BN, WM, TS) == 1 ? 227 * 1024 : 113 * 1024),
                "STAGED: the pieces do not fit beside the stages");
  static const bool attr = [] {
    SPB_CUDA(cudaFuncSetAttribute(boundary_kernel<REV, BK, BN, WM, TS, IL, BULK, RAW, STORE, LATE, STAGED>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }();
  (void)attr;
  const dim3 grid(((p.dk + BK - 1) / BK) * ((p.dv + BN - 1) / BN), p.S, p.nbh);
  boundary_kernel<REV, BK, BN, WM, TS, IL, BULK, RAW, STORE, LATE, STAGED><<<grid, kBThreads, smem, stream>>>(p);
  SPB_CUDA_LAUNCH();
}

bool g_states_staged_store = true;

// A STORE configuration: staged (STAGED) where launch_states_spans has not turned it off, there is no late state,
// every tile of the grid is whole (dk, dv multiples of the tile: each row BN * 2 bytes, a multiple of 16) and hs is
// 16-byte aligned (each row then starts 16-byte aligned); the fragment stores otherwise.
template <bool REV, int BK, int BN, int WM, bool LATE>
void launch_store_t(const KernelParams<LATE>& p, cudaStream_t s) {
  if constexpr (!LATE) {
    if (g_states_staged_store && p.dk % BK == 0 && p.dv % BN == 0 && aligned16(p.hs)) {
      launch_t<REV, BK, BN, WM, 64, true, false, false, true, false, true>(p, s);
      return;
    }
  }
  launch_t<REV, BK, BN, WM, 64, true, false, false, true, LATE>(p, s);
}

}  // namespace

namespace boundary_detail {

// The STORE configurations states_plan_of makes.
template <bool REV, bool LATE>
void launch_store(const KernelParams<LATE>& p, const Plan& c, cudaStream_t s) {
  if (c.bk == 128 && c.bn == 128) launch_store_t<REV, 128, 128, 4, LATE>(p, s);
  else if (c.bk == 128) launch_store_t<REV, 128, 64, 4, LATE>(p, s);
  else if (c.bn == 128) launch_store_t<REV, 64, 128, 2, LATE>(p, s);
  else if (c.bk == 64) launch_store_t<REV, 64, 64, 2, LATE>(p, s);
  else launch_store_t<REV, 32, 64, 2, LATE>(p, s);
}
template void launch_store<false, false>(const BoundaryParams&, const Plan&, cudaStream_t);
template void launch_store<true, false>(const BoundaryParams&, const Plan&, cudaStream_t);
template void launch_store<false, true>(const LateParams&, const Plan&, cudaStream_t);
template void launch_store<true, true>(const LateParams&, const Plan&, cudaStream_t);

// Every configuration plan_of can produce (plain kernels: WM 2, TS 32, all six tiles; IL kernels: WM 4 on 128 x 128
// and 128 x 64, TS 32 or 64; the default's 32 x 64 tiles where dk <= 32 and dv <= 64).
template <bool REV>
void launch_r(const BoundaryParams& p, const Plan& c, cudaStream_t s) {
  if (c.raw) {  // boundary_reads_gates: the 64-token IL kernel at 128 rows
    if (c.bn == 128) launch_t<REV, 128, 128, 4, 64, true, false, true>(p, s);
    else launch_t<REV, 128, 64, 4, 64, true, false, true>(p, s);
    return;
  }
#define SPB_BOUNDARY_CASE(BK, BN, WM, TS, IL, BULK)                                                  \
  if (c.bk == BK && c.bn == BN && c.wm == WM && c.ts == TS && c.il == IL && c.bulk == BULK) { \
    launch_t<REV, BK, BN, WM, TS, IL, BULK>(p, s);                                               \
    return;                                                                                      \
  }
  SPB_BOUNDARY_CASE(128, 256, 2, 32, false, false)
  SPB_BOUNDARY_CASE(128, 128, 2, 32, false, false)
  SPB_BOUNDARY_CASE(128, 64, 2, 32, false, false)
  SPB_BOUNDARY_CASE(64, 256, 2, 32, false, false)
  SPB_BOUNDARY_CASE(64, 128, 2, 32, false, false)
  SPB_BOUNDARY_CASE(64, 64, 2, 32, false, false)
  SPB_BOUNDARY_CASE(128, 256, 2, 32, true, false)
  SPB_BOUNDARY_CASE(128, 128, 4, 32, true, false)
  SPB_BOUNDARY_CASE(128, 64, 4, 32, true, false)
  SPB_BOUNDARY_CASE(64, 256, 2, 32, true, false)
  SPB_BOUNDARY_CASE(64, 128, 2, 32, true, false)
  SPB_BOUNDARY_CASE(64, 64, 2, 32, true, false)
  SPB_BOUNDARY_CASE(128, 128, 4, 64, true, false)
  SPB_BOUNDARY_CASE(128, 64, 4, 64, true, false)
  SPB_BOUNDARY_CASE(64, 128, 2, 64, true, false)
  SPB_BOUNDARY_CASE(64, 64, 2, 64, true, false)
  SPB_BOUNDARY_CASE(32, 64, 2, 64, true, false)
  SPB_BOUNDARY_CASE(128, 256, 2, 32, true, true)
  SPB_BOUNDARY_CASE(128, 128, 4, 32, true, true)
  SPB_BOUNDARY_CASE(64, 256, 2, 32, true, true)
  SPB_BOUNDARY_CASE(64, 128, 2, 32, true, true)
  SPB_BOUNDARY_CASE(64, 64, 2, 32, true, true)
#undef SPB_BOUNDARY_CASE
  std::abort();  // unreachable: plan_of makes only the configurations above
}
template void launch_r<false>(const BoundaryParams&, const Plan&, cudaStream_t);
template void launch_r<true>(const BoundaryParams&, const Plan&, cudaStream_t);

}  // namespace boundary_detail

void set_states_staged_store(bool on) { g_states_staged_store = on; }
bool states_staged_store() { return g_states_staged_store; }

}  // namespace gla_cuda
}  // namespace spb
