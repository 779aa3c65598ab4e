// The GPU kernels of the model (model/cuda/model_cuda.cu) against the CPU ones (model/cpu/model_cpu.cpp), op by op:
// random inputs at small odd sizes (37 rows, 95 columns, 1001 elements, vocabularies of 1000, 1001 and 32000) and at
// the model's widths (dv = 64 and 512, hidden 2048), on the GPU's compute stream (and the default stream for gemm).
// Skips itself where there is no CUDA device.
//
// Every input is a bf16 number, uploaded as bf16 to the GPU and as the same fp32 value to the CPU, so the two sides
// start equal and differ only by what the GPU rounds on the way out and by the order of fp32 sums. Tolerances, as
// relative RMS errors (spb::rel_rms_error):
//   kBf16Out  5e-3  an output stored as bf16: one rounding is at most 2^-8 = 3.9e-3 of the value (about 1.5e-3 RMS)
//   kF32Out   1e-5  an fp32 output of the same fp32 math (rstd, rmsnorm dx, the dw / dbias column sums, the loss):
//                   only the order of sums and the last bit of exp / sqrt differ (~1e-7)
//   kGemmF32  1e-4  gemm into fp32: products of bf16 numbers are exact, but cuBLAS adds them in another order on
//                   tensor cores (~1e-6 expected); a wrong index or transpose is an O(1) error
//   exact           convert (against round-to-nearest-even), embedding_fwd
// Every "=" output on the GPU is poisoned with NaN first (0xFF bytes: NaN as fp32 and as bf16), so an unwritten
// element fails; gemm's beta = 0 cases poison C as well, so they also check that C is not read.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/device.h"
#include "runtime/stats.h"
#include "model/model_kernels.h"
#include "../gpu_test_util.h"

namespace spb {
namespace {

constexpr double kBf16Out = 5e-3;
constexpr double kF32Out = 1e-5;
constexpr double kGemmF32 = 1e-4;

using test::have_gpu;
using test::round_bf16;

// n normal numbers scale * N(0, 1) + shift, rounded to bf16.
std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f, float shift = 0.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(n);
  for (float& v : x) v = round_bf16(scale * d(gen) + shift);
  return x;
}
std::vector<int32_t> randint(size_t n, int32_t hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> d(0, hi - 1);
  std::vector<int32_t> x(n);
  for (int32_t& v : x) v = d(gen);
  return x;
}

class ModelKernelsGpu : public testing::Test {
 protected:
  // One tensor on both sides: an act tensor (bf16 on the GPU, fp32 on the CPU) or an fp32 one.
  struct Twin {
    Buffer cpu, gpu;
    DType gpu_type = DType::f32;
    size_t n = 0;
    void* c(size_t offset = 0) const { return static_cast<char*>(cpu.get()) + offset * 4; }
    void* g(size_t offset = 0) const { return static_cast<char*>(gpu.get()) + offset * dtype_size(gpu_type); }
    float* cf() const { return static_cast<float*>(cpu.get()); }
    float* gf() const { return static_cast<float*>(gpu.get()); }
  };

  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    cpu_dev_ = make_cpu_device();
    gpu_dev_ = make_cuda_device(0);
    cpu_ = make_cpu_model_kernels();
    gpu_ = make_cuda_model_kernels();
    ASSERT_EQ(cpu_->act_dtype(), DType::f32);
    ASSERT_EQ(gpu_->act_dtype(), DType::bf16);
    st_ = gpu_dev_->compute_stream();
  }

  Twin twin(const std::vector<float>& host, DType gpu_type) {
    Twin t = empty(host.size(), gpu_type);
    cpu_dev_->upload(t.cpu.get(), host.data(), host.size() * 4);
    gpu_dev_->upload_as(t.gpu.get(), gpu_type, host.data(), host.size());
    SPB_CUDA(cudaDeviceSynchronize());  // see `out`
    return t;
  }
  Twin act(const std::vector<float>& host) { return twin(host, DType::bf16); }
  Twin f32(const std::vector<float>& host) { return twin(host, DType::f32); }
  // An output that the op overwrites: zero on the CPU, NaN on the GPU.
  Twin out(size_t n, DType gpu_type) {
    Twin t = empty(n, gpu_type);
    std::memset(t.cpu.get(), 0, n * 4);
    SPB_CUDA(cudaMemset(t.gpu.get(), 0xFF, t.gpu.bytes()));
    // The ops run on a non-blocking stream, which the legacy stream's memset and copies do not order.
    SPB_CUDA(cudaDeviceSynchronize());
    return t;
  }
  Twin out_act(size_t n) { return out(n, DType::bf16); }
  Twin out_f32(size_t n) { return out(n, DType::f32); }

  struct Ints {
    Buffer cpu, gpu;
  };
  Ints ints(const std::vector<int32_t>& host) {
    const size_t bytes = host.size() * 4;
    Ints t{Buffer(*cpu_dev_, bytes), Buffer(*gpu_dev_, bytes)};
    cpu_dev_->upload(t.cpu.get(), host.data(), bytes);
    gpu_dev_->upload(t.gpu.get(), host.data(), bytes);
    SPB_CUDA(cudaDeviceSynchronize());  // see `out`
    return t;
  }

  std::vector<float> cpu_values(const Twin& t) {
    std::vector<float> x(t.n);
    cpu_dev_->download(x.data(), t.cpu.get(), t.n * 4);
    return x;
  }
  std::vector<float> gpu_values(const Twin& t) {
    std::vector<float> x(t.n);
    gpu_dev_->download_as(x.data(), t.gpu.get(), t.gpu_type, t.n);
    return x;
  }
  // The GPU's values of t against the CPU's; elements [from, n) only where the op wrote an offset range.
  void expect_close(const Twin& t, double tol, const std::string& what, size_t from = 0) {
    const std::vector<float> ref = cpu_values(t), got = gpu_values(t);
    const double err = rel_rms_error(ref.data() + from, got.data() + from, t.n - from);
    EXPECT_LT(err, tol) << what << ": rel RMS error " << err << " over " << t.n - from << " elements";
  }

  std::unique_ptr<Device> cpu_dev_, gpu_dev_;
  std::unique_ptr<ModelKernels> cpu_, gpu_;
  Stream st_;

 private:
  Twin empty(size_t n, DType gpu_type) {
    Twin t;
    t.cpu = Buffer(*cpu_dev_, n * 4);
    t.gpu = Buffer(*gpu_dev_, n * dtype_size(gpu_type));
    t.gpu_type = gpu_type, t.n = n;
    return t;
  }
};

// All four transposes, both C types, beta = 0 (C poisoned) and beta = 1 (C accumulated), odd and aligned shapes.
TEST_F(ModelKernelsGpu, GemmEveryTransposeAndCType) {
  struct Shape {
    int M, N, K;
  };
  const Shape shapes[] = {{37, 45, 29}, {64, 128, 96}, {37, 96, 512}};
  uint32_t seed = 1;
  for (const Shape& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType ct : {DType::f32, DType::bf16})
          for (float beta : {0.f, 1.f}) {
            SCOPED_TRACE("M" + std::to_string(s.M) + " N" + std::to_string(s.N) + " K" + std::to_string(s.K) +
                         (ta ? " A^T" : " A") + (tb ? " B^T" : " B") + " C " + dtype_name(ct) + " beta " +
                         std::to_string(int(beta)));
            const float alpha = beta == 0.f ? 1.f : 0.75f;
            const size_t mn = size_t(s.M) * s.N;
            Twin a = act(randn(size_t(s.M) * s.K, seed++)), b = act(randn(size_t(s.K) * s.N, seed++));
            Twin c = beta == 0.f ? out(mn, ct) : twin(randn(mn, seed++), ct);
            cpu_->gemm(ta, tb, s.M, s.N, s.K, alpha, a.c(), b.c(), beta, c.c(), DType::f32, Stream{});
            gpu_->gemm(ta, tb, s.M, s.N, s.K, alpha, a.g(), b.g(), beta, c.g(), ct, st_);
            expect_close(c, ct == DType::f32 ? kGemmF32 : kBf16Out, "C");
          }
}

// The model's three uses (header comment) on the legacy default stream.
TEST_F(ModelKernelsGpu, GemmModelUsesOnDefaultStream) {
  const int N = 37, in = 96, out_dim = 160;
  Twin x = act(randn(size_t(N) * in, 11)), W = act(randn(size_t(out_dim) * in, 12, 0.1f));
  Twin dy = act(randn(size_t(N) * out_dim, 13));
  Twin y = out_act(size_t(N) * out_dim);
  Twin dx = act(randn(size_t(N) * in, 14));
  Twin dW = f32(randn(size_t(out_dim) * in, 15));
  for (int side = 0; side < 2; ++side) {
    ModelKernels& k = side ? *gpu_ : *cpu_;
    auto p = [&](const Twin& t) { return side ? t.g() : t.c(); };
    const DType act_t = side ? DType::bf16 : DType::f32;
    k.gemm(false, true, N, out_dim, in, 1.f, p(x), p(W), 0.f, p(y), act_t, Stream{});         // y = x W^T
    k.gemm(false, false, N, in, out_dim, 1.f, p(dy), p(W), 1.f, p(dx), act_t, Stream{});      // dx += dy W
    k.gemm(true, false, out_dim, in, N, 1.f, p(dy), p(x), 1.f, p(dW), DType::f32, Stream{});  // dW += dy^T x
  }
  expect_close(y, kBf16Out, "y = x W^T");
  expect_close(dx, kBf16Out, "dx += dy W");
  expect_close(dW, kGemmF32, "dW += dy^T x");
}

// Against round-to-nearest-even exactly; the offset case (pointers one element past alignment) takes the scalar path.
TEST_F(ModelKernelsGpu, ConvertIsExact) {
  const size_t n = 1001;
  std::mt19937 gen(21);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> x(n + 1);
  for (float& v : x) v = d(gen);  // not bf16 numbers: the f32 -> bf16 direction rounds
  std::vector<float> x_bf(x);
  for (float& v : x_bf) v = round_bf16(v);
  for (size_t off : {size_t(0), size_t(1)}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    const size_t m = n + 1 - off;
    Buffer f(*gpu_dev_, (n + 1) * 4), h(*gpu_dev_, (n + 1) * 2), f2(*gpu_dev_, (n + 1) * 4), h2(*gpu_dev_, (n + 1) * 2);
    gpu_dev_->upload(f.get(), x.data(), (n + 1) * 4);
    SPB_CUDA(cudaMemset(h.get(), 0xFF, h.bytes()));
    SPB_CUDA(cudaMemset(f2.get(), 0xFF, f2.bytes()));
    SPB_CUDA(cudaMemset(h2.get(), 0xFF, h2.bytes()));
    SPB_CUDA(cudaDeviceSynchronize());  // the ops' stream is not ordered after the legacy stream's memsets
    char *fp = static_cast<char*>(f.get()) + off * 4, *hp = static_cast<char*>(h.get()) + off * 2;
    char *f2p = static_cast<char*>(f2.get()) + off * 4, *h2p = static_cast<char*>(h2.get()) + off * 2;
    gpu_->convert(m, fp, DType::f32, hp, DType::bf16, st_);
    gpu_->convert(m, hp, DType::bf16, f2p, DType::f32, st_);
    gpu_->convert(m, hp, DType::bf16, h2p, DType::bf16, st_);
    std::vector<float> got_h(n + 1), got_f2(n + 1), got_h2(n + 1);
    gpu_dev_->download_as(got_h.data(), h.get(), DType::bf16, n + 1);
    gpu_dev_->download(got_f2.data(), f2.get(), (n + 1) * 4);
    gpu_dev_->download_as(got_h2.data(), h2.get(), DType::bf16, n + 1);
    for (size_t i = off; i < n + 1; ++i) {
      ASSERT_EQ(got_h[i], x_bf[i]) << "f32 -> bf16, element " << i;
      ASSERT_EQ(got_f2[i], x_bf[i]) << "bf16 -> f32, element " << i;
      ASSERT_EQ(got_h2[i], x_bf[i]) << "bf16 -> bf16, element " << i;
    }
    Buffer f3(*gpu_dev_, (n + 1) * 4);
    SPB_CUDA(cudaMemset(f3.get(), 0xFF, f3.bytes()));
    SPB_CUDA(cudaDeviceSynchronize());
    gpu_->convert(m, fp, DType::f32, static_cast<char*>(f3.get()) + off * 4, DType::f32, st_);
    std::vector<float> got_f3(n + 1);
    gpu_dev_->download(got_f3.data(), f3.get(), (n + 1) * 4);
    for (size_t i = off; i < n + 1; ++i) ASSERT_EQ(got_f3[i], x[i]) << "f32 -> f32, element " << i;
  }
}

TEST_F(ModelKernelsGpu, Embedding) {
  const int n = 37, D = 96, V = 50;  // 37 tokens of 50: some repeat, so the backward adds rows together
  Ints tok = ints(randint(n, V, 31));
  Twin table = f32(randn(size_t(V) * D, 32)), x = out_f32(size_t(n) * D);
  cpu_->embedding_fwd(n, D, static_cast<int32_t*>(tok.cpu.get()), table.cf(), x.cf(), Stream{});
  gpu_->embedding_fwd(n, D, static_cast<int32_t*>(tok.gpu.get()), table.gf(), x.gf(), st_);
  EXPECT_EQ(cpu_values(x), gpu_values(x)) << "embedding_fwd is a copy";

  Twin dx = f32(randn(size_t(n) * D, 33)), dtable = f32(randn(size_t(V) * D, 34));
  cpu_->embedding_bwd(n, D, static_cast<int32_t*>(tok.cpu.get()), dx.cf(), dtable.cf(), Stream{});
  gpu_->embedding_bwd(n, D, static_cast<int32_t*>(tok.gpu.get()), dx.gf(), dtable.gf(), st_);
  expect_close(dtable, kF32Out, "dtable +=");
}

// Every kernel shape of model_norms.cu's norm_dispatch: 16-byte accesses with the row in registers at D = 64 (two rows
// a warp), 96 (a warp, some lanes idle), 512 (a warp), 2048 (4 warps a row), 4096 (a block a row); 4-byte accesses at
// D = 95 (a warp) and 301 (a block); two passes over the row at D = 6144 (16-byte) and 1501 (4-byte). 37 rows is no
// multiple of any block's rows; 2001 rows at D = 2048 make every block loop over several row pairs.
struct NormShape {
  int n, D;
};

TEST_F(ModelKernelsGpu, RmsNorm) {
  const float eps = 1e-6f;
  for (const NormShape s : std::vector<NormShape>{
           {37, 95}, {37, 64}, {37, 2048}, {37, 4096}, {37, 96}, {37, 301}, {37, 1501}, {37, 6144}, {2001, 2048}}) {
    const int n = s.n, D = s.D;
    SCOPED_TRACE("n " + std::to_string(n) + ", D " + std::to_string(D));
    const size_t nd = size_t(n) * D;
    Twin x = f32(randn(nd, 41)), w = f32(randn(D, 42, 0.1f, 1.f));
    Twin y = out_act(nd), rstd = out_f32(n);
    cpu_->rmsnorm_fwd(n, D, x.cf(), w.cf(), eps, y.c(), rstd.cf(), Stream{});
    gpu_->rmsnorm_fwd(n, D, x.gf(), w.gf(), eps, y.g(), rstd.gf(), st_);
    expect_close(y, kBf16Out, "y");
    expect_close(rstd, kF32Out, "rstd");

    Twin r = f32(cpu_values(rstd));  // the backward of both sides reads the same rstd
    Twin dy = f32(randn(nd, 43)), dx = f32(randn(nd, 44)), dw = f32(randn(D, 45));
    Twin dxa = out_act(nd);
    cpu_->rmsnorm_bwd(n, D, x.cf(), w.cf(), r.cf(), dy.cf(), dx.cf(), dw.cf(), dxa.c(), Stream{});
    gpu_->rmsnorm_bwd(n, D, x.gf(), w.gf(), r.gf(), dy.gf(), dx.gf(), dw.gf(), dxa.g(), st_);
    expect_close(dx, kF32Out, "dx +=");
    expect_close(dw, kF32Out, "dw +=");
    expect_close(dxa, kBf16Out, "the act copy of dx");
  }
}

// The residual add in the norm's read: x_out = x + delta at the shapes of the plain norm
// above that take each path (a warp, a block, two passes; 4-byte and 16-byte accesses); x is left as it was.
TEST_F(ModelKernelsGpu, RmsNormAdd) {
  const float eps = 1e-6f;
  for (const NormShape s :
       std::vector<NormShape>{{37, 95}, {37, 64}, {37, 2048}, {37, 1501}, {37, 6144}, {2001, 2048}}) {
    const int n = s.n, D = s.D;
    SCOPED_TRACE("n " + std::to_string(n) + ", D " + std::to_string(D));
    const size_t nd = size_t(n) * D;
    Twin x = f32(randn(nd, 46)), delta = f32(randn(nd, 47)), w = f32(randn(D, 48, 0.1f, 1.f));
    Twin x_out = out_f32(nd), y = out_act(nd), rstd = out_f32(n);
    const std::vector<float> x_before = gpu_values(x);
    cpu_->rmsnorm_add_fwd(n, D, x.cf(), delta.cf(), w.cf(), eps, x_out.cf(), y.c(), rstd.cf(), Stream{});
    gpu_->rmsnorm_add_fwd(n, D, x.gf(), delta.gf(), w.gf(), eps, x_out.gf(), y.g(), rstd.gf(), st_);
    expect_close(x_out, kF32Out, "x_out");
    expect_close(y, kBf16Out, "y");
    expect_close(rstd, kF32Out, "rstd");
    EXPECT_EQ(gpu_values(x), x_before) << "x was written";
  }
}

// C = 95: element by element; 1024: 4 columns a thread, over 37 rows and over 3001 (every warp strides over rows).
TEST_F(ModelKernelsGpu, ForgetGate) {
  const float normaliser = 16.f;
  for (auto [n, C] : {std::pair<int, int>{37, 95}, {37, 1024}, {3001, 1024}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " C " + std::to_string(C));
    const size_t nc = size_t(n) * C;
    Twin pre = act(randn(nc, 51, 4.f)), bias = f32(randn(C, 52)), g = out_act(nc);  // |x| up to ~20: both tails
    cpu_->forget_gate_fwd(n, C, pre.c(), bias.cf(), normaliser, g.c(), Stream{});
    gpu_->forget_gate_fwd(n, C, pre.g(), bias.gf(), normaliser, g.g(), st_);
    expect_close(g, kBf16Out, "g");

    Twin dg = act(randn(nc, 53)), dpre = out_act(nc), dbias = f32(randn(C, 54));
    cpu_->forget_gate_bwd(n, C, pre.c(), bias.cf(), normaliser, dg.c(), dpre.c(), dbias.cf(), Stream{});
    gpu_->forget_gate_bwd(n, C, pre.g(), bias.gf(), normaliser, dg.g(), dpre.g(), dbias.gf(), st_);
    expect_close(dpre, kBf16Out, "dpre");
    expect_close(dbias, kF32Out, "dbias +=");
  }
}

// 37 tokens of 4 heads at dv = 64, 128, 512 and 1024 (16-byte accesses: 8, 16 and 32 threads a row, 1, 1, 2 and 4
// accesses a thread), 100 (8-byte accesses) and odd 95 (element by element); 9001 rows at dv = 64 (32 rows a block)
// and 3001 at dv = 512 (8 a block) make every block loop over several row groups, the last one partial.
TEST_F(ModelKernelsGpu, GatedRmsNorm) {
  const float eps = 1e-5f;
  for (const NormShape s : std::vector<NormShape>{{37 * 4, 64},
                                                  {37 * 4, 128},
                                                  {37 * 4, 512},
                                                  {37 * 4, 1024},
                                                  {37 * 4, 100},
                                                  {37 * 4, 95},
                                                  {9001, 64},
                                                  {3001, 512}}) {
    const int rows = s.n, D = s.D;
    SCOPED_TRACE("rows " + std::to_string(rows) + ", D " + std::to_string(D));
    const size_t nd = size_t(rows) * D;
    Twin o = act(randn(nd, 61)), z = act(randn(nd, 62, 2.f)), w = f32(randn(D, 63, 0.1f, 1.f));
    Twin y = out_act(nd), rstd = out_f32(rows);
    cpu_->gated_rmsnorm_fwd(rows, D, o.c(), z.c(), w.cf(), eps, y.c(), rstd.cf(), Stream{});
    gpu_->gated_rmsnorm_fwd(rows, D, o.g(), z.g(), w.gf(), eps, y.g(), rstd.gf(), st_);
    expect_close(y, kBf16Out, "y");
    expect_close(rstd, kF32Out, "rstd");

    Twin r = f32(cpu_values(rstd));
    Twin dy = act(randn(nd, 64)), d_o = out_act(nd), dz = out_act(nd), dw = f32(randn(D, 65));
    cpu_->gated_rmsnorm_bwd(rows, D, o.c(), z.c(), w.cf(), r.cf(), dy.c(), d_o.c(), dz.c(), dw.cf(), 1, 0, Stream{});
    gpu_->gated_rmsnorm_bwd(rows, D, o.g(), z.g(), w.gf(), r.gf(), dy.g(), d_o.g(), dz.g(), dw.gf(), 1, 0, st_);
    expect_close(d_o, kBf16Out, "d_o");
    expect_close(dz, kBf16Out, "dz");
    expect_close(dw, kF32Out, "dw +=");
    if (rows % 4 == 0) {  // dz of 4 heads side by side in rows of 4 D + 8 (the model's dproj); the pad keeps its 0.5
      const size_t ld = 4 * size_t(D) + 8, tokens = size_t(rows) / 4;
      Twin dzs = act(std::vector<float>(tokens * ld, 0.5f)), d_o2 = out_act(nd), dw2 = f32(randn(D, 65));
      cpu_->gated_rmsnorm_bwd(rows, D, o.c(), z.c(), w.cf(), r.cf(), dy.c(), d_o2.c(), dzs.c(), dw2.cf(), 4, ld,
                              Stream{});
      gpu_->gated_rmsnorm_bwd(rows, D, o.g(), z.g(), w.gf(), r.gf(), dy.g(), d_o2.g(), dzs.g(), dw2.gf(), 4, ld, st_);
      expect_close(dzs, kBf16Out, "dz at a row stride");
    }
  }
}

// SwiGLU over (a | b) rows: F = 256 (whole aligned groups of 8, one access each), 260 (groups of 4) and 173 (groups
// across rows: the scalar path); the backward with and without making y again, and into a y one element past
// alignment.
TEST_F(ModelKernelsGpu, SwiGlu) {
  const int rows = 37;
  for (int F : {256, 260, 173}) {
    SCOPED_TRACE("F " + std::to_string(F));
    const size_t n = size_t(rows) * F;
    Twin ab = act(randn(2 * n, 71, 3.f)), y = out_act(n);
    cpu_->swiglu_fwd(rows, F, ab.c(), y.c(), Stream{});
    gpu_->swiglu_fwd(rows, F, ab.g(), y.g(), st_);
    expect_close(y, kBf16Out, "y");

    Twin dy = act(randn(n, 73)), dab = out_act(2 * n);
    cpu_->swiglu_bwd(rows, F, ab.c(), dy.c(), dab.c(), nullptr, Stream{});
    gpu_->swiglu_bwd(rows, F, ab.g(), dy.g(), dab.g(), nullptr, st_);
    expect_close(dab, kBf16Out, "dab");

    // The backward that makes y again (the model's, which keeps no y per block): the same dab, and y exactly as the
    // forward wrote it, on each side.
    Twin dab2 = out_act(2 * n), y2 = out_act(n);
    cpu_->swiglu_bwd(rows, F, ab.c(), dy.c(), dab2.c(), y2.c(), Stream{});
    gpu_->swiglu_bwd(rows, F, ab.g(), dy.g(), dab2.g(), y2.g(), st_);
    EXPECT_EQ(gpu_values(dab2), gpu_values(dab)) << "dab with y";
    EXPECT_EQ(gpu_values(y2), gpu_values(y)) << "y from the backward";
    EXPECT_EQ(cpu_values(dab2), cpu_values(dab)) << "dab with y, CPU";
    EXPECT_EQ(cpu_values(y2), cpu_values(y)) << "y from the backward, CPU";

    // y one element past alignment (ab, dy and dab aligned): the path that y's alignment allows, the same values.
    Twin dab3 = out_act(2 * n), y3 = out_act(n + 1);
    gpu_->swiglu_bwd(rows, F, ab.g(), dy.g(), dab3.g(), y3.g(1), st_);
    EXPECT_EQ(gpu_values(dab3), gpu_values(dab)) << "dab beside an unaligned y";
    const std::vector<float> y3v = gpu_values(y3);
    EXPECT_EQ(std::vector<float>(y3v.begin() + 1, y3v.end()), gpu_values(y)) << "y unaligned";
  }
}

// Columns 5..5+cols of a [rows, 29] matrix, the rest left as it was.
// 13 of 29 columns: element by element; 16 of 40 from column 8: 16 bytes a thread.
TEST_F(ModelKernelsGpu, CopyColumns) {
  for (auto [cols, dst_cols, col] : {std::tuple<int, int, int>{13, 29, 5}, {16, 40, 8}}) {
    SCOPED_TRACE(std::to_string(cols) + " of " + std::to_string(dst_cols) + " columns from " + std::to_string(col));
    const int rows = 41;
    Twin src = act(randn(size_t(rows) * cols, 74)), dst = act(randn(size_t(rows) * dst_cols, 75));
    cpu_->copy_columns(rows, cols, src.c(), dst_cols, col, dst.c(), Stream{});
    gpu_->copy_columns(rows, cols, src.g(), dst_cols, col, dst.g(), st_);
    const std::vector<float> ref = cpu_values(dst), got = gpu_values(dst), s = cpu_values(src);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < dst_cols; ++c) {
        const size_t i = size_t(r) * dst_cols + c;
        if (c >= col && c < col + cols) ASSERT_EQ(ref[i], s[size_t(r) * cols + c - col]) << r << "," << c;
        ASSERT_EQ(got[i], round_bf16(ref[i])) << r << "," << c;  // a copy: exact
      }
  }
}

TEST_F(ModelKernelsGpu, CrossEntropy) {
  const int n = 37;
  const float grad_scale = 1.f / n;
  for (int V : {1000, 1001, 32000}) {
    SCOPED_TRACE("V " + std::to_string(V));
    std::vector<float> logits = randn(size_t(n) * V, 81, 3.f);
    for (int j = 0; j < V; ++j) logits[j] = round_bf16(logits[j] + 200.f);  // row 0: exp would overflow unshifted
    Twin l = f32(logits), loss = out_f32(n), dl = out_act(size_t(n) * V);
    Ints t = ints(randint(n, V, 82));
    cpu_->cross_entropy(n, V, l.cf(), static_cast<int32_t*>(t.cpu.get()), grad_scale, loss.cf(), dl.c(), Stream{});
    gpu_->cross_entropy(n, V, l.gf(), static_cast<int32_t*>(t.gpu.get()), grad_scale, loss.gf(), dl.g(), st_);
    expect_close(loss, kF32Out, "loss");
    expect_close(dl, kBf16Out, "dlogits");
  }
}

// p, m, v after three steps of random state; the step itself (p_new - p_old, ~lr) to 1e-4, since the two sides' p may
// differ by one fp32 ulp of p (~1e-7 of |p| ~ 1, i.e. ~1e-5 of the step).
TEST_F(ModelKernelsGpu, AdamW) {
  const size_t n = 1001;
  const float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  for (size_t off : {size_t(0), size_t(1)}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    const size_t m_elems = n - off;
    const std::vector<float> p0 = randn(n, 91);
    std::vector<float> v0 = randn(n, 94, 0.01f);
    for (float& x : v0) x = round_bf16(x * x);
    Twin p = f32(p0), g = f32(randn(n, 92, 0.1f)), m = f32(randn(n, 93, 0.01f)), v = f32(v0);
    Twin p_act = out_act(n);  // the GPU's bf16 copy of p (the CPU's act is fp32: no copy)
    for (int step = 1; step <= 3; ++step) {
      cpu_->adamw(m_elems, p.cf() + off, g.cf() + off, m.cf() + off, v.cf() + off, lr, beta1, beta2, eps, wd, step,
                  nullptr, Stream{});
      gpu_->adamw(m_elems, p.gf() + off, g.gf() + off, m.gf() + off, v.gf() + off, lr, beta1, beta2, eps, wd, step,
                  p_act.g(off), st_);
    }
    const std::vector<float> p_gpu = gpu_values(p), p_bf16 = gpu_values(p_act);
    for (size_t i = off; i < n; ++i) ASSERT_EQ(p_bf16[i], round_bf16(p_gpu[i])) << "p_act[" << i << "]";
    expect_close(p, kF32Out, "p");
    expect_close(m, kF32Out, "m");
    expect_close(v, kF32Out, "v");
    std::vector<float> dp_cpu = cpu_values(p), dp_gpu = gpu_values(p);
    for (size_t i = 0; i < n; ++i) dp_cpu[i] -= p0[i], dp_gpu[i] -= p0[i];
    const double err = rel_rms_error(dp_cpu.data() + off, dp_gpu.data() + off, m_elems);
    EXPECT_LT(err, 1e-4) << "p_new - p_old: rel RMS error " << err;
  }
}

}  // namespace
}  // namespace spb
