// The chunk states by spans (launch_states_spans; kernels/gla/cuda/NOTES.md, "The chunk states"). Where a (b, h) has
// several spans: stage 1 of the boundary reduction (gla_boundary.cu) unless its partials are reused, and the fold that
// turns each span's partial state into the span's initial state; then boundary_kernel with STORE
// (gla_boundary_kernel.cu) runs every span's recurrence from its initial state at once. With a late initial state the
// STORE kernel's LATE instantiations add its share once it arrives, and settle_kernel completes the blocks that never
// saw it (launch_states_settle).
#include <cstddef>

#include "runtime/cuda_check.h"
#include "runtime/error.h"
#include "kernels/gla/cuda/gla_boundary.cuh"
#include "kernels/gla/cuda/gla_cuda_common.cuh"
#include "kernels/gla/cuda/gla_cuda_internal.h"

namespace spb {
namespace gla_cuda {
using namespace boundary_detail;
namespace {

// launch_states_settle: the blocks of the STORE kernel that never saw their late initial state (pending), on the
// STORE kernel's grid: late's share added to each state the block stored (add_late_share), and to fin where the
// block's span is the walk's last (as the STORE block would have: its fin is then the zero-start one).
template <bool REV>
__global__ void __launch_bounds__(kBThreads) settle_kernel(const LateParams p, int BK, int BN) {
  const int tile = blockIdx.x, sp = blockIdx.y, bh = p.bh0 + blockIdx.z;
  if (p.pending[(long(bh) * p.S + sp) * gridDim.x + tile] == 0) return;  // (the whole block)
  extern __shared__ float run[];  // [BK]
  const int ntn = (p.dv + BN - 1) / BN, i0 = (tile / ntn) * BK, j0 = (tile % ntn) * BN;
  const int c0 = sp * p.span, c1 = min(p.NT, c0 + p.span);
  add_late_share<REV>(p, run, sp, bh, i0, j0, BK, BN, c1 - c0);
  if (p.out && sp == (REV ? 0 : p.S - 1)) {  // run: the decay over the whole rank
    const float* Lt = p.late + (long(bh) * p.dk + i0) * p.dv + j0;
    float* F = p.out + (long(bh) * p.dk + i0) * p.dv + j0;
    for (int idx = threadIdx.x; idx < BK * BN; idx += blockDim.x) {
      const int r = idx / BN, c = idx % BN;
      if (i0 + r < p.dk && j0 + c < p.dv) F[long(r) * p.dv + c] += __expf(run[r]) * ld_cg(Lt + long(r) * p.dv + c);
    }
  }
}

}  // namespace

bool states_reuse_boundary(const Dims& d) {
  const Plan red = plan_of(d), st = states_plan_of(d);
  return red.S > 1 && red.S == st.S && red.span == st.span;
}

size_t states_pending_count(const Dims& d) {
  const Plan pl = states_plan_of(d);
  return size_t(d.B) * d.H * pl.S * ((d.dk + pl.bk - 1) / pl.bk) * ((d.dv + pl.bn - 1) / pl.bn);
}

void launch_states_spans(const Dims& d, bool reverse, const bf16* x, const bf16* y, const float* gc,
                         const float* init, bf16* hs, float* fin, float* scratch, bool reuse, cudaStream_t stream,
                         const LateInit* late) {
  SPB_CHECK(!reuse || states_reuse_boundary(d), "launch_states_spans: no boundary reduction to reuse at this shape");
  SPB_CHECK(!late || (!init && late->state && late->ready && late->pending),
            "launch_states_spans: a late initial state needs state, ready and pending, and no init");
  const Plan pl = states_plan_of(d);
  BoundaryParams p = params_of(d, pl, x, y, gc, nullptr);
  p.hs = hs;

  if (pl.S > 1) {
    // The reduction in the STORE kernel's own configuration and grid (without the stores): at 128 x 256 tiles
    // (dv > 128) plan_of's would fill only half the SMs with the states' spans.
    if (!reuse) launch_stage1(d, pl, reverse, x, y, gc, nullptr, nullptr, nullptr, scratch, stream);
    // With a late initial state the fold starts from zero and fin comes from the last span's walk.
    launch_fold(d, pl, reverse, scratch, late ? nullptr : fin, nullptr, init, true, stream, late != nullptr);
    p.init = scratch;
    p.tau = scratch;  // (excl_at)
    if (late) p.out = fin;
  } else {
    p.init = init;
    p.out = fin;
  }
  if (!late) {
    if (reverse) launch_store<true, false>(p, pl, stream);
    else launch_store<false, false>(p, pl, stream);
    return;
  }
  LateParams lp;
  static_cast<BoundaryParams&>(lp) = p;
  lp.late = late->state, lp.ready = late->ready, lp.epoch = late->epoch, lp.pending = late->pending;
  if (reverse) launch_store<true, true>(lp, pl, stream);
  else launch_store<false, true>(lp, pl, stream);
}

void launch_states_settle(const Dims& d, bool reverse, const float* gc, const LateInit& late, bf16* hs, float* fin,
                          float* scratch, cudaStream_t stream) {
  const Plan pl = states_plan_of(d);
  LateParams p;
  static_cast<BoundaryParams&>(p) = params_of(d, pl, nullptr, nullptr, gc, nullptr);
  p.hs = hs, p.out = fin, p.tau = scratch;
  p.late = late.state, p.ready = late.ready, p.epoch = late.epoch, p.pending = late.pending;
  const dim3 grid(((d.dk + pl.bk - 1) / pl.bk) * ((d.dv + pl.bn - 1) / pl.bn), pl.S, d.pairs());
  if (reverse) settle_kernel<true><<<grid, kBThreads, pl.bk * 4, stream>>>(p, pl.bk, pl.bn);
  else settle_kernel<false><<<grid, kBThreads, pl.bk * 4, stream>>>(p, pl.bk, pl.bn);
  SPB_CUDA_LAUNCH();
}

}  // namespace gla_cuda
}  // namespace spb
