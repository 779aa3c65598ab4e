// Kernel-level benchmark of the CUDA GLA stages: gla_forward ("fwd") and gla_forward + gla_backward ("fwd_bwd") at the
// paper's operator shapes and GLA-1B's layer shapes, timed with CUDA events (Google Benchmark manual time; the median
// over the iterations is the number that counts), with TFLOP/s and GB/s against the FLOPs and bytes counted for the
// pass (see flops_of / bytes_of and NOTES.md) and as fractions of two measured ceilings: a large device-to-device copy
// and a large cuBLAS bf16 GEMM.
//
// Every timed configuration is also checked: after timing, that same run's outputs are compared with the fp64
// token-loop reference (kernels/gla/cpu/gla_reference.h) on batch 0, head 0 only -- the full fp64 reference at these sizes
// (16 heads x 16K tokens x a 128x128 state per token, stored for the backward) is far too slow and too large; one head
// already takes seconds and gigabytes. The references run on host threads while the GPU is being timed.
//
// --csv=PATH (or the environment variable SPB_CSV) appends one row per (shape, pass) in the DESIGN §6 schema.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/device.h"
#include "runtime/stats.h"
#include "kernels/gla/cpu/gla_reference.h"
#include "kernels/gla/cuda/gla_cuda.h"
#include "kernels/gla/cuda/gla_cuda_internal.h"
#include "kernels/gla/gla.h"

#if SPB_BENCH_CSV
#include "runtime/csv.h"
#include "runtime/provenance.h"
#else
#include <fstream>
#endif

namespace spb {
namespace {

using bf16 = __nv_bfloat16;

struct BenchShape {
  int B, T, H, dk, dv;
  double target_fwd_ms, target_fwd_bwd_ms;  // 0: no target
};
const BenchShape kShapes[] = {
    {1, 16384, 16, 128, 128, 0.70, 2.9},
    {1, 32768, 16, 128, 128, 0.0, 5.8},
    {1, 16384, 4, 256, 512, 0.0, 2.6},
    {1, 16384, 32, 32, 64, 0.0, 0.0},  // a GLA-1B layer with 32 heads
};

// ---- what a pass must do -------------------------------------------------------------------------------------------
// FLOPs (2 per multiply-add), per (b, h) and chunk of C tokens, D = dk, E = dv, counting only the causal half of the
// in-chunk products:
//   states (fwd or bwd): 2CDE;  output: 2CDE + C^2 D + C^2 E;  grads: 6CDE + 3 C^2 D + 2 C^2 E
//   fwd = states + output;  fwd_bwd = fwd + states_fwd + states_bwd + grads (gla_backward recomputes the states).
// f run with a tuning override (gla_cuda::set_*) at `value`, the override put back to `reset` (its default) after.
std::function<void()> with_override(void (*set)(int), int value, std::function<void()> f, int reset = 0) {
  return [set, value, f, reset] {
    set(value);
    f();
    set(reset);
  };
}

double flops_of(const GlaShape& s, bool bwd) {
  const double C = kChunk, D = s.dk, E = s.dv, n = double(s.B) * s.H * s.chunks();
  const double states = 2 * C * D * E, output = 2 * C * D * E + C * C * (D + E);
  const double grads = 6 * C * D * E + 3 * C * C * D + 2 * C * C * E;
  return n * (bwd ? 3 * states + output + grads : states + output);
}
// Bytes: each stage reads each of its inputs once and writes each output once (bf16 activations, fp32 gc and
// boundary states, the chunk states hs / dhs of HS bytes each: chunk_state_bytes, in the kernels' chunk_state_type()).
double bytes_of(const GlaShape& s, bool bwd, double HS) {
  const double TD = double(s.B) * s.T * s.H * s.dk, TE = double(s.B) * s.T * s.H * s.dv;
  const double ST = double(s.state_elems()) * 4;
  const double cumsum = 2 * TD + 4 * TD;
  const double states_fwd = 2 * TD + 2 * TE + 4 * TD + HS + ST;
  const double output = 4 * TD + 2 * TE + 4 * TD + HS + 2 * TE;
  const double states_bwd = 2 * TD + 2 * TE + 4 * TD + HS + ST;
  const double grads = 4 * TD + 4 * TE + 4 * TD + 2 * HS + ST + 6 * TD + 2 * TE;
  const double fwd = cumsum + states_fwd + output;
  return bwd ? fwd + cumsum + states_fwd + states_bwd + grads : fwd;
}

// ---- inputs on the GPU -----------------------------------------------------------------------------------------------
__device__ __host__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// randn (kind 0), GLA's gate logsigmoid(randn) / 16 (kind 1), or uniform in [-1, 1) (kind 2); rounded to bf16.
__global__ void fill_kernel(bf16* out, size_t n, uint64_t seed, int kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint64_t a = splitmix64(seed ^ (2 * i)), b = splitmix64(seed ^ (2 * i + 1));
    const float u1 = (float(a >> 40) + 0.5f) * 0x1.0p-24f, u2 = float(b >> 40) * 0x1.0p-24f;
    float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    if (kind == 1) z = (z >= 0.f ? -log1pf(expf(-z)) : z - log1pf(expf(z))) / 16.f;
    if (kind == 2) z = 2.f * u2 - 1.f;
    out[i] = __float2bfloat16(z);
  }
}
void fill(void* p, size_t n, uint64_t seed, int kind) {
  fill_kernel<<<1024, 256>>>(static_cast<bf16*>(p), n, seed, kind);
  SPB_CUDA_LAUNCH();
}

// Head (b = 0, h = 0) of a [B, T, H, D] bf16 tensor, as floats.
std::vector<float> head0(const void* dev, const GlaShape& s, int D) {
  std::vector<bf16> tmp(size_t(s.T) * D);
  SPB_CUDA(cudaDeviceSynchronize());
  SPB_CUDA(cudaMemcpy2D(tmp.data(), size_t(D) * 2, dev, size_t(s.H) * D * 2, size_t(D) * 2, s.T,
                        cudaMemcpyDeviceToHost));
  std::vector<float> out(tmp.size());
  for (size_t i = 0; i < tmp.size(); ++i) out[i] = __bfloat162float(tmp[i]);
  return out;
}
std::vector<float> state0(const float* dev, const GlaShape& s) {
  std::vector<float> out(size_t(s.dk) * s.dv);
  SPB_CUDA(cudaDeviceSynchronize());
  SPB_CUDA(cudaMemcpy(out.data(), dev, out.size() * 4, cudaMemcpyDeviceToHost));
  return out;
}

struct Problem {
  BenchShape bs;
  GlaShape s;
  std::unique_ptr<GlaWorkspace> ws;
  Buffer q, k, v, g, d_o, o, ht, dq, dk, dv, dg, dh0;
  std::shared_future<GlaReferenceResult> ref;  // head 0, fp64
};

struct Result {
  std::string shape, pass;
  Summary t;
  double flops, bytes, err, target;
  std::vector<std::pair<std::string, double>> errs;
};

Device* g_dev = nullptr;
GlaKernels* g_kern = nullptr;
double g_copy_gbs = 0, g_gemm_tflops = 0;
std::vector<std::unique_ptr<Problem>> g_problems;
std::vector<Result> g_results;
std::string g_csv;

std::string shape_name(const GlaShape& s) {
  return "B" + std::to_string(s.B) + "_T" + std::to_string(s.T) + "_H" + std::to_string(s.H) + "_dk" +
         std::to_string(s.dk) + "_dv" + std::to_string(s.dv);
}

std::unique_ptr<Problem> make_problem(const BenchShape& bs, uint64_t seed) {
  auto p = std::make_unique<Problem>();
  p->bs = bs;
  p->s.B = bs.B, p->s.T = bs.T, p->s.H = bs.H, p->s.dk = bs.dk, p->s.dv = bs.dv;
  const GlaShape& s = p->s;
  Device& dev = *g_dev;
  const size_t QK = s.qk_elems() * 2, V = s.v_elems() * 2, S = s.state_elems() * 4;
  p->q = Buffer(dev, QK), p->k = Buffer(dev, QK), p->v = Buffer(dev, V), p->g = Buffer(dev, QK);
  p->d_o = Buffer(dev, V), p->o = Buffer(dev, V), p->ht = Buffer(dev, S);
  p->dq = Buffer(dev, QK), p->dk = Buffer(dev, QK), p->dv = Buffer(dev, V), p->dg = Buffer(dev, QK);
  p->dh0 = Buffer(dev, S);
  p->ws = std::make_unique<GlaWorkspace>(dev, *g_kern, s);
  fill(p->q.get(), s.qk_elems(), seed * 16 + 1, 0);
  fill(p->k.get(), s.qk_elems(), seed * 16 + 2, 0);
  fill(p->v.get(), s.v_elems(), seed * 16 + 3, 0);
  fill(p->g.get(), s.qk_elems(), seed * 16 + 4, 1);
  fill(p->d_o.get(), s.v_elems(), seed * 16 + 5, 0);
  // The reference of head 0 on a host thread, from the exact bf16 values the GPU sees.
  GlaShape s1 = s;
  s1.B = 1, s1.H = 1;
  auto q0 = head0(p->q.get(), s, s.dk), k0 = head0(p->k.get(), s, s.dk), g0 = head0(p->g.get(), s, s.dk);
  auto v0 = head0(p->v.get(), s, s.dv), do0 = head0(p->d_o.get(), s, s.dv);
  p->ref = std::async(std::launch::async, [=] { return gla_reference(s1, q0, k0, v0, g0, {}, do0, {}); }).share();
  return p;
}

void run_pass(Problem& p, bool bwd, Stream st) {
  GlaWorkspace& ws = *p.ws;
  gla_forward(*g_kern, ws, p.q.get(), p.k.get(), p.v.get(), p.g.get(), nullptr, p.o.get(), p.ht.f32(), st);
  // The backward reuses the gc and chunk states the forward saved (gla_backward_saved), as the SP methods do.
  if (bwd)
    gla_backward_saved(*g_kern, ws, p.q.get(), p.k.get(), p.v.get(), p.ht.f32(), p.d_o.get(), nullptr, p.dq.get(),
                       p.dk.get(), p.dv.get(), p.dg.get(), p.dh0.f32(), st);
}

void write_csv(const Problem& p, const Result& r, int warmup, int iters) {
  if (g_csv.empty()) return;
#if SPB_BENCH_CSV
  CsvAppender app(g_csv);
  ResultRow row;
  row.set("level", "kernel").set("method", "gla").set("backend", "cuda").set("world_size", 1);
  row.set("batch", p.s.B).set("heads", p.s.H).set("dk", p.s.dk).set("dv", p.s.dv).set("tokens_per_rank", p.s.T);
  row.set("block_elems", 0).set("dtype", "bf16").set("pass", r.pass);
  row.set("time_ms_mean", r.t.mean).set("time_ms_median", r.t.median).set("time_ms_min", r.t.min);
  row.set("time_ms_max", r.t.max).set("time_ms_cv", r.t.cv).set("err_rel_rms", r.err);
  row.set("chunk", kChunk).set("warmup", warmup).set("iters", iters);
  add_provenance(row, *g_dev);
  if (app.contains(row)) {
    std::printf("csv: a row for %s %s of this commit and GPU is already in %s; not appended\n", r.shape.c_str(),
                r.pass.c_str(), g_csv.c_str());
    return;
  }
  app.append(row);
#else
  // Built without the harness (no CsvAppender): the DESIGN §6 columns, written plainly.
  const bool fresh = !std::ifstream(g_csv).good();
  std::ofstream out(g_csv, std::ios::app);
  if (fresh)
    out << "level,method,backend,world_size,batch,heads,dk,dv,tokens_per_rank,block_elems,dtype,pass,time_ms_mean,"
           "time_ms_median,time_ms_min,time_ms_max,err_rel_rms,tokens_per_s_per_gpu,gpu,git_sha,date\n";
  out << "kernel,gla,cuda,1," << p.s.B << "," << p.s.H << "," << p.s.dk << "," << p.s.dv << "," << p.s.T << ",0,bf16,"
      << r.pass << "," << r.t.mean << "," << r.t.median << "," << r.t.min << "," << r.t.max << "," << r.err << ",,"
      << g_dev->name() << ",unknown,\n";
  (void)warmup, (void)iters;
#endif
}

void bm_gla(benchmark::State& state, Problem* p, bool bwd) {
  constexpr int kWarmup = 5;
  const Stream st = g_dev->compute_stream();
  cudaStream_t cs = static_cast<cudaStream_t>(st.handle);
  // Poison the outputs: anything the pass does not write stays NaN and fails the check below.
  for (Buffer* b : {&p->o, &p->ht, &p->dq, &p->dk, &p->dv, &p->dg, &p->dh0})
    SPB_CUDA(cudaMemset(b->get(), 0xFF, b->bytes()));
  SPB_CUDA(cudaDeviceSynchronize());
  for (int i = 0; i < kWarmup; ++i) run_pass(*p, bwd, st);
  SPB_CUDA(cudaStreamSynchronize(cs));
  cudaEvent_t e0, e1;
  SPB_CUDA(cudaEventCreate(&e0));
  SPB_CUDA(cudaEventCreate(&e1));
  std::vector<double> ms;
  for (auto _ : state) {
    SPB_CUDA(cudaEventRecord(e0, cs));
    run_pass(*p, bwd, st);
    SPB_CUDA(cudaEventRecord(e1, cs));
    SPB_CUDA(cudaEventSynchronize(e1));
    float m = 0;
    SPB_CUDA(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
    state.SetIterationTime(m * 1e-3);
  }
  SPB_CUDA(cudaEventDestroy(e0));
  SPB_CUDA(cudaEventDestroy(e1));

  Result r;
  r.shape = shape_name(p->s);
  r.pass = bwd ? "fwd_bwd" : "fwd";
  r.t = summarize(ms);
  r.flops = flops_of(p->s, bwd);
  r.bytes = bytes_of(p->s, bwd, double(chunk_state_bytes(*g_kern, p->s)));
  r.target = bwd ? p->bs.target_fwd_bwd_ms : p->bs.target_fwd_ms;
  // The check: this run's outputs, head 0, against the fp64 reference.
  const GlaReferenceResult& ref = p->ref.get();
  const GlaShape& s = p->s;
  const size_t TD = size_t(s.T) * s.dk, TE = size_t(s.T) * s.dv, SS = size_t(s.dk) * s.dv;
  r.errs.push_back({"o", rel_rms_error(ref.o, head0(p->o.get(), s, s.dv), TE)});
  r.errs.push_back({"ht", rel_rms_error(ref.ht, state0(p->ht.f32(), s), SS)});
  if (bwd) {
    r.errs.push_back({"dq", rel_rms_error(ref.dq, head0(p->dq.get(), s, s.dk), TD)});
    r.errs.push_back({"dk", rel_rms_error(ref.dk, head0(p->dk.get(), s, s.dk), TD)});
    r.errs.push_back({"dv", rel_rms_error(ref.dv, head0(p->dv.get(), s, s.dv), TE)});
    r.errs.push_back({"dg", rel_rms_error(ref.dg, head0(p->dg.get(), s, s.dk), TD)});
    r.errs.push_back({"dh0", rel_rms_error(ref.dh0, state0(p->dh0.f32(), s), SS)});
  }
  r.err = 0;
  for (auto& e : r.errs) r.err = std::max(r.err, e.second);
  const double sec = r.t.median * 1e-3;
  state.counters["median_ms"] = r.t.median;
  state.counters["TFLOP/s"] = r.flops / sec * 1e-12;
  state.counters["GB/s"] = r.bytes / sec * 1e-9;
  state.counters["frac_copy_bw"] = r.bytes / sec * 1e-9 / g_copy_gbs;
  state.counters["frac_gemm"] = r.flops / sec * 1e-12 / g_gemm_tflops;
  state.counters["err_rel_rms"] = r.err;
  for (auto& e : r.errs) state.counters["err_" + e.first] = e.second;
  const bool bad = !(r.err < (bwd ? 5e-3 : 4e-3));
  if (bad) state.SkipWithError(("outputs do not match the fp64 reference: err " + std::to_string(r.err)).c_str());
  g_results.push_back(r);
  write_csv(*p, r, kWarmup, int(ms.size()));
}

// ---- the two ceilings ------------------------------------------------------------------------------------------------
// Median CUDA-event time of f() on stream st, after 3 untimed calls.
double time_median_ms(const std::function<void()>& f, int reps, cudaStream_t st = 0) {
  cudaEvent_t e0, e1;
  SPB_CUDA(cudaEventCreate(&e0));
  SPB_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    SPB_CUDA(cudaEventRecord(e0, st));
    f();
    SPB_CUDA(cudaEventRecord(e1, st));
    SPB_CUDA(cudaEventSynchronize(e1));
    float m;
    SPB_CUDA(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return summarize(ms).median;
}

void measure_ceilings() {
  {  // device-to-device copy of 2 GiB: bytes read + bytes written
    const size_t bytes = size_t(2) << 30;
    Buffer a(*g_dev, bytes), b(*g_dev, bytes);
    fill(a.get(), bytes / 2, 77, 2);
    const double ms = time_median_ms([&] { SPB_CUDA(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, 0)); }, 10);
    g_copy_gbs = 2.0 * bytes / (ms * 1e-3) * 1e-9;
  }
  {  // cuBLAS bf16 GEMM 8192^3, fp32 accumulation, random data
    const int n = 8192;
    Buffer a(*g_dev, size_t(n) * n * 2), b(*g_dev, size_t(n) * n * 2), c(*g_dev, size_t(n) * n * 2);
    fill(a.get(), size_t(n) * n, 78, 0);
    fill(b.get(), size_t(n) * n, 79, 0);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) std::abort();
    const float alpha = 1.f, beta = 0.f;
    const double ms = time_median_ms(
        [&] {
          if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(), CUDA_R_16BF, n, b.get(), CUDA_R_16BF,
                           n, &beta, c.get(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            std::abort();
        },
        10);
    cublasDestroy(h);
    g_gemm_tflops = 2.0 * n * n * double(n) / (ms * 1e-3) * 1e-12;
  }
  std::printf("ceilings: device-to-device copy %.0f GB/s (read + write), cuBLAS bf16 GEMM 8192^3 %.0f TFLOP/s\n",
              g_copy_gbs, g_gemm_tflops);
}

// Where the time goes: each stage of fwd_bwd timed alone (median of 20 launches), with its own byte count.
void print_breakdown(Problem& p) {
  const GlaShape& s = p.s;
  GlaWorkspace& ws = *p.ws;
  const Stream st = g_dev->compute_stream();
  cudaStream_t cs = static_cast<cudaStream_t>(st.handle);
  const gla_cuda::Dims d{s.B, s.T, s.H, s.dk, s.dv, s.chunks(), 1.0f / std::sqrt(float(s.dk))};
  auto q = static_cast<const bf16*>(p.q.get()), k = static_cast<const bf16*>(p.k.get());
  auto v = static_cast<const bf16*>(p.v.get()), d_o = static_cast<const bf16*>(p.d_o.get());
  const double TD = double(s.B) * s.T * s.H * s.dk, TE = double(s.B) * s.T * s.H * s.dv;
  const double HS = double(chunk_state_bytes(*g_kern, s));
  const auto* hs_b = static_cast<const bf16*>(ws.hs.get());  // (chunk_state_type(): bf16)
  const auto* dhs_b = static_cast<const bf16*>(ws.dhs.get());
  size_t bscratch_elems = gla_cuda::boundary_scratch_elems(d);  // the largest plan of the boundary variants
  for (int bv = 1; bv <= gla_cuda::boundary_variants(); ++bv) {
    gla_cuda::set_boundary_variant(bv);
    bscratch_elems = std::max(bscratch_elems, gla_cuda::boundary_scratch_elems(d));
  }
  gla_cuda::set_boundary_variant(0);
  Buffer bscratch(*g_dev, bscratch_elems * 4);
  auto run_output = [&] { g_kern->chunk_output(s, q, k, v, ws.gc.f32(), ws.hs.get(), p.o.get(), st); };
  auto run_dv = [&] {
    gla_cuda::launch_dv(d, q, k, d_o, ws.gc.f32(), dhs_b, static_cast<bf16*>(p.dv.get()), cs);
  };
  auto run_dqk = [&] {
    gla_cuda::launch_dqk(d, q, k, v, d_o, ws.gc.f32(), hs_b, dhs_b, static_cast<bf16*>(p.dq.get()),
                         static_cast<bf16*>(p.dk.get()), static_cast<bf16*>(p.dg.get()), cs);
  };
  struct Stage {
    std::string name;
    double bytes;
    std::function<void()> f;
  };
  std::vector<Stage> stages = {
      {"chunk_cumsum", 6 * TD, [&] { g_kern->chunk_cumsum(s, p.g.get(), ws.gc.f32(), ws.lambda.f32(), st); }},
      {"chunk_states_fwd", 6 * TD + 2 * TE + HS,
       [&] { g_kern->chunk_states_fwd(s, k, v, ws.gc.f32(), nullptr, ws.hs.get(), ws.ht.f32(), st); }},
      {"chunk_output", 8 * TD + 4 * TE + HS, run_output},
      {"chunk_states_bwd", 6 * TD + 2 * TE + HS,
       [&] { g_kern->chunk_states_bwd(s, q, d_o, ws.gc.f32(), nullptr, ws.dhs.get(), p.dh0.f32(), st); }},
      {"grads: dq dk dg", 14 * TD + 4 * TE + 2 * HS, run_dqk},
      {"grads: dv", 8 * TD + 4 * TE + HS, run_dv},
      // The boundary states alone (launch_boundary: ht / dh0 from a zero start, no chunk states), against the bytes
      // read (x and y bf16, gc fp32); ht / dh0 are overwritten, which every stage here may do.
      {"boundary fwd", 6 * TD + 2 * TE,
       [&] { gla_cuda::launch_boundary(d, false, k, v, ws.gc.f32(), p.ht.f32(), bscratch.f32(), cs); }},
      {"boundary bwd", 6 * TD + 2 * TE,
       [&] { gla_cuda::launch_boundary(d, true, q, d_o, ws.gc.f32(), p.dh0.f32(), bscratch.f32(), cs); }},
      // variants, for the notes: cumsum with 4 features per thread and without lambda; below: both state tiles, the
      // other variants of the A-matrix and dq/dk/dg kernels, the other column tile of the A-matrix kernels
      {"cumsum, vec=4", 6 * TD,
       with_override(gla_cuda::set_cumsum_vec, 4,
                     [&] { g_kern->chunk_cumsum(s, p.g.get(), ws.gc.f32(), ws.lambda.f32(), st); }, 2)},
      {"cumsum, no lambda", 6 * TD, [&] { g_kern->chunk_cumsum(s, p.g.get(), ws.gc.f32(), nullptr, st); }},
  };
  // The sequential walk (set_states_variant(1)) at its own tile choice and
  // at both tiles.
  for (int bk : {0, 16, 32}) {
    const std::string tag = bk ? ", bk=" + std::to_string(bk) : "";
    auto sequential = [bk](const std::function<void()>& f) {
      return with_override(gla_cuda::set_states_variant, 1, with_override(gla_cuda::set_states_bk, bk, f));
    };
    stages.push_back({"states_fwd, sequential" + tag, 6 * TD + 2 * TE + HS, sequential([&] {
                        g_kern->chunk_states_fwd(s, k, v, ws.gc.f32(), nullptr, ws.hs.get(), ws.ht.f32(), st);
                      })});
    if (bk == 0)
      stages.push_back({"states_bwd, sequential", 6 * TD + 2 * TE + HS, sequential([&] {
                          g_kern->chunk_states_bwd(s, q, d_o, ws.gc.f32(), nullptr, ws.dhs.get(), p.dh0.f32(), st);
                        })});
  }
  // The states by spans with the STORE kernel's 4-byte stores from the accumulator fragments
  // (set_states_staged_store(false)) instead of its default staged bulk stores.
  auto register_stores = [](const std::function<void()>& f) {
    return with_override([](int on) { gla_cuda::set_states_staged_store(on != 0); }, 0, f, 1);
  };
  stages.push_back({"states_fwd, register stores", 6 * TD + 2 * TE + HS, register_stores([&] {
                      g_kern->chunk_states_fwd(s, k, v, ws.gc.f32(), nullptr, ws.hs.get(), ws.ht.f32(), st);
                    })});
  stages.push_back({"states_bwd, register stores", 6 * TD + 2 * TE + HS, register_stores([&] {
                      g_kern->chunk_states_bwd(s, q, d_o, ws.gc.f32(), nullptr, ws.dhs.get(), p.dh0.f32(), st);
                    })});
  // Each other variant of the A-matrix (default 4) and dq/dk/dg (default 3: slices 3 ahead) kernels, run alone.
  for (int variant : {1, 2, 3}) {
    const std::string tag = ", variant " + std::to_string(variant);
    stages.push_back(
        {"output" + tag, 8 * TD + 4 * TE + HS, with_override(gla_cuda::set_intra_variant, variant, run_output)});
    stages.push_back({"dv" + tag, 8 * TD + 4 * TE + HS, with_override(gla_cuda::set_intra_variant, variant, run_dv)});
    if (variant < 3)
      stages.push_back(
          {"dq dk dg" + tag, 14 * TD + 4 * TE + 2 * HS, with_override(gla_cuda::set_dqk_variant, variant, run_dqk)});
  }
  // One column tile per block (A rebuilt for each, without set_intra_tiles' plan; the same as the default where
  // dv <= 128) and two.
  for (int tiles : {1, 2}) {
    const std::string tag = ", " + std::to_string(tiles) + " column tile" + (tiles > 1 ? "s" : "") + " per block";
    stages.push_back(
        {"output" + tag, 8 * TD + 4 * TE + HS, with_override(gla_cuda::set_intra_tiles, tiles, run_output)});
    stages.push_back({"dv" + tag, 8 * TD + 4 * TE + HS, with_override(gla_cuda::set_intra_tiles, tiles, run_dv)});
  }
  // zeco's local schedule (sp/sp_local.cpp, in order, without chunk_cumsum) over the whole shape and over head
  // groups (GlaShape::pair_range): each group's boundary call, then each group's states after it and its output
  // (forward) or gradients (backward); and single stages split into the same groups.
  for (int G : {1, 2, 4}) {
    if (G > s.B * s.H) break;
    auto parts = std::make_shared<std::vector<GlaShape>>(s.split_pairs(G));
    const std::string tag = ", " + std::to_string(G) + " head group" + (G > 1 ? "s" : "");
    stages.push_back({"sp fwd: boundary, states, output" + tag, 14 * TD + 6 * TE + 2 * HS, [&, parts] {
                        for (const GlaShape& g : *parts)
                          g_kern->chunk_final_state(g, k, v, p.g.get(), ws.gc.f32(), p.ht.f32(), ws.lambda.f32(), st);
                        for (const GlaShape& g : *parts) {
                          g_kern->chunk_states_fwd_after_boundary(g, k, v, ws.gc.f32(), nullptr, ws.hs.get(),
                                                                  ws.ht.f32(), st);
                          g_kern->chunk_output(g, q, k, v, ws.gc.f32(), ws.hs.get(), p.o.get(), st);
                        }
                      }});
    stages.push_back({"sp bwd: boundary, states, grads" + tag, 34 * TD + 14 * TE + 4 * HS, [&, parts] {
                        for (const GlaShape& g : *parts)
                          g_kern->chunk_initial_dstate(g, q, d_o, p.g.get(), ws.gc.f32(), p.dh0.f32(), st);
                        for (const GlaShape& g : *parts) {
                          g_kern->chunk_states_bwd_after_boundary(g, q, d_o, ws.gc.f32(), nullptr, ws.dhs.get(),
                                                                  nullptr, st);
                          g_kern->chunk_grads(g, q, k, v, ws.gc.f32(), ws.hs.get(), ws.ht.f32(), ws.dhs.get(), d_o,
                                              p.dq.get(), p.dk.get(), p.dv.get(), p.dg.get(), st);
                        }
                      }});
    if (G == 1) continue;
    stages.push_back({"chunk_output" + tag, 8 * TD + 4 * TE + HS, [&, parts] {
                        for (const GlaShape& g : *parts)
                          g_kern->chunk_output(g, q, k, v, ws.gc.f32(), ws.hs.get(), p.o.get(), st);
                      }});
    stages.push_back({"chunk_states_fwd" + tag, 6 * TD + 2 * TE + HS, [&, parts] {
                        for (const GlaShape& g : *parts)
                          g_kern->chunk_states_fwd(g, k, v, ws.gc.f32(), nullptr, ws.hs.get(), ws.ht.f32(), st);
                      }});
    stages.push_back({"grads" + tag, 22 * TD + 8 * TE + 3 * HS, [&, parts] {
                        for (const GlaShape& g : *parts)
                          g_kern->chunk_grads(g, q, k, v, ws.gc.f32(), ws.hs.get(), ws.ht.f32(), ws.dhs.get(), d_o,
                                              p.dq.get(), p.dk.get(), p.dv.get(), p.dg.get(), st);
                      }});
  }
  // zeco's local schedule with the chunk states beside the scan (--overlap 2): the state's word set before the states
  // (each block adds the state at its first chunk; against the in-order line above, the cost of polling the word and
  // of the settle launch), and never set (the settle adds it to every state after the kernel: the cost where the
  // scan outlasts the chunk states). The state is dh0's buffer (its values do not matter to the time).
  Buffer words(*g_dev, 2 * sizeof(uint32_t));
  gla_cuda::launch_signal_after(static_cast<uint32_t*>(words.get()), 1, 0, cs);  // word 0: set; word 1: never
  gla_cuda::launch_signal_after(static_cast<uint32_t*>(words.get()) + 1, 0, 0, cs);
  for (int w : {0, 1}) {
    const std::string tag = w ? ", state after the states" : ", state before the states";
    const GlaKernels::ArrivingState a{p.dh0.f32(), static_cast<const uint32_t*>(words.get()) + w, 1};
    stages.push_back({"sp fwd: boundary, states arriving, settle, output" + tag, 14 * TD + 6 * TE + 2 * HS, [&, a] {
                        g_kern->chunk_final_state(s, k, v, p.g.get(), ws.gc.f32(), p.ht.f32(), ws.lambda.f32(), st);
                        g_kern->chunk_states_fwd_arriving(s, k, v, ws.gc.f32(), a, ws.hs.get(), ws.ht.f32(), st);
                        g_kern->chunk_states_settle(s, false, ws.gc.f32(), a, ws.hs.get(), ws.ht.f32(), st);
                        g_kern->chunk_output(s, q, k, v, ws.gc.f32(), ws.hs.get(), p.o.get(), st);
                      }});
    stages.push_back({"sp bwd: boundary, states arriving, settle, grads" + tag, 34 * TD + 14 * TE + 4 * HS, [&, a] {
                        g_kern->chunk_initial_dstate(s, q, d_o, p.g.get(), ws.gc.f32(), p.dh0.f32(), st);
                        g_kern->chunk_states_bwd_arriving(s, q, d_o, ws.gc.f32(), a, ws.dhs.get(), nullptr, st);
                        g_kern->chunk_states_settle(s, true, ws.gc.f32(), a, ws.dhs.get(), nullptr, st);
                        g_kern->chunk_grads(s, q, k, v, ws.gc.f32(), ws.hs.get(), ws.ht.f32(), ws.dhs.get(), d_o,
                                            p.dq.get(), p.dk.get(), p.dv.get(), p.dg.get(), st);
                      }});
  }
  // The same apart, with the state in before the states: the states kernel after the boundary call in order and
  // arriving (its polls, and the state added as the walk starts), and the settle with nothing to settle (a launch).
  {
    const GlaKernels::ArrivingState a{p.dh0.f32(), static_cast<const uint32_t*>(words.get()), 1};
    for (bool rev : {false, true}) {
      const std::string dir = rev ? "bwd" : "fwd";
      const void *x = rev ? q : k, *y = rev ? d_o : v;
      void* hs = rev ? ws.dhs.get() : ws.hs.get();
      auto boundary = [&, rev, x, y] {
        if (rev) g_kern->chunk_initial_dstate(s, x, y, p.g.get(), ws.gc.f32(), p.ht.f32(), st);
        else g_kern->chunk_final_state(s, x, y, p.g.get(), ws.gc.f32(), p.ht.f32(), ws.lambda.f32(), st);
      };
      stages.push_back({"states " + dir + " after the boundary, in order", 6 * TD + 2 * TE + HS, [&, rev, x, y, hs,
                                                                                             boundary] {
                          boundary();
                          if (rev) g_kern->chunk_states_bwd_after_boundary(s, x, y, ws.gc.f32(), a.state, hs, nullptr, st);
                          else g_kern->chunk_states_fwd_after_boundary(s, x, y, ws.gc.f32(), a.state, hs, nullptr, st);
                        }});
      stages.push_back({"states " + dir + " after the boundary, arriving (state before)", 6 * TD + 2 * TE + HS,
                        [&, rev, x, y, hs, boundary] {
                          boundary();
                          if (rev) g_kern->chunk_states_bwd_arriving(s, x, y, ws.gc.f32(), a, hs, nullptr, st);
                          else g_kern->chunk_states_fwd_arriving(s, x, y, ws.gc.f32(), a, hs, nullptr, st);
                        }});
      stages.push_back({"settle " + dir + ", nothing to settle", 0, [&, rev, hs] {
                          g_kern->chunk_states_settle(s, rev, ws.gc.f32(), a, hs, nullptr, st);
                        }});
    }
  }
  stages.push_back({"grads", 22 * TD + 8 * TE + 3 * HS, [&] {
                      g_kern->chunk_grads(s, q, k, v, ws.gc.f32(), ws.hs.get(), ws.ht.f32(), ws.dhs.get(), d_o,
                                          p.dq.get(), p.dk.get(), p.dv.get(), p.dg.get(), st);
                    }});
  // The boundary from the raw gates (what the SP methods run where the shape allows): reads g bf16, not gc fp32.
  auto g_raw = static_cast<const bf16*>(p.g.get());
  const bool from_g = gla_cuda::boundary_reads_gates(d);
  if (from_g) {
    stages.push_back({"boundary fwd, from g", 4 * TD + 2 * TE, [&] {
                        gla_cuda::launch_boundary_gates(d, false, k, v, g_raw, p.ht.f32(), ws.lambda.f32(),
                                                        bscratch.f32(), cs);
                      }});
    stages.push_back({"boundary bwd, from g", 4 * TD + 2 * TE, [&] {
                        gla_cuda::launch_boundary_gates(d, true, q, d_o, g_raw, p.dh0.f32(), nullptr, bscratch.f32(),
                                                        cs);
                      }});
  }
  // each variant of the boundary kernel (gla_boundary.cu; the default is one of them), forward only; their times are
  // in NOTES.md ("The boundary kernel"), so only with SPB_BENCH_BOUNDARY_VARIANTS=1
  const char* bvar_env = std::getenv("SPB_BENCH_BOUNDARY_VARIANTS");
  const bool bvars = bvar_env && std::string(bvar_env) == "1";
  for (int bv = 1; bvars && bv <= gla_cuda::boundary_variants(); ++bv)
    stages.push_back({"boundary fwd, v" + std::to_string(bv), 6 * TD + 2 * TE,
                      with_override(gla_cuda::set_boundary_variant, bv, [&] {
                        gla_cuda::launch_boundary(d, false, k, v, ws.gc.f32(), p.ht.f32(), bscratch.f32(), cs);
                      })});
  stages.push_back({"output, bv=64", 8 * TD + 4 * TE + HS,
                    [&] { gla_cuda::launch_output(d, q, k, v, ws.gc.f32(), hs_b, static_cast<bf16*>(p.o.get()), cs, 64); }});
  stages.push_back({"dv, bv=64", 8 * TD + 4 * TE + HS, [&] {
                      gla_cuda::launch_dv(d, q, k, d_o, ws.gc.f32(), dhs_b, static_cast<bf16*>(p.dv.get()), cs, 64);
                    }});
  std::printf("\nstages of %s (each alone, median of 20; GB/s against its own reads + writes):\n", shape_name(s).c_str());
  for (const Stage& sg : stages) {
    const double med = time_median_ms(sg.f, 20, cs);
    std::printf("  %-20s %8.3f ms %7.0f GB/s\n", sg.name.c_str(), med, sg.bytes / (med * 1e-3) * 1e-9);
  }
  // The check of the boundary lines: launch_boundary's ht / dh0 against launch_states' (zero start, same inputs),
  // for the default and then each variant.
  for (bool rev : {false, true}) {
    const size_t n = s.state_elems();
    Buffer a(*g_dev, n * 4), b(*g_dev, n * 4);
    const bf16* x = rev ? q : k;
    const bf16* y = rev ? d_o : v;
    gla_cuda::launch_states(d, rev, x, y, ws.gc.f32(), nullptr, nullptr, a.f32(), cs);
    std::vector<float> ha(n), hb(n);
    SPB_CUDA(cudaStreamSynchronize(cs));
    SPB_CUDA(cudaMemcpy(ha.data(), a.get(), n * 4, cudaMemcpyDeviceToHost));
    for (int bv = 0; bv <= gla_cuda::boundary_variants(); ++bv) {
      SPB_CUDA(cudaMemsetAsync(b.get(), 0xFF, n * 4, cs));
      gla_cuda::set_boundary_variant(bv);
      gla_cuda::launch_boundary(d, rev, x, y, ws.gc.f32(), b.f32(), bscratch.f32(), cs);
      gla_cuda::set_boundary_variant(0);
      SPB_CUDA(cudaStreamSynchronize(cs));
      SPB_CUDA(cudaMemcpy(hb.data(), b.get(), n * 4, cudaMemcpyDeviceToHost));
      std::printf("  boundary %s vs states%s: rel rms %.2e (bar 1e-5)\n", rev ? "bwd (dh0)" : "fwd (ht)",
                  bv ? (", v" + std::to_string(bv)).c_str() : "", rel_rms_error(ha, hb, n));
    }
    if (from_g) {
      SPB_CUDA(cudaMemsetAsync(b.get(), 0xFF, n * 4, cs));
      gla_cuda::launch_boundary_gates(d, rev, x, y, g_raw, b.f32(), nullptr, bscratch.f32(), cs);
      SPB_CUDA(cudaStreamSynchronize(cs));
      SPB_CUDA(cudaMemcpy(hb.data(), b.get(), n * 4, cudaMemcpyDeviceToHost));
      std::printf("  boundary %s vs states, from g: rel rms %.2e (bar 1e-5)\n", rev ? "bwd (dh0)" : "fwd (ht)",
                  rel_rms_error(ha, hb, n));
    }
  }
}

}  // namespace
}  // namespace spb

int main(int argc, char** argv) {
  using namespace spb;
  // --csv=PATH is ours: take it out before Google Benchmark sees the arguments.
  if (const char* env = std::getenv("SPB_CSV")) g_csv = env;
  int w = 1;
  int profile = -1;  // --profile[=N]: shape N (default 0) for ncu, see below
  const int nshapes = int(sizeof kShapes / sizeof kShapes[0]);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--csv=", 6) == 0) {
      g_csv = argv[i] + 6;
    } else if (std::strcmp(argv[i], "--profile") == 0) {
      profile = 0;
    } else if (std::strncmp(argv[i], "--profile=", 10) == 0) {
      char* end = nullptr;
      const long n = std::strtol(argv[i] + 10, &end, 10);
      if (end == argv[i] + 10 || *end != '\0' || n < 0 || n >= nshapes) {
        std::fprintf(stderr, "bench_gla_cuda: %s: the shape must be a number from 0 to %d\n", argv[i], nshapes - 1);
        return 2;
      }
      profile = int(n);
    } else {
      argv[w++] = argv[i];
    }
  }
  argc = w;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("bench_gla_cuda: no CUDA device\n");
    return 0;
  }
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  g_dev = dev.get();
  g_kern = kern.get();
  std::printf("device: %s\n", dev->name().c_str());
  if (profile >= 0) {  // for ncu: two fwd_bwd passes of one shape, nothing else
    BenchShape bs = kShapes[profile];
    auto p = std::make_unique<Problem>();
    p->s.B = bs.B, p->s.T = bs.T, p->s.H = bs.H, p->s.dk = bs.dk, p->s.dv = bs.dv;
    const GlaShape& s = p->s;
    const size_t QK = s.qk_elems() * 2, V = s.v_elems() * 2, S = s.state_elems() * 4;
    p->q = Buffer(*g_dev, QK), p->k = Buffer(*g_dev, QK), p->v = Buffer(*g_dev, V), p->g = Buffer(*g_dev, QK);
    p->d_o = Buffer(*g_dev, V), p->o = Buffer(*g_dev, V), p->ht = Buffer(*g_dev, S);
    p->dq = Buffer(*g_dev, QK), p->dk = Buffer(*g_dev, QK), p->dv = Buffer(*g_dev, V), p->dg = Buffer(*g_dev, QK);
    p->dh0 = Buffer(*g_dev, S);
    p->ws = std::make_unique<GlaWorkspace>(*g_dev, *g_kern, s);
    fill(p->q.get(), s.qk_elems(), 1, 0), fill(p->k.get(), s.qk_elems(), 2, 0), fill(p->v.get(), s.v_elems(), 3, 0);
    fill(p->g.get(), s.qk_elems(), 4, 1), fill(p->d_o.get(), s.v_elems(), 5, 0);
    for (int i = 0; i < 2; ++i) run_pass(*p, true, g_dev->compute_stream());
    g_dev->synchronize();
    return 0;
  }
  measure_ceilings();
  uint64_t seed = 1;
  for (const BenchShape& bs : kShapes) g_problems.push_back(make_problem(bs, seed++));
  for (auto& p : g_problems)
    for (bool bwd : {false, true})
      benchmark::RegisterBenchmark((shape_name(p->s) + (bwd ? "/fwd_bwd" : "/fwd")).c_str(), bm_gla, p.get(), bwd)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(bwd ? 30 : 50);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (auto& p : g_problems) print_breakdown(*p);

  std::printf("\n%-28s %-8s %9s %9s %9s %9s %8s %8s %9s\n", "shape", "pass", "median_ms", "target", "TFLOP/s", "GB/s",
              "%copyBW", "%GEMM", "err");
  for (const Result& r : g_results) {
    const double sec = r.t.median * 1e-3;
    char target[32];
    if (r.target > 0) std::snprintf(target, sizeof target, "%.2f", r.target);
    else std::snprintf(target, sizeof target, "-");
    std::printf("%-28s %-8s %9.3f %9s %9.1f %9.0f %7.1f%% %7.1f%% %9.2e\n", r.shape.c_str(), r.pass.c_str(),
                r.t.median, target, r.flops / sec * 1e-12, r.bytes / sec * 1e-9,
                100 * r.bytes / sec * 1e-9 / g_copy_gbs, 100 * r.flops / sec * 1e-12 / g_gemm_tflops, r.err);
  }
  for (const Result& r : g_results) {
    std::printf("errors %-28s %-8s", r.shape.c_str(), r.pass.c_str());
    for (auto& e : r.errs) std::printf(" %s %.2e", e.first.c_str(), e.second);
    std::printf("\n");
  }
  g_problems.clear();
  return 0;
}
