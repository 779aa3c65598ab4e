// Runs the CUDA GLA kernels under the CPU emulation (cuda_emu.h) on small problems and checks them like
// tests/kernels/gla/test_gla_cuda.cpp does: against the fp64 token loop (bf16-rounded inputs, DESIGN §7 bars) and, for
// the SP helper stages, against the CPU stages. Built and run by emu_check.sh; a development tool, not a CI test
// (one OS thread per CUDA thread: slow, small sizes only).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <cuda_bf16.h>

#include "runtime/device.h"
#include "sp/inputs.h"
#include "runtime/stats.h"
#include "kernels/gla/cpu/gla_reference.h"
#include "kernels/gla/cuda/gla_cuda.h"
#include "kernels/gla/cuda/gla_cuda_internal.h"
#include "kernels/gla/cuda/tf32_model.h"
#include "kernels/gla/gla.h"

using namespace spb;

namespace {

int failures = 0;

void expect_lt(double e, double tol, const std::string& what) {
  if (!(e < tol)) {
    ++failures;
    std::printf("  FAIL %s: %.3e (bar %.1e)\n", what.c_str(), e, tol);
  }
}

std::vector<float> rounded(std::vector<float> x) {
  for (float& v : x) v = __bfloat162float(__float2bfloat16(v));
  return x;
}
std::vector<__nv_bfloat16> to_bf(const std::vector<float>& x) {
  std::vector<__nv_bfloat16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16(x[i]);
  return y;
}
std::vector<float> from_bf(const std::vector<__nv_bfloat16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __bfloat162float(x[i]);
  return y;
}
template <class T>
void poison(std::vector<T>& x) {
  std::memset(x.data(), 0xFF, x.size() * sizeof(T));
}
void poison(Buffer& b) { std::memset(b.get(), 0xFF, b.bytes()); }

void composite(int B, int T, int H, int dk, int dv, int gates, bool with_h0, bool with_dht) {
  GlaShape s;
  s.B = B, s.T = T, s.H = H, s.dk = dk, s.dv = dv;
  HostTensors x = generate_inputs(s, 500 + T + dk, gates == 0 ? GateKind::model : GateKind::strong, with_h0, with_dht);
  if (gates == 2)
    for (float& v : x.g) v *= 6.f;
  x.q = rounded(x.q), x.k = rounded(x.k), x.v = rounded(x.v), x.g = rounded(x.g), x.d_o = rounded(x.d_o);
  const GlaReferenceResult ref = gla_reference(s, x.q, x.k, x.v, x.g, x.h0, x.d_o, x.dht);

  auto dev = make_cpu_device();
  auto kern = make_cuda_kernels();
  GlaWorkspace ws(*dev, *kern, s);
  for (Buffer* b : {&ws.gc, &ws.lambda, &ws.hs, &ws.ht, &ws.dhs}) poison(*b);
  auto q = to_bf(x.q), k = to_bf(x.k), v = to_bf(x.v), g = to_bf(x.g), d_o = to_bf(x.d_o);
  std::vector<__nv_bfloat16> o(s.v_elems()), dq(s.qk_elems()), dkk(s.qk_elems()), dvv(s.v_elems()), dg(s.qk_elems());
  std::vector<float> ht(s.state_elems()), dh0(s.state_elems());
  poison(o), poison(dq), poison(dkk), poison(dvv), poison(dg), poison(ht), poison(dh0);
  const float* h0 = with_h0 ? x.h0.data() : nullptr;
  const float* dht = with_dht ? x.dht.data() : nullptr;
  gla_forward(*kern, ws, q.data(), k.data(), v.data(), g.data(), h0, o.data(), ht.data(), {});
  gla_backward(*kern, ws, q.data(), k.data(), v.data(), g.data(), h0, d_o.data(), dht, dq.data(), dkk.data(),
               dvv.data(), dg.data(), dh0.data(), {});
  const double eo = rel_rms_error(ref.o, from_bf(o), o.size()), eht = rel_rms_error(ref.ht, ht, ht.size());
  const double edq = rel_rms_error(ref.dq, from_bf(dq), dq.size()), edk = rel_rms_error(ref.dk, from_bf(dkk), dkk.size());
  const double edv = rel_rms_error(ref.dv, from_bf(dvv), dvv.size()), edg = rel_rms_error(ref.dg, from_bf(dg), dg.size());
  const double edh0 = rel_rms_error(ref.dh0, dh0, dh0.size());
  // The chunk states the backward left in the workspace (hs from h0, dhs from dht; bf16) against the CPU stages' (fp32
  // arithmetic on the same bf16-valued inputs: exact to ~1e-6 at these sizes).
  auto cpu = make_cpu_kernels();
  std::vector<float> gc_c(s.qk_elems()), hs_c(s.chunk_state_elems()), dhs_c(s.chunk_state_elems());
  std::vector<float> fin_c(s.state_elems());
  cpu->chunk_cumsum(s, x.g.data(), gc_c.data(), nullptr, {});
  cpu->chunk_states_fwd(s, x.k.data(), x.v.data(), gc_c.data(), h0, hs_c.data(), fin_c.data(), {});
  cpu->chunk_states_bwd(s, x.q.data(), x.d_o.data(), gc_c.data(), dht, dhs_c.data(), fin_c.data(), {});
  auto widened = [](const Buffer& b, size_t n) {
    const auto* p = static_cast<const __nv_bfloat16*>(b.get());
    return from_bf(std::vector<__nv_bfloat16>(p, p + n));
  };
  const double ehs = rel_rms_error(hs_c, widened(ws.hs, hs_c.size()), hs_c.size());
  const double edhs = rel_rms_error(dhs_c, widened(ws.dhs, dhs_c.size()), dhs_c.size());
  std::printf("B%d T%d H%d dk%d dv%d gates%d h0 %d dht %d: o %.2e ht %.2e dq %.2e dk %.2e dv %.2e dg %.2e dh0 %.2e "
              "hs %.2e dhs %.2e\n",
              B, T, H, dk, dv, gates, with_h0, with_dht, eo, eht, edq, edk, edv, edg, edh0, ehs, edhs);
  expect_lt(eo, 4e-3, "o");
  expect_lt(eht, 5e-3, "ht");
  expect_lt(edq, 5e-3, "dq");
  expect_lt(edk, 5e-3, "dk");
  expect_lt(edv, 5e-3, "dv");
  expect_lt(edg, 5e-3, "dg");
  expect_lt(edh0, 5e-3, "dh0");
  expect_lt(ehs, kOneBf16Rounding, "hs");  // from tf32 operands, rounded to bf16
  expect_lt(edhs, kOneBf16Rounding, "dhs");
}

// chunk_grads at a row stride (GlaShape::grad_ld: dq, dk, dv side by side in rows of `ld`, as the model's dproj)
// against the dense call: the same bits in their columns, and the columns between them (pad) left as they were.
void grads_at_row_stride(int B, int T, int H, int dk, int dv, int pad) {
  GlaShape s;
  s.B = B, s.T = T, s.H = H, s.dk = dk, s.dv = dv;
  const HostTensors x = generate_inputs(s, 900 + T + dk, GateKind::strong, true, true);
  auto dev = make_cpu_device();
  auto kern = make_cuda_kernels();
  GlaWorkspace ws(*dev, *kern, s);
  auto q = to_bf(rounded(x.q)), k = to_bf(rounded(x.k)), v = to_bf(rounded(x.v)), g = to_bf(rounded(x.g));
  auto d_o = to_bf(rounded(x.d_o));
  std::vector<__nv_bfloat16> o(s.v_elems()), dq(s.qk_elems()), dkk(s.qk_elems()), dvv(s.v_elems()), dg(s.qk_elems());
  std::vector<float> ht(s.state_elems());
  gla_forward(*kern, ws, q.data(), k.data(), v.data(), g.data(), x.h0.data(), o.data(), ht.data(), {});
  gla_backward_saved(*kern, ws, q.data(), k.data(), v.data(), ht.data(), d_o.data(), x.dht.data(), dq.data(),
                     dkk.data(), dvv.data(), dg.data(), nullptr, {});
  const int qw = H * dk, vw = H * dv, ld = 2 * qw + vw + pad;
  const size_t rows = size_t(B) * T;
  std::vector<__nv_bfloat16> m(rows * ld), dg2(s.qk_elems());
  poison(m), poison(dg2);
  gla_backward_saved(*kern, ws, q.data(), k.data(), v.data(), ht.data(), d_o.data(), x.dht.data(), m.data(),
                     m.data() + qw, m.data() + 2 * qw, dg2.data(), nullptr, {}, ld);
  auto bits = [](__nv_bfloat16 a) { uint16_t u; std::memcpy(&u, &a, 2); return u; };
  size_t wrong = 0, written_pad = 0;
  for (size_t r = 0; r < rows; ++r) {
    const __nv_bfloat16* row = m.data() + r * ld;
    for (int c = 0; c < qw; ++c) wrong += bits(row[c]) != bits(dq[r * qw + c]);
    for (int c = 0; c < qw; ++c) wrong += bits(row[qw + c]) != bits(dkk[r * qw + c]);
    for (int c = 0; c < vw; ++c) wrong += bits(row[2 * qw + c]) != bits(dvv[r * vw + c]);
    for (int c = 2 * qw + vw; c < ld; ++c) written_pad += bits(row[c]) != 0xFFFF;
  }
  for (size_t i = 0; i < dg.size(); ++i) wrong += bits(dg[i]) != bits(dg2[i]);
  std::printf("grads at row stride %d, B%d T%d H%d dk%d dv%d: %zu elements differ, %zu pad elements written\n", ld, B,
              T, H, dk, dv, wrong, written_pad);
  expect_lt(double(wrong), 0.5, "grads at a row stride");
  expect_lt(double(written_pad), 0.5, "pad written");
}

void helpers(int B, int T, int H, int dk, int dv) {
  GlaShape s;
  s.B = B, s.T = T, s.H = H, s.dk = dk, s.dv = dv;
  const HostTensors x = generate_inputs(s, 77 + T, GateKind::strong, true, true);
  const std::vector<float> q = rounded(x.q), g = rounded(x.g);
  auto gpu = make_cuda_kernels();
  auto cpu = make_cpu_kernels();
  std::vector<float> gc(s.qk_elems()), gc_cpu(s.qk_elems()), lam(s.state_rows()), lam_cpu(s.state_rows());
  auto qb = to_bf(q), gb = to_bf(g);
  gpu->chunk_cumsum(s, gb.data(), gc.data(), lam.data(), {});
  cpu->chunk_cumsum(s, g.data(), gc_cpu.data(), lam_cpu.data(), {});
  expect_lt(rel_rms_error(gc_cpu, gc, gc.size()), 1e-6, "cumsum");
  expect_lt(rel_rms_error(lam_cpu, lam, lam.size()), 1e-6, "lambda");
  // output_add_initial
  const std::vector<float> S_in = x.h0;
  std::vector<float> o0 = rounded(x.v);
  auto ob = to_bf(o0);
  gpu->output_add_initial(s, qb.data(), gc.data(), S_in.data(), ob.data(), {});
  cpu->output_add_initial(s, q.data(), gc.data(), S_in.data(), o0.data(), {});
  const double eo = rel_rms_error(o0, from_bf(ob), o0.size());
  expect_lt(eo, 4e-3, "output_add_initial");
  // states_add_initial: hs bf16 on the GPU (read, added in fp32, rounded once), ht fp32
  std::vector<float> hs2(s.chunk_state_elems()), e(s.state_elems());
  for (size_t i = 0; i < hs2.size(); ++i) hs2[i] = std::sin(0.37 * i);
  for (size_t i = 0; i < e.size(); ++i) e[i] = std::cos(0.11 * i);
  hs2 = rounded(hs2);
  std::vector<__nv_bfloat16> hs = to_bf(hs2);
  std::vector<float> ee2 = e;
  gpu->states_add_initial(s, gc.data(), S_in.data(), hs.data(), e.data(), {});
  cpu->states_add_initial(s, gc.data(), S_in.data(), hs2.data(), ee2.data(), {});
  const double e1 = rel_rms_error(hs2, from_bf(hs), hs.size()), e2 = rel_rms_error(ee2, e, e.size());
  expect_lt(e1, kOneBf16Rounding, "add_state hs");
  expect_lt(e2, 1e-5, "add_state ht");
  std::printf("helpers B%d T%d H%d dk%d dv%d: output_add_initial %.2e states %.2e ht %.2e\n", B, T, H, dk, dv, eo, e1,
              e2);
}

// launch_boundary (the boundary state alone, by spans of chunks) against launch_states' fin (ht / dh0 from a zero
// start) on the same inputs, and both against the fp64 reference. span: chunks per span (0: the launcher's choice;
// here, without a device, it plans for 132 SMs); variant: gla_cuda::set_boundary_variant (0: the default);
// from_g: launch_boundary_gates (reads g, scans each chunk itself; forward also checks its lambda).
void boundary_states(int B, int T, int H, int dk, int dv, int span, GateKind gates = GateKind::model,
                     int variant = 0, bool from_g = false) {
  GlaShape s;
  s.B = B, s.T = T, s.H = H, s.dk = dk, s.dv = dv;
  const HostTensors x = generate_inputs(s, 300 + T + dk + dv, gates, false, false);
  const std::vector<float> q = rounded(x.q), k = rounded(x.k), v = rounded(x.v), g = rounded(x.g), d_o = rounded(x.d_o);
  auto cpu = make_cpu_kernels();
  std::vector<float> gc(s.qk_elems()), lam_cpu(s.state_rows()), lam(s.state_rows());
  cpu->chunk_cumsum(s, g.data(), gc.data(), lam_cpu.data(), {});
  const auto gb = to_bf(g);
  poison(lam);
  const GlaReferenceResult ref = gla_reference(s, q, k, v, g, {}, d_o, {});
  auto qb = to_bf(q), kb = to_bf(k), vb = to_bf(v), ob = to_bf(d_o);
  const gla_cuda::Dims d{B, T, H, dk, dv, s.chunks(), 1.0f / std::sqrt(float(dk))};
  gla_cuda::set_boundary_span(span);
  gla_cuda::set_boundary_variant(variant);
  const size_t n_scratch = gla_cuda::boundary_scratch_elems(d);
  std::vector<float> scratch(n_scratch);
  if (from_g && !gla_cuda::boundary_reads_gates(d)) {
    std::printf("boundary states B%d T%d H%d dk%d dv%d: boundary_reads_gates is false\n", B, T, H, dk, dv);
    ++failures;
    return;
  }
  double es[2], er[2], esr[2];
  for (int rev = 0; rev < 2; ++rev) {
    const __nv_bfloat16* xb = rev ? qb.data() : kb.data();
    const __nv_bfloat16* yb = rev ? ob.data() : vb.data();
    std::vector<float> fin_states(s.state_elems()), fin(s.state_elems());
    poison(fin_states), poison(fin), poison(scratch);
    gla_cuda::launch_states(d, rev, xb, yb, gc.data(), nullptr, nullptr, fin_states.data(), nullptr);
    if (from_g)
      gla_cuda::launch_boundary_gates(d, rev, xb, yb, gb.data(), fin.data(), lam.data(),
                                      n_scratch ? scratch.data() : nullptr, nullptr);
    else
      gla_cuda::launch_boundary(d, rev, xb, yb, gc.data(), fin.data(), n_scratch ? scratch.data() : nullptr, nullptr);
    const std::vector<double>& r = rev ? ref.dh0 : ref.ht;
    es[rev] = rel_rms_error(fin_states, fin, fin.size());
    er[rev] = rel_rms_error(r, fin, fin.size());
    esr[rev] = rel_rms_error(r, fin_states, fin.size());
  }
  gla_cuda::set_boundary_span(0);
  gla_cuda::set_boundary_variant(0);
  const int nt = s.chunks(), sp = span > 0 && span < nt ? span : 0;
  const double elam = from_g ? rel_rms_error(lam_cpu, lam, lam.size()) : 0.0;
  char ebuf[32];
  std::snprintf(ebuf, sizeof ebuf, "%.2e", elam);
  std::printf("boundary states B%d T%d H%d dk%d dv%d span %s variant %d%s: vs states ht %.2e dh0 %.2e; vs fp64 ht "
              "%.2e dh0 %.2e (states: %.2e %.2e)%s\n",
              B, T, H, dk, dv, sp ? std::to_string(sp).c_str() : (span > 0 ? "all" : "auto"), variant,
              from_g ? " from g" : "", es[0], es[1], er[0], er[1], esr[0], esr[1],
              from_g ? (" lambda " + std::string(ebuf)).c_str() : "");
  if (from_g) expect_lt(elam, 1e-6, "boundary lambda vs cumsum");
  for (int rev = 0; rev < 2; ++rev) {
    expect_lt(es[rev], 1e-5, rev ? "boundary dh0 vs states" : "boundary ht vs states");
    expect_lt(er[rev], 5e-3, rev ? "boundary dh0 vs fp64" : "boundary ht vs fp64");
  }
}

// The chunk states by spans (chunk_states_fwd / _bwd's default, launch_states_spans) and after a boundary call
// (chunk_states_*_after_boundary, reusing its partials) against the sequential walk (set_states_variant(1)), all
// through the GlaKernels interface, with an initial state and a final gradient; every hs / dhs element poisoned
// first. span: chunks per span (0: the plan's).
void states_spans(int B, int T, int H, int dk, int dv, int span, GateKind gates = GateKind::model) {
  GlaShape s;
  s.B = B, s.T = T, s.H = H, s.dk = dk, s.dv = dv;
  const HostTensors x = generate_inputs(s, 900 + T + dk + dv, gates, true, true);
  auto q = to_bf(rounded(x.q)), k = to_bf(rounded(x.k)), v = to_bf(rounded(x.v)), g = to_bf(rounded(x.g));
  auto d_o = to_bf(rounded(x.d_o));
  auto kern = make_cuda_kernels();
  gla_cuda::set_boundary_span(span);
  std::vector<float> gc(s.qk_elems()), gc2(s.qk_elems()), lam(s.state_rows());
  kern->chunk_cumsum(s, g.data(), gc.data(), lam.data(), {});
  const size_t HS = s.chunk_state_elems(), S = s.state_elems();
  // [0] sequential, [1] by spans, [2] after the boundary call, [3] by spans with the fragment stores
  // (set_states_staged_store(false)); hs, dhs bf16
  std::vector<__nv_bfloat16> hs[4], dhs[4];
  std::vector<float> ht[4], dh0[4], fin(S), dfin(S);
  for (int m = 0; m < 4; ++m) {
    hs[m].resize(HS), ht[m].resize(S), dhs[m].resize(HS), dh0[m].resize(S);
    poison(hs[m]), poison(ht[m]), poison(dhs[m]), poison(dh0[m]);
    gla_cuda::set_states_variant(m == 0 ? 1 : 0);
    gla_cuda::set_states_staged_store(m != 3);
    if (m == 2) {
      kern->chunk_final_state(s, k.data(), v.data(), g.data(), gc2.data(), fin.data(), nullptr, {});
      kern->chunk_states_fwd_after_boundary(s, k.data(), v.data(), gc.data(), x.h0.data(), hs[m].data(),
                                            ht[m].data(), {});
      kern->chunk_initial_dstate(s, q.data(), d_o.data(), g.data(), gc.data(), dfin.data(), {});
      kern->chunk_states_bwd_after_boundary(s, q.data(), d_o.data(), gc.data(), x.dht.data(), dhs[m].data(),
                                            dh0[m].data(), {});
    } else {
      kern->chunk_states_fwd(s, k.data(), v.data(), gc.data(), x.h0.data(), hs[m].data(), ht[m].data(), {});
      kern->chunk_states_bwd(s, q.data(), d_o.data(), gc.data(), x.dht.data(), dhs[m].data(), dh0[m].data(), {});
    }
  }
  gla_cuda::set_states_staged_store(true);
  // That the reduction is reused where states_reuse_boundary: a boundary call on zero keys, the keys then changed
  // under the same pointer (what the contract forbids) must leave hs wrong from the second span on.
  const gla_cuda::Dims d{B, T, H, dk, dv, s.chunks(), 1.0f / std::sqrt(float(dk))};
  const bool reuse = gla_cuda::states_reuse_boundary(d);
  std::vector<__nv_bfloat16> kk(k.size(), __float2bfloat16(0.f));
  std::vector<__nv_bfloat16> hs_stale(HS);
  std::vector<float> ht_stale(S);
  kern->chunk_final_state(s, kk.data(), v.data(), g.data(), gc2.data(), fin.data(), nullptr, {});
  kk = k;
  kern->chunk_states_fwd_after_boundary(s, kk.data(), v.data(), gc.data(), x.h0.data(), hs_stale.data(),
                                        ht_stale.data(), {});
  const double e_stale = rel_rms_error(from_bf(hs[0]), from_bf(hs_stale), HS);
  gla_cuda::set_states_variant(0);
  gla_cuda::set_boundary_span(0);
  std::printf("states by spans B%d T%d H%d dk%d dv%d span %d (reuse %d, stale hs %.1e):", B, T, H, dk, dv, span,
              int(reuse), e_stale);
  if (reuse) expect_lt(1e-3, e_stale, "the reduction was not reused (stale partials gave the right hs)");
  else expect_lt(e_stale, kOneBf16Rounding, "no reuse expected, yet hs changed");
  for (int m = 1; m < 3; ++m) {
    const std::string w = m == 1 ? "spans " : "after boundary ";
    const double e[4] = {rel_rms_error(from_bf(hs[0]), from_bf(hs[m]), HS), rel_rms_error(ht[0], ht[m], S),
                         rel_rms_error(from_bf(dhs[0]), from_bf(dhs[m]), HS), rel_rms_error(dh0[0], dh0[m], S)};
    std::printf(" %shs %.2e ht %.2e dhs %.2e dh0 %.2e;", w.c_str(), e[0], e[1], e[2], e[3]);
    expect_lt(e[0], kOneBf16Rounding, w + "hs"), expect_lt(e[1], 1e-5, w + "ht");  // hs, dhs: bf16 (see the bar)
    expect_lt(e[2], kOneBf16Rounding, w + "dhs"), expect_lt(e[3], 1e-5, w + "dh0");
  }
  // The staged store against the fragment stores: the same bits (hs, dhs and the fp32 fin alike).
  const bool same = std::memcmp(hs[1].data(), hs[3].data(), HS * 2) == 0 &&
                    std::memcmp(dhs[1].data(), dhs[3].data(), HS * 2) == 0 &&
                    std::memcmp(ht[1].data(), ht[3].data(), S * 4) == 0 &&
                    std::memcmp(dh0[1].data(), dh0[3].data(), S * 4) == 0;
  std::printf(" staged vs fragment stores: %s", same ? "identical" : "DIFFER");
  expect_lt(same ? 0.0 : 1.0, 0.5, "staged store: hs / dhs / ht / dh0 differ from the fragment stores'");
  std::printf("\n");
}

// The chunk states beside the scan (chunk_states_*_arriving + chunk_states_settle) against the states after the
// boundary call with the same initial state / final gradient given at once, after the same boundary call (so that
// the reduction is reused, as in the SP methods): the word set before the call (every block adds the state at its
// first chunk), never (the settle does everything), set by another thread while the blocks run (blocks add it at
// their first, a middle or no chunk, and patch the states they stored before), and left at an older epoch (not the
// state's: nothing may be added). hs / dhs poisoned first.
void states_arriving(int B, int T, int H, int dk, int dv, int span, GateKind gates = GateKind::model) {
  GlaShape s;
  s.B = B, s.T = T, s.H = H, s.dk = dk, s.dv = dv;
  const HostTensors x = generate_inputs(s, 700 + T + dk + dv, gates, true, true);
  auto q = to_bf(rounded(x.q)), k = to_bf(rounded(x.k)), v = to_bf(rounded(x.v)), g = to_bf(rounded(x.g));
  auto d_o = to_bf(rounded(x.d_o));
  auto kern = make_cuda_kernels();
  gla_cuda::set_boundary_span(span);
  std::vector<float> gc(s.qk_elems()), gc2(s.qk_elems()), fin(s.state_elems());
  kern->chunk_cumsum(s, g.data(), gc.data(), nullptr, {});
  const size_t HS = s.chunk_state_elems(), S = s.state_elems();
  std::vector<__nv_bfloat16> hs0(HS), dhs0(HS);
  std::vector<float> ht0(S), dh00(S);
  kern->chunk_final_state(s, k.data(), v.data(), g.data(), gc2.data(), fin.data(), nullptr, {});
  kern->chunk_states_fwd_after_boundary(s, k.data(), v.data(), gc.data(), x.h0.data(), hs0.data(), ht0.data(), {});
  kern->chunk_initial_dstate(s, q.data(), d_o.data(), g.data(), gc.data(), fin.data(), {});
  kern->chunk_states_bwd_after_boundary(s, q.data(), d_o.data(), gc.data(), x.dht.data(), dhs0.data(), dh00.data(),
                                        {});
  const char* names[] = {"before", "never", "while", "stale"};
  std::printf("states arriving B%d T%d H%d dk%d dv%d span %d:", B, T, H, dk, dv, span);
  for (int when = 0; when < 4; ++when) {
    uint32_t word[2] = {6, 6};  // (a previous pass's epoch)
    const uint32_t epoch = 7;
    std::vector<__nv_bfloat16> hs(HS), dhs(HS);
    std::vector<float> ht(S), dh0(S);
    poison(hs), poison(ht), poison(dhs), poison(dh0);
    GlaKernels::ArrivingState fwd{x.h0.data(), &word[0], epoch}, bwd{x.dht.data(), &word[1], epoch};
    if (when == 0) word[0] = word[1] = epoch;
    std::thread setter;
    // while: once the first block has stored its first state (the emulation runs one block at a time), so that
    // block sees the word in the middle of its walk and the later ones at their first chunk.
    auto stored = [](const std::vector<__nv_bfloat16>& h) {  // an element no longer the poison (a bf16 NaN)
      for (size_t i = 0; i < h.size(); i += 7)
        if (*reinterpret_cast<const volatile uint16_t*>(&h[i]) != 0xFFFF) return true;
      return false;
    };
    if (when == 2)
      setter = std::thread([&] {
        while (!stored(hs)) std::this_thread::sleep_for(std::chrono::microseconds(50));
        __atomic_store_n(&word[0], epoch, __ATOMIC_RELEASE);
        while (!stored(dhs)) std::this_thread::sleep_for(std::chrono::microseconds(50));
        __atomic_store_n(&word[1], epoch, __ATOMIC_RELEASE);
      });
    kern->chunk_final_state(s, k.data(), v.data(), g.data(), gc2.data(), fin.data(), nullptr, {});
    kern->chunk_states_fwd_arriving(s, k.data(), v.data(), gc.data(), fwd, hs.data(), ht.data(), {});
    kern->chunk_states_settle(s, false, gc.data(), fwd, hs.data(), ht.data(), {});
    kern->chunk_initial_dstate(s, q.data(), d_o.data(), g.data(), gc.data(), fin.data(), {});
    kern->chunk_states_bwd_arriving(s, q.data(), d_o.data(), gc.data(), bwd, dhs.data(), dh0.data(), {});
    kern->chunk_states_settle(s, true, gc.data(), bwd, dhs.data(), dh0.data(), {});
    if (setter.joinable()) setter.join();
    const double e[4] = {rel_rms_error(from_bf(hs0), from_bf(hs), HS), rel_rms_error(ht0, ht, S),
                         rel_rms_error(from_bf(dhs0), from_bf(dhs), HS), rel_rms_error(dh00, dh0, S)};
    std::printf(" %s hs %.1e ht %.1e dhs %.1e dh0 %.1e;", names[when], e[0], e[1], e[2], e[3]);
    const std::string w = std::string(names[when]) + ": ";
    // A state stored before the late share came is rounded twice (its zero-start value, then the sum): two bf16
    // roundings against the one of hs0.
    expect_lt(e[0], 2 * kOneBf16Rounding, w + "hs"), expect_lt(e[1], 1e-5, w + "ht");
    expect_lt(e[2], 2 * kOneBf16Rounding, w + "dhs"), expect_lt(e[3], 1e-5, w + "dh0");
  }
  std::printf("\n");
  gla_cuda::set_boundary_span(0);
}

void states_beside_the_scan() {
  states_arriving(1, 485, 1, 128, 128, 3);                    // spans of 3, partial last chunk
  states_arriving(2, 150, 2, 128, 128, 2, GateKind::strong);  // B = H = 2, partial last span and chunk
  states_arriving(1, 100, 1, 64, 64, 4);                      // one span: no fold, fin from the STORE kernel
  states_arriving(1, 130, 1, 128, 256, 2);                    // two dv tiles
  states_arriving(1, 91, 1, 13, 7, 1, GateKind::strong);      // odd sizes, one chunk per span
  states_arriving(1, 485, 2, 32, 64, 3);                      // 32 x 64 tiles
}

// chunk_output and the dv stage with several column tiles per block (intra_kernel MULTI: A built once per block) and
// the state slice in quads (QUADS: variant 4 at one tile per block): o and dv must equal, bit for bit, those of variant 3 at one tile per
// block (A rebuilt per tile, the slice in rows), since each output column sees the same operations in the same
// order; at 64- and 128-column tiles, and with gates strong enough for the exact diagonal blocks.
void intra_tiles(int T, int dk, int dv, int gates) {
  GlaShape s;
  s.B = 1, s.T = T, s.H = 1, s.dk = dk, s.dv = dv;
  HostTensors x = generate_inputs(s, 700 + T + dk + dv, gates == 0 ? GateKind::model : GateKind::strong, true, true);
  if (gates == 2)
    for (float& v : x.g) v *= 6.f;
  auto q = to_bf(rounded(x.q)), k = to_bf(rounded(x.k)), v = to_bf(rounded(x.v)), g = to_bf(rounded(x.g));
  auto d_o = to_bf(rounded(x.d_o));
  auto kern = make_cuda_kernels();
  std::vector<float> gc(s.qk_elems()), fin(s.state_elems());
  std::vector<__nv_bfloat16> hs(s.chunk_state_elems()), dhs(s.chunk_state_elems());
  kern->chunk_cumsum(s, g.data(), gc.data(), nullptr, {});
  kern->chunk_states_fwd(s, k.data(), v.data(), gc.data(), x.h0.data(), hs.data(), fin.data(), {});
  kern->chunk_states_bwd(s, q.data(), d_o.data(), gc.data(), x.dht.data(), dhs.data(), fin.data(), {});
  const gla_cuda::Dims d{1, T, 1, dk, dv, s.chunks(), 1.0f / std::sqrt(float(dk))};
  auto run = [&](int bv, int tiles, std::vector<__nv_bfloat16>& o, std::vector<__nv_bfloat16>& dvv, int variant) {
    o.assign(s.v_elems(), __float2bfloat16(0.f)), dvv.assign(s.v_elems(), __float2bfloat16(0.f));
    poison(o), poison(dvv);
    gla_cuda::set_intra_variant(variant);
    gla_cuda::set_intra_tiles(tiles);
    gla_cuda::launch_output(d, q.data(), k.data(), v.data(), gc.data(), hs.data(), o.data(), {}, bv);
    gla_cuda::launch_dv(d, q.data(), k.data(), d_o.data(), gc.data(), dhs.data(), dvv.data(), {}, bv);
    gla_cuda::set_intra_tiles(0);
    gla_cuda::set_intra_variant(0);
  };
  std::vector<__nv_bfloat16> o1, dv1, o2, dv2;
  run(128, 1, o1, dv1, 3);
  std::printf("intra tiles T%d dk%d dv%d gates%d:", T, dk, dv, gates);
  // Variant 3 at one tile only: with several tiles per block variant 4 runs the same kernel (rows).
  for (int variant : {3, 4})
    for (int bv : {128, 64})
      for (int tiles : variant == 3 ? std::vector<int>{1} : std::vector<int>{1, 2, 3, 8}) {
        if (variant == 3 && bv == 128) continue;  // the reference itself
        run(bv, tiles, o2, dv2, variant);
        const bool same = std::memcmp(o1.data(), o2.data(), o1.size() * 2) == 0 &&
                          std::memcmp(dv1.data(), dv2.data(), dv1.size() * 2) == 0;
        std::printf(" v%d bv %d tiles %d %s;", variant, bv, tiles, same ? "same" : "DIFFERENT");
        if (!same) ++failures;
      }
  std::printf("\n");
}

}  // namespace

// launch_states_spans: 128 x 128 (the boundary from g first), 64 x 64, 128 x 64 and 64 x 128 tiles, 128-column tiles
// at dv = 256 (own spans, no reuse), partial chunks and spans, one span (no fold), odd sizes, B = H = 2.
void states_by_spans() {
  states_spans(1, 485, 1, 128, 128, 3);                    // spans of 3, partial last chunk; reuses the g reduction
  states_spans(2, 150, 2, 128, 128, 2, GateKind::strong);  // B = H = 2, partial last span and chunk
  states_spans(1, 100, 1, 64, 64, 4);                      // one span: no fold, fin from the STORE kernel
  states_spans(1, 200, 1, 64, 128, 1);                     // one chunk per span
  states_spans(1, 160, 1, 128, 64, 0);                     // 128 x 64 tiles, the plan's spans
  states_spans(1, 130, 1, 128, 256, 2);                    // 128 x 128 store tiles under a 128 x 256 reduction
  states_spans(1, 91, 1, 13, 7, 1, GateKind::strong);      // odd sizes: element copies, scalar fold
  states_spans(1, 1, 1, 64, 64, 0);                        // one token
  states_spans(1, 485, 2, 32, 64, 3);                      // 32 x 64 tiles (dk <= 32, dv <= 64): GLA-1B's 32 heads
  states_spans(1, 130, 1, 24, 40, 2, GateKind::strong);    // a part-filled 32 x 64 tile
}

// intra_kernel with several column tiles per block: whole and part-filled tiles, partial chunks, one slice (dk 16),
// the exact diagonal blocks; and a whole forward + backward against fp64 at 2 tiles per block.
void intra_by_tiles() {
  intra_tiles(130, 40, 300, 1);   // 3 x 128 columns (the last 44), partial last chunk, 3 slices
  intra_tiles(70, 16, 256, 2);    // one feature slice per pass; extreme gates: exact diagonal blocks
  intra_tiles(64, 24, 200, 0);    // one whole chunk, dk not a multiple of the slice
  gla_cuda::set_intra_tiles(2);  // the plan takes 1 where every block fits one wave, as at these sizes
  composite(1, 130, 1, 40, 300, 1, true, true);
  gla_cuda::set_intra_tiles(0);
}

// launch_boundary_gates: spans, partial chunks and tiles, B and H > 1, 128 x 64 tiles, two dk tiles, element copies.
void boundary_from_gates() {
  boundary_states(1, 485, 1, 128, 128, 3, GateKind::model, 0, true);   // spans of 3, partial last chunk
  boundary_states(2, 150, 2, 128, 128, 2, GateKind::strong, 0, true);  // B = H = 2, partial last span and chunk
  boundary_states(1, 160, 1, 128, 64, 0, GateKind::model, 0, true);    // 128 x 64 tiles, the plan's spans
  boundary_states(1, 200, 1, 256, 96, 2, GateKind::model, 0, true);    // two dk tiles, a part-filled dv tile
  boundary_states(1, 130, 1, 128, 256, 2, GateKind::model, 0, true);   // dv > 128: two 128-column tiles
  boundary_states(1, 91, 1, 100, 60, 1, GateKind::strong, 0, true);    // dk % 8 != 0: element copies, edge tiles
  boundary_states(1, 1, 1, 128, 128, 0, GateKind::model, 0, true);     // one token
}

// The emulation's tf32_bits (cuda_emu.h) against the arithmetic model, as the GPU test checks the device's: the
// emulated kernels round their operands as the GPU does.
void tf32_rounding() {
  const std::vector<float> x = gla_cuda::tf32_probe_values();
  const int n = int(x.size());
  std::vector<uint32_t> got(n);
  gla_cuda::launch_tf32_bits(x.data(), got.data(), n, nullptr);
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += !gla_cuda::tf32_matches_model(x[i], got[i]);
  expect_lt(wrong, 1, "tf32 rounding: values unlike the model");
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "quick";
  tf32_rounding();
  if (argc > 1 && std::string(argv[1]) == "states") {  // only the chunk states by spans
    states_by_spans();
    std::printf(failures ? "emu_check: %d FAILURES\n" : "emu_check: all passed\n", failures);
    return failures ? 1 : 0;
  }
  if (argc > 1 && std::string(argv[1]) == "arriving") {  // only the chunk states beside the scan
    states_beside_the_scan();
    std::printf(failures ? "emu_check: %d FAILURES\n" : "emu_check: all passed\n", failures);
    return failures ? 1 : 0;
  }
  if (argc > 1 && std::string(argv[1]) == "intra") {  // only the column tiles of chunk_output / dv
    intra_by_tiles();
    std::printf(failures ? "emu_check: %d FAILURES\n" : "emu_check: all passed\n", failures);
    return failures ? 1 : 0;
  }
  if (argc > 1 && std::string(argv[1]) == "dqk") {  // only dq/dk/dg, at each prefetch distance: 1 to 5 dv slices
    grads_at_row_stride(2, 130, 2, 16, 24, 16);   // ld % 8 == 0: 16-byte stores; B = 2, partial last chunk
    grads_at_row_stride(1, 100, 2, 20, 12, 3);    // odd ld: element stores
    grads_at_row_stride(1, 70, 1, 64, 256, 40);   // two dv tiles of 128 (the dv kernel's column tiles)
    for (int var : {1, 2, 0}) {
      gla_cuda::set_dqk_variant(var);
      composite(1, 100, 1, 20, 12, 0, false, true);  // one slice: q, k and gc in the 2nd and 3rd slot
      composite(2, 130, 2, 16, 24, 1, true, false);  // two
      composite(1, 91, 1, 13, 7, 1, true, true);     // odd sizes: element copies
      composite(1, 65, 1, 32, 48, 0, true, true);    // three
      composite(1, 100, 1, 48, 64, 2, true, true);   // four, extreme gates: the exact diagonal terms
      composite(1, 130, 1, 40, 72, 1, true, true);   // five (a part slice)
    }
    gla_cuda::set_dqk_variant(0);
    std::printf(failures ? "emu_check: %d FAILURES\n" : "emu_check: all passed\n", failures);
    return failures ? 1 : 0;
  }
  if (argc > 1 && std::string(argv[1]) == "gates") {  // only the boundary from g (the quickest check of that kernel)
    boundary_from_gates();
    std::printf(failures ? "emu_check: %d FAILURES\n" : "emu_check: all passed\n", failures);
    return failures ? 1 : 0;
  }
  helpers(1, 150, 2, 24, 40);
  composite(1, 65, 1, 32, 48, 0, true, true);
  gla_cuda::set_states_bk(32);  // the other state tile
  composite(1, 130, 1, 40, 72, 1, true, true);
  gla_cuda::set_states_bk(0);
  composite(1, 100, 1, 48, 64, 2, true, true);  // extreme gates: the exact diagonal blocks (16-feature slices)
  for (int var : {1, 2}) {  // the other variants of the A-matrix (default 4) and dq/dk/dg (default 3) kernels
    gla_cuda::set_intra_variant(var);
    gla_cuda::set_dqk_variant(var);
    composite(1, 130, 1, 40, 72, 1, true, true);
    composite(1, 100, 1, 48, 64, 2, true, true);
  }
  gla_cuda::set_intra_variant(0);
  gla_cuda::set_dqk_variant(0);
  // launch_boundary: every tile shape (BK x BN = 64/128 x 64/128/256), one span, several spans, partial chunks
  boundary_states(1, 100, 1, 64, 64, 0);     // partial last chunk; one chunk per span (the plan without a device)
  boundary_states(1, 100, 1, 64, 64, 4);     // T shorter than one span: no fold, fin written by stage 1
  boundary_states(1, 485, 1, 64, 64, 3);     // spans of 3, 3, 2 chunks, the last chunk partial (37 tokens)
  boundary_states(1, 485, 1, 128, 128, 3);   // the same at 128 x 128 tiles
  boundary_states(2, 150, 2, 128, 128, 2);   // B = H = 2, partial last span and chunk
  boundary_states(1, 130, 1, 256, 512, 0);   // 2 dk x 2 dv tiles of 128 x 256
  boundary_states(1, 91, 1, 13, 7, 1, GateKind::strong);   // odd sizes: element copies, scalar fold
  boundary_states(1, 200, 2, 40, 72, 2, GateKind::strong); // edge tiles (64 x 128), aligned copies
  boundary_states(1, 160, 1, 128, 64, 2);    // 128 x 64 tiles
  boundary_states(1, 100, 1, 64, 256, 1);    // 64 x 256 tiles
  boundary_states(1, 256, 1, 64, 64, 3);     // whole chunks only (spans of 3, 1)
  boundary_states(1, 1, 1, 64, 64, 0);       // one token
  boundary_states(1, 485, 2, 32, 64, 3);     // 32 x 64 tiles (dk <= 32, dv <= 64)
  // every variant of the boundary kernel (gla_boundary.cu: tiles, warp grids, 32/64-token steps, interleaved X~)
  for (int var = 1; var <= gla_cuda::boundary_variants(); ++var) {
    boundary_states(1, 485, 1, 128, 128, 3, GateKind::model, var);   // spans of 3, partial last chunk
    boundary_states(1, 200, 2, 40, 72, 2, GateKind::strong, var);    // edge tiles, an empty second half
    boundary_states(1, 130, 1, 128, 256, 0, GateKind::model, var);   // 128 x 256 (plain, IL: X~ after the products)
    boundary_states(1, 91, 1, 13, 7, 1, GateKind::strong, var);      // odd sizes: element copies, scalar fold
  }
  boundary_from_gates();
  states_by_spans();
  states_beside_the_scan();
  intra_by_tiles();
  if (!quick) {
    composite(1, 1, 1, 16, 24, 1, false, false);
    composite(2, 130, 2, 16, 24, 1, true, false);
    composite(1, 100, 1, 20, 12, 0, false, true);
    composite(1, 91, 1, 13, 7, 1, true, true);
    composite(1, 200, 1, 64, 64, 1, true, true);
    composite(1, 70, 1, 96, 200, 0, false, true);
    composite(1, 100, 1, 48, 64, 2, true, true);
    helpers(1, 64, 1, 13, 7);
    boundary_states(1, 70, 1, 96, 200, 1);     // part-filled 128 x 256 tile
    boundary_states(1, 300, 1, 48, 64, 2, GateKind::strong);  // strong gates over several spans
  }
  std::printf(failures ? "emu_check: %d FAILURES\n" : "emu_check: all passed\n", failures);
  return failures ? 1 : 0;
}
