#include "sp/sp_run.h"

#include <algorithm>

#include "runtime/stats.h"
#include "kernels/gla/gla.h"

namespace spb {

DeviceTensors::DeviceTensors(Device& dev, const GlaShape& s, DType t) {
    const size_t a = dtype_size(t), qk = s.qk_elems() * a, vb = s.v_elems() * a, st = s.state_elems() * 4;
    q = Buffer(dev, qk), k = Buffer(dev, qk), v = Buffer(dev, vb), g = Buffer(dev, qk), o = Buffer(dev, vb);
    d_o = Buffer(dev, vb), dq = Buffer(dev, qk), dk = Buffer(dev, qk), dv = Buffer(dev, vb), dg = Buffer(dev, qk);
    h0 = Buffer(dev, st), dht = Buffer(dev, st), h_out = Buffer(dev, st), dh_in = Buffer(dev, st);
}

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
  r.dv = act(d.dv, s.v_elems()), r.dg = act(d.dg, s.qk_elems());
  r.ht = f32(d.h_out), r.dh0 = f32(d.dh_in);
  return r;
}

void upload_inputs(Device& dev, DType t, DeviceTensors& d, const HostTensors& x) {
  dev.upload_as(d.q.get(), t, x.q.data(), x.q.size());
  dev.upload_as(d.k.get(), t, x.k.data(), x.k.size());
  dev.upload_as(d.v.get(), t, x.v.data(), x.v.size());
  dev.upload_as(d.g.get(), t, x.g.data(), x.g.size());
  dev.upload_as(d.d_o.get(), t, x.d_o.data(), x.d_o.size());
  if (!x.h0.empty()) dev.upload(d.h0.get(), x.h0.data(), x.h0.size() * 4);
  if (!x.dht.empty()) dev.upload(d.dht.get(), x.dht.data(), x.dht.size() * 4);
}

// The single-device forward+backward of `x` on this rank's device: the reference of the check.
HostResult single_device(Runtime& rt, const GlaShape& s, const HostTensors& x) {
  const DType t = rt.kern->act_dtype();
  DeviceTensors d(*rt.dev, s, t);
  upload_inputs(*rt.dev, t, d, x);
  GlaWorkspace ws(*rt.dev, *rt.kern, s);
  const float* h0 = x.h0.empty() ? nullptr : d.h0.f32();
  const float* dht = x.dht.empty() ? nullptr : d.dht.f32();
  const Stream st = rt.dev->compute_stream();
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
  l.g = slice_tokens(x.g, whole.B, whole.T, rk, t0, t1);
  l.d_o = slice_tokens(x.d_o, whole.B, whole.T, rv, t0, t1);
  l.h0 = x.h0, l.dht = x.dht, l.do_generated = x.do_generated;
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
  s.dg = slice_tokens(r.dg, whole.B, whole.T, rk, t0, t1);
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
  e.ht = boot.max(has_ht ? rel_rms_error(ref.ht, x.ht, ref.ht.size()) : 0.0);
  e.dh0 = boot.max(has_dh0 ? rel_rms_error(ref.dh0, x.dh0, ref.dh0.size()) : 0.0);
  return e;
}

SpForwardArgs forward_args(DeviceTensors& d, const HostTensors& x) {
  SpForwardArgs fa;
  fa.q = d.q.get(), fa.k = d.k.get(), fa.v = d.v.get(), fa.g = d.g.get();
  fa.h0 = x.h0.empty() ? nullptr : d.h0.f32();
  fa.o = d.o.get(), fa.h_out = d.h_out.f32();
  return fa;
}

SpBackwardArgs backward_args(DeviceTensors& d, const HostTensors& x) {
  SpBackwardArgs ba;
  ba.d_o = d.d_o.get(), ba.dht = x.dht.empty() ? nullptr : d.dht.f32();
  ba.dq = d.dq.get(), ba.dk = d.dk.get(), ba.dv = d.dv.get(), ba.dg = d.dg.get(), ba.dh_in = d.dh_in.f32();
  return ba;
}

void poison_outputs(Device& dev, DeviceTensors& d) {
  for (Buffer* b : {&d.o, &d.dq, &d.dk, &d.dv, &d.dg, &d.h_out, &d.dh_in}) {
    const std::vector<unsigned char> nan(b->bytes(), 0xFF);  // NaN in fp32 and in bf16
    dev.upload(b->get(), nan.data(), b->bytes());
  }
}

}  // namespace spb
