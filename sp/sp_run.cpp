#include "sp/sp_run.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/stats.h"
#include "kernels/gla/gla.h"

namespace spb {

DeviceTensors::DeviceTensors(Device& dev, const GlaShape& s, DType t, Attention a) : attention(a) {
  const size_t e = dtype_size(t), qk = s.qk_elems() * e, vb = s.v_elems() * e, st = s.state_elems() * 4;
  // GLA's gates are activations; Gated DeltaNet's one fp32 per token and head, as its betas.
  const size_t gates = a == Attention::gdn ? size_t(s.B) * s.T * s.H * 4 : qk;
  q = Buffer(dev, qk), k = Buffer(dev, qk), v = Buffer(dev, vb), g = Buffer(dev, gates), o = Buffer(dev, vb);
  d_o = Buffer(dev, vb), dq = Buffer(dev, qk), dk = Buffer(dev, qk), dv = Buffer(dev, vb), dg = Buffer(dev, gates);
  if (a == Attention::gdn) beta = Buffer(dev, gates), dbeta = Buffer(dev, gates);
  h0 = Buffer(dev, st), dht = Buffer(dev, st), h_out = Buffer(dev, st), dh_in = Buffer(dev, st);
}

namespace {
// The type GLA's gates or Gated DeltaNet's (fp32) have on the device.
DType gate_type(const DeviceTensors& d, DType act) { return d.attention == Attention::gdn ? DType::f32 : act; }
}  // namespace

HostResult download_result(Device& dev, DType t, const GlaShape& s, DeviceTensors& d) {
  HostResult r;
  auto act = [&](Buffer& b, size_t n) {
    std::vector<float> x(n);
    dev.download_as(x.data(), b.get(), t, n);
    return x;
  };
  auto f32 = [&](Buffer& b) {
    std::vector<float> x(s.state_elems());
    dev.download(x.data(), b.get(), x.size() * 4);
    return x;
  };
  r.o = act(d.o, s.v_elems()), r.dq = act(d.dq, s.qk_elems()), r.dk = act(d.dk, s.qk_elems());
  r.dv = act(d.dv, s.v_elems());
  const size_t gates = size_t(s.B) * s.T * gate_row(s, d.attention);
  std::vector<float> dg(gates);
  dev.download_as(dg.data(), d.dg.get(), gate_type(d, t), gates);
  r.dg = std::move(dg);
  if (d.attention == Attention::gdn) {
    r.dbeta.resize(gates);
    dev.download(r.dbeta.data(), d.dbeta.get(), gates * 4);
  }
  r.ht = f32(d.h_out), r.dh0 = f32(d.dh_in);
  return r;
}

void upload_inputs(Device& dev, DType t, DeviceTensors& d, const HostTensors& x) {
  dev.upload_as(d.q.get(), t, x.q.data(), x.q.size());
  dev.upload_as(d.k.get(), t, x.k.data(), x.k.size());
  dev.upload_as(d.v.get(), t, x.v.data(), x.v.size());
  dev.upload_as(d.g.get(), gate_type(d, t), x.g.data(), x.g.size());
  if (!x.beta.empty()) dev.upload(d.beta.get(), x.beta.data(), x.beta.size() * 4);
  dev.upload_as(d.d_o.get(), t, x.d_o.data(), x.d_o.size());
  if (!x.h0.empty()) dev.upload(d.h0.get(), x.h0.data(), x.h0.size() * 4);
  if (!x.dht.empty()) dev.upload(d.dht.get(), x.dht.data(), x.dht.size() * 4);
}

// The single-device forward+backward of `x` on this rank's device: the reference of the check.
HostResult single_device(Runtime& rt, const GlaShape& s, const HostTensors& x) {
  const DType t = rt.kern->act_dtype();
  DeviceTensors d(*rt.dev, s, t, x.attention);
  upload_inputs(*rt.dev, t, d, x);
  const float* h0 = x.h0.empty() ? nullptr : d.h0.f32();
  const float* dht = x.dht.empty() ? nullptr : d.dht.f32();
  const Stream st = rt.dev->compute_stream();
  if (x.attention == Attention::gdn) {
    SPB_USAGE(rt.gdn, "--attention gdn: the " + rt.backend + " backend has no Gated DeltaNet kernels");
    const GdnShape gs{s.B, s.T, s.H, s.dk, s.dv};
    rt.gdn->forward(gs, d.q.get(), d.k.get(), d.v.get(), d.g.f32(), d.beta.f32(), h0, d.o.get(), d.h_out.f32(), st);
    rt.gdn->backward(gs, d.q.get(), d.k.get(), d.v.get(), d.g.f32(), d.beta.f32(), h0, d.d_o.get(), dht, d.dq.get(),
                     d.dk.get(), d.dv.get(), d.dg.f32(), d.dbeta.f32(), d.dh_in.f32(), st);
    rt.dev->synchronize();
    return download_result(*rt.dev, t, s, d);
  }
  GlaWorkspace ws(*rt.dev, *rt.kern, s);
  gla_forward(*rt.kern, ws, d.q.get(), d.k.get(), d.v.get(), d.g.get(), h0, d.o.get(), d.h_out.f32(), st);
  // The recomputing backward, while the methods reuse the forward's states: the check covers both paths.
  gla_backward(*rt.kern, ws, d.q.get(), d.k.get(), d.v.get(), d.g.get(), h0, d.d_o.get(), dht, d.dq.get(), d.dk.get(),
               d.dv.get(), d.dg.get(), d.dh_in.f32(), st);
  rt.dev->synchronize();
  return download_result(*rt.dev, t, s, d);
}

HostTensors local_slice(const HostTensors& x, const GlaShape& whole, int t0, int t1) {
  HostTensors l;
  const size_t rk = size_t(whole.H) * whole.dk, rv = size_t(whole.H) * whole.dv;
  l.q = slice_tokens(x.q, whole.B, whole.T, rk, t0, t1);
  l.k = slice_tokens(x.k, whole.B, whole.T, rk, t0, t1);
  l.v = slice_tokens(x.v, whole.B, whole.T, rv, t0, t1);
  l.g = slice_tokens(x.g, whole.B, whole.T, gate_row(whole, x.attention), t0, t1);
  if (!x.beta.empty()) l.beta = slice_tokens(x.beta, whole.B, whole.T, size_t(whole.H), t0, t1);
  l.d_o = slice_tokens(x.d_o, whole.B, whole.T, rv, t0, t1);
  l.attention = x.attention, l.h0 = x.h0, l.dht = x.dht, l.do_generated = x.do_generated;
  return l;
}

// Tokens [t0, t1) of every [B, T, H, D] tensor of the single-device result (ht and dh0 stay whole).
HostResult slice_result(const HostResult& r, const GlaShape& whole, int t0, int t1) {
  const size_t rk = size_t(whole.H) * whole.dk, rv = size_t(whole.H) * whole.dv;
  HostResult s;
  s.o = slice_tokens(r.o, whole.B, whole.T, rv, t0, t1);
  s.dq = slice_tokens(r.dq, whole.B, whole.T, rk, t0, t1);
  s.dk = slice_tokens(r.dk, whole.B, whole.T, rk, t0, t1);
  s.dv = slice_tokens(r.dv, whole.B, whole.T, rv, t0, t1);
  // The gates' rows: GLA's H * dk, Gated DeltaNet's H (beside its betas').
  const size_t rg = r.dbeta.empty() ? rk : size_t(whole.H);
  s.dg = slice_tokens(r.dg, whole.B, whole.T, rg, t0, t1);
  if (!r.dbeta.empty()) s.dbeta = slice_tokens(r.dbeta, whole.B, whole.T, rg, t0, t1);
  s.ht = r.ht, s.dh0 = r.dh0;
  return s;
}

// Every rank's tensors against the reference; ht is checked where the method defines it (the last rank, or every rank
// for independent sequences), dh0 likewise on rank 0. Max over ranks.
Errors compare(const Bootstrap& boot, const HostResult& ref, const HostResult& x, bool independent) {
  Errors e;
  auto err = [&](const std::vector<float>& a, const std::vector<float>& b) {
    return boot.max(rel_rms_error(a, b, a.size()));
  };
  const bool has_ht = independent || boot.rank() == boot.size() - 1, has_dh0 = independent || boot.rank() == 0;
  e.o = err(ref.o, x.o), e.dq = err(ref.dq, x.dq), e.dk = err(ref.dk, x.dk), e.dv = err(ref.dv, x.dv);
  e.dg = err(ref.dg, x.dg);
  e.dbeta = err(ref.dbeta, x.dbeta);  // (0 where both are empty: GLA)
  e.ht = boot.max(has_ht ? rel_rms_error(ref.ht, x.ht, ref.ht.size()) : 0.0);
  e.dh0 = boot.max(has_dh0 ? rel_rms_error(ref.dh0, x.dh0, ref.dh0.size()) : 0.0);
  return e;
}

SpForwardArgs forward_args(DeviceTensors& d, const HostTensors& x) {
  SpForwardArgs fa;
  fa.q = d.q.get(), fa.k = d.k.get(), fa.v = d.v.get(), fa.g = d.g.get(), fa.beta = d.beta.f32();
  fa.h0 = x.h0.empty() ? nullptr : d.h0.f32();
  fa.o = d.o.get(), fa.h_out = d.h_out.f32();
  return fa;
}

SpBackwardArgs backward_args(DeviceTensors& d, const HostTensors& x) {
  SpBackwardArgs ba;
  ba.d_o = d.d_o.get(), ba.dht = x.dht.empty() ? nullptr : d.dht.f32();
  ba.dq = d.dq.get(), ba.dk = d.dk.get(), ba.dv = d.dv.get(), ba.dg = d.dg.get(), ba.dh_in = d.dh_in.f32();
  ba.dbeta = d.dbeta.f32();
  return ba;
}

void poison_outputs(Device& dev, DeviceTensors& d) {
  for (Buffer* b : {&d.o, &d.dq, &d.dk, &d.dv, &d.dg, &d.dbeta, &d.h_out, &d.dh_in}) {
    if (!b->get()) continue;  // (GLA has no dbeta)
    const std::vector<unsigned char> nan(b->bytes(), 0xFF);  // NaN in fp32 and in bf16
    dev.upload(b->get(), nan.data(), b->bytes());
  }
}

}  // namespace spb
