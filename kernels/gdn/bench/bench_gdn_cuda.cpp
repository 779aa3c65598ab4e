// Kernel-level benchmark of the CUDA Gated DeltaNet stages (kernels/gdn/cuda/): forward ("fwd") and forward +
// backward ("fwd_bwd", the backward recomputing the forward's factors and states as the interface asks) at H = 16,
// dk = dv = 128, T = 16384 and 32768, B = 1, timed with CUDA events per iteration (5 warm-up calls, 50 timed; the
// median counts). Each configuration is also checked after timing: that run's outputs of batch 0, head 0 against the
// fp64 token loop (kernels/gdn/cpu/gdn_reference.h) on the same bf16 values, computed on a host thread while the GPU is
// timed (o < 4e-3, the rest < 5e-3). Prints a line per configuration; --csv=PATH (or $SPB_CSV) appends one row per
// (shape, pass) in the DESIGN §6 schema, as bench_gla_cuda does (method "gdn"). Also prints, unchecked, the times of
// rank_map (A and M) and initial_dstate (D) alone.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "kernels/gdn/cpu/gdn_chunked.h"
#include "kernels/gdn/cpu/gdn_reference.h"
#include "kernels/gdn/cuda/gdn_cuda.h"
#include "runtime/csv.h"
#include "runtime/cuda_check.h"
#include "runtime/device.h"
#include "runtime/provenance.h"
#include "runtime/stats.h"

namespace spb {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarmup = 5, kIters = 50;

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) {
    SPB_CUDA(cudaMalloc(&p, bytes));
    SPB_CUDA(cudaMemset(p, 0xFF, bytes));
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(DevBuf&& o) noexcept : p(o.p) { o.p = nullptr; }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  float* f() const { return static_cast<float*>(p); }
};

// Inputs as tests/kernels/gdn/test_gdn_cuda.cpp makes them (unit keys, a model's gates -softplus(u), u in (-6, 1),
// betas in (0.05, 0.95)), the activations rounded to bf16 on the host.
struct Host {
  std::vector<float> q, k, v, g, beta, d_o;
};
Host make_inputs(const GdnShape& s, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> u(-1, 1), b(0.05f, 0.95f), pre(-6.0f, 1.0f);
  Host x;
  x.q.resize(s.qk_elems()), x.k.resize(s.qk_elems()), x.v.resize(s.v_elems()), x.d_o.resize(s.v_elems());
  x.g.resize(s.gate_elems()), x.beta.resize(s.gate_elems());
  for (auto* t : {&x.q, &x.v, &x.d_o})
    for (float& e : *t) e = u(rng);
  for (float& e : x.g) e = -std::log1p(std::exp(pre(rng)));
  for (float& e : x.beta) e = b(rng);
  for (size_t r = 0; r < s.qk_elems() / size_t(s.dk); ++r) {
    float n = 0;
    for (int i = 0; i < s.dk; ++i) x.k[r * s.dk + i] = u(rng), n += x.k[r * s.dk + i] * x.k[r * s.dk + i];
    for (int i = 0; i < s.dk; ++i) x.k[r * s.dk + i] /= std::sqrt(n);
  }
  for (auto* t : {&x.q, &x.k, &x.v, &x.d_o})
    for (float& e : *t) e = __bfloat162float(__float2bfloat16(e));
  return x;
}
DevBuf upload(const std::vector<float>& x, bool as_bf16) {
  DevBuf d(x.size() * (as_bf16 ? 2 : 4));
  if (as_bf16) {
    std::vector<bf16> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16(x[i]);
    SPB_CUDA(cudaMemcpy(d.p, y.data(), y.size() * 2, cudaMemcpyHostToDevice));
  } else {
    SPB_CUDA(cudaMemcpy(d.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  }
  return d;
}
// Batch 0, head 0 of a [B, T, H, width] tensor (bf16 or fp32 on the device) as doubles.
std::vector<double> head0(const void* dev, const GdnShape& s, int width, bool is_bf16) {
  const size_t n = size_t(s.T) * s.H * width;
  std::vector<double> out(size_t(s.T) * width);
  if (is_bf16) {
    std::vector<bf16> y(n);
    SPB_CUDA(cudaMemcpy(y.data(), dev, n * 2, cudaMemcpyDeviceToHost));
    for (int t = 0; t < s.T; ++t)
      for (int i = 0; i < width; ++i) out[size_t(t) * width + i] = __bfloat162float(y[size_t(t) * s.H * width + i]);
  } else {
    std::vector<float> y(n);
    SPB_CUDA(cudaMemcpy(y.data(), dev, n * 4, cudaMemcpyDeviceToHost));
    for (int t = 0; t < s.T; ++t)
      for (int i = 0; i < width; ++i) out[size_t(t) * width + i] = y[size_t(t) * s.H * width + i];
  }
  return out;
}
std::vector<double> head0_of_host(const std::vector<float>& x, const GdnShape& s, int width) {
  std::vector<double> out(size_t(s.T) * width);
  for (int t = 0; t < s.T; ++t)
    for (int i = 0; i < width; ++i) out[size_t(t) * width + i] = x[size_t(t) * s.H * width + i];
  return out;
}
std::vector<double> state0(const float* dev, const GdnShape& s) {
  std::vector<float> y(size_t(s.dk) * s.dv);
  SPB_CUDA(cudaMemcpy(y.data(), dev, y.size() * 4, cudaMemcpyDeviceToHost));
  return std::vector<double>(y.begin(), y.end());
}
// kWarmup untimed calls of fn, then kIters each between two CUDA events on cs: their times' summary (ms).
template <class Fn>
Summary time_on(cudaStream_t cs, Fn&& fn, bool sync_after_warmup) {
  for (int i = 0; i < kWarmup; ++i) fn();
  if (sync_after_warmup) SPB_CUDA(cudaStreamSynchronize(cs));
  cudaEvent_t e0, e1;
  SPB_CUDA(cudaEventCreate(&e0));
  SPB_CUDA(cudaEventCreate(&e1));
  std::vector<double> ms;
  for (int i = 0; i < kIters; ++i) {
    SPB_CUDA(cudaEventRecord(e0, cs));
    fn();
    SPB_CUDA(cudaEventRecord(e1, cs));
    SPB_CUDA(cudaEventSynchronize(e1));
    float m = 0;
    SPB_CUDA(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
  }
  SPB_CUDA(cudaEventDestroy(e0));
  SPB_CUDA(cudaEventDestroy(e1));
  return summarize(ms);
}

double rel_rms(const std::vector<double>& ref, const std::vector<double>& x) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) num += (ref[i] - x[i]) * (ref[i] - x[i]), den += ref[i] * ref[i];
  const double e = std::sqrt(num / std::max(den, 1e-300));
  return std::isnan(e) ? INFINITY : e;
}

int run(const std::string& csv) {
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_gdn_kernels();
  cudaStream_t cs = nullptr;
  SPB_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  int bad = 0;
  for (const int T : {16384, 32768}) {
    const GdnShape s{1, T, 16, 128, 128};
    const Host x = make_inputs(s, 77 + T);
    const DevBuf q = upload(x.q, true), k = upload(x.k, true), v = upload(x.v, true), d_o = upload(x.d_o, true);
    const DevBuf g = upload(x.g, false), beta = upload(x.beta, false);
    DevBuf o(s.v_elems() * 2), ht(s.state_elems() * 4), dq(s.qk_elems() * 2), dk(s.qk_elems() * 2);
    DevBuf dv(s.v_elems() * 2), dg(s.gate_elems() * 4), dbeta(s.gate_elems() * 4), dh0(s.state_elems() * 4);
    GdnShape s1 = s;
    s1.H = 1;
    // shared: both passes read it (a plain future's get() may be called once)
    std::shared_future<GdnReferenceResult> ref = std::async(std::launch::async, [&] {
      return gdn_reference(s1, head0_of_host(x.q, s, s.dk), head0_of_host(x.k, s, s.dk), head0_of_host(x.v, s, s.dv),
                           head0_of_host(x.g, s, 1), head0_of_host(x.beta, s, 1), {}, head0_of_host(x.d_o, s, s.dv),
                           {});
    });
    // The boundary stages alone (printed, no rows): the rank map (A and M) and D.
    DevBuf A(s.transition_elems() * 4), M(s.state_elems() * 4), D(s.state_elems() * 4);
    for (const bool map : {true, false}) {
      auto stage = [&] {
        if (map) kern->rank_map(s, k.p, v.p, g.f(), beta.f(), A.f(), M.f(), Stream{cs});
        else kern->initial_dstate(s, q.p, k.p, g.f(), beta.f(), d_o.p, D.f(), Stream{cs});
      };
      const Summary t = time_on(cs, stage, /*sync_after_warmup=*/false);
      std::printf("gdn cuda B%d T%d H%d dk%d dv%d %-14s median %.3f ms (mean %.3f, min %.3f, max %.3f) [not checked]\n",
                  s.B, s.T, s.H, s.dk, s.dv, map ? "rank_map" : "initial_dstate", t.median, t.mean, t.min, t.max);
    }
    for (const bool bwd : {false, true}) {
      auto pass = [&] {
        kern->forward(s, q.p, k.p, v.p, g.f(), beta.f(), nullptr, o.p, ht.f(), Stream{cs});
        if (bwd)
          kern->backward(s, q.p, k.p, v.p, g.f(), beta.f(), nullptr, d_o.p, nullptr, dq.p, dk.p, dv.p, dg.f(),
                         dbeta.f(), dh0.f(), Stream{cs});
      };
      const Summary t = time_on(cs, pass, /*sync_after_warmup=*/true);
      const GdnReferenceResult& r = ref.get();
      std::vector<std::pair<std::string, double>> errs = {
          {"o", rel_rms(r.o, head0(o.p, s, s.dv, true))}, {"ht", rel_rms(r.ht, state0(ht.f(), s))}};
      if (bwd) {
        errs.push_back({"dq", rel_rms(r.dq, head0(dq.p, s, s.dk, true))});
        errs.push_back({"dk", rel_rms(r.dk, head0(dk.p, s, s.dk, true))});
        errs.push_back({"dv", rel_rms(r.dv, head0(dv.p, s, s.dv, true))});
        errs.push_back({"dg", rel_rms(r.dg, head0(dg.p, s, 1, false))});
        errs.push_back({"dbeta", rel_rms(r.dbeta, head0(dbeta.p, s, 1, false))});
        errs.push_back({"dh0", rel_rms(r.dh0, state0(dh0.f(), s))});
      }
      double err = 0;
      bool ok = true;
      for (auto& [what, e] : errs) err = std::max(err, e), ok = ok && e < (what == "o" ? 4e-3 : 5e-3);
      bad += !ok;
      std::printf("gdn cuda B%d T%d H%d dk%d dv%d %-7s median %.3f ms (mean %.3f, min %.3f, max %.3f, cv %.3f) "
                  "err %.2e%s:", s.B, s.T, s.H, s.dk, s.dv, bwd ? "fwd_bwd" : "fwd", t.median, t.mean, t.min, t.max,
                  t.cv, err, ok ? "" : " FAILS THE BARS");
      for (auto& [what, e] : errs) std::printf(" %s %.2e", what.c_str(), e);
      std::printf("\n");
      std::fflush(stdout);
      if (!csv.empty()) {
        CsvAppender app(csv);
        ResultRow row;
        row.set("level", "kernel").set("method", "gdn").set("backend", "cuda").set("world_size", 1);
        row.set("batch", s.B).set("heads", s.H).set("dk", s.dk).set("dv", s.dv).set("tokens_per_rank", s.T);
        row.set("block_elems", 0).set("dtype", "bf16").set("pass", bwd ? "fwd_bwd" : "fwd");
        row.set("time_ms_mean", t.mean).set("time_ms_median", t.median).set("time_ms_min", t.min);
        row.set("time_ms_max", t.max).set("time_ms_cv", t.cv).set("err_rel_rms", err);
        row.set("chunk", kGdnChunk).set("warmup", kWarmup).set("iters", kIters);
        add_provenance(row, *dev);
        if (app.contains(row))
          std::printf("csv: a row for this configuration, commit and GPU is already in %s; not appended\n", csv.c_str());
        else
          app.append(row);
      }
    }
  }
  SPB_CUDA(cudaStreamDestroy(cs));
  return bad ? 1 : 0;
}

}  // namespace
}  // namespace spb

int main(int argc, char** argv) {
  std::string csv;
  if (const char* env = std::getenv("SPB_CSV")) csv = env;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--csv=", 6) == 0) {
      csv = argv[i] + 6;
    } else {
      std::fprintf(stderr, "usage: bench_gdn_cuda [--csv=PATH]\n");
      return 2;
    }
  }
  try {
    return spb::run(csv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gdn_cuda: %s\n", e.what());
    return 1;
  }
}
