// The CUDA GdnKernels: each stage is a few kernels of gdn_forward.cu, gdn_backward.cu and gdn_dense.cu launched in
// order on the caller's stream, over scratch the object allocates on the first call for a shape and keeps (grown,
// never shrunk), so that a warm call allocates nothing. The backward recomputes the forward's chunk factors and states
// from the inputs and h0, as the interface asks (it keeps nothing between calls).
#include "kernels/gdn/cuda/gdn_cuda.h"

#include <cstdint>
#include <string>

#include "kernels/gdn/cuda/gdn_cuda_internal.h"
#include "runtime/cuda_check.h"
#include "runtime/error.h"

namespace spb {

namespace {

using gdn_cuda::bf16;
using gdn_cuda::Dims;
using gdn_cuda::kChunk;

cudaStream_t stream_of(Stream s) { return static_cast<cudaStream_t>(s.handle); }

// The recurrences stage q, k and do by 16-byte cp.async copies.
void check_aligned(const void* p, const char* what) {
  SPB_USAGE(reinterpret_cast<uintptr_t>(p) % 16 == 0,
            std::string("the CUDA GDN kernels need ") + what + " 16-byte aligned");
}

void check_dim(int x, const char* what) {
  if (x < 16 || x > gdn_cuda::kMaxDim || x % 16 != 0)
    throw UsageError(std::string("the CUDA GDN kernels take ") + what + " a multiple of 16 from 16 to " +
                     std::to_string(gdn_cuda::kMaxDim) + ", not " + std::to_string(x));
}

Dims dims_of(const GdnShape& s) {
  SPB_USAGE(s.B >= 1 && s.T >= 1 && s.H >= 1, "the CUDA GDN kernels need B, T, H >= 1");
  SPB_USAGE(s.H <= 65535 && s.B <= 65535, "the CUDA GDN kernels take at most 65535 heads and batch elements");
  check_dim(s.dk, "dk");
  check_dim(s.dv, "dv");
  return Dims{s.B, s.T, s.H, s.dk, s.dv, (s.T + kChunk - 1) / kChunk};
}

// A device buffer of floats that grows on demand.
struct Grown {
  float* p = nullptr;
  size_t cap = 0;
  float* at_least(size_t n) {
    if (n > cap) {
      if (p) SPB_CUDA(cudaFree(p));
      p = nullptr, cap = 0;
      SPB_CUDA(cudaMalloc(&p, n * sizeof(float)));
      cap = n;
    }
    return p;
  }
  ~Grown() {
    if (p) cudaFree(p);
  }
};

class CudaGdnKernels final : public GdnKernels {
 public:
  DType act_dtype() const override { return DType::bf16; }

  void forward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g, const float* beta,
               const float* h0, void* o, float* ht, Stream st) override {
    const Dims d = dims_of(s);
    check_aligned(k, "k");
    const gdn_cuda::Scratch sc = scratch(d, kForward);
    const cudaStream_t cs = stream_of(st);
    gdn_cuda::launch_chunk_prep(d, bf(k), bf(v), g, beta, sc, cs);
    gdn_cuda::launch_states_fwd(d, d.V, bf(k), sc.gam, sc.W, sc.U0, h0, false, sc.Hs, sc.U, ht, cs);
    gdn_cuda::launch_output(d, bf(q), bf(k), sc, static_cast<bf16*>(o), cs);
  }

  void backward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g, const float* beta,
                const float* h0, const void* d_o, const float* dht, void* dq, void* dk, void* dv, float* dg,
                float* dbeta, float* dh0, Stream st) override {
    const Dims d = dims_of(s);
    check_aligned(q, "q"), check_aligned(k, "k"), check_aligned(v, "v"), check_aligned(d_o, "do");
    const gdn_cuda::Scratch sc = scratch(d, kBackward);
    const cudaStream_t cs = stream_of(st);
    gdn_cuda::launch_chunk_prep(d, bf(k), bf(v), g, beta, sc, cs);
    gdn_cuda::launch_states_fwd(d, d.V, bf(k), sc.gam, sc.W, sc.U0, h0, false, sc.Hs, sc.U, nullptr, cs);
    gdn_cuda::launch_dUo(d, bf(q), bf(k), bf(d_o), sc, cs);
    gdn_cuda::launch_states_bwd(d, bf(q), bf(k), bf(d_o), sc, dht, sc.dHs, sc.dU, dh0, cs);
    gdn_cuda::launch_chunk_grads(d, bf(q), bf(k), bf(v), beta, bf(d_o), sc, static_cast<bf16*>(dq),
                                 static_cast<bf16*>(dk), static_cast<bf16*>(dv), dg, dbeta, cs);
  }

  void rank_map(const GdnShape& s, const void* k, const void* v, const float* g, const float* beta, float* A,
                float* M, Stream st) override {
    const Dims d = dims_of(s);
    check_aligned(k, "k");
    const gdn_cuda::Scratch sc = scratch(d, kFactors);
    const cudaStream_t cs = stream_of(st);
    gdn_cuda::launch_chunk_prep(d, bf(k), M ? bf(v) : nullptr, g, beta, sc, cs);
    // M: the forward's recurrence from a zero state; A: the same recurrence with U0 = 0 from the identity, over a
    // state of dk columns, i.e. the ordered product of A_c = e^{gamma_C} I - K~^T W.
    if (M) gdn_cuda::launch_states_fwd(d, d.V, bf(k), sc.gam, sc.W, sc.U0, nullptr, false, nullptr, nullptr, M, cs);
    if (A) gdn_cuda::launch_states_fwd(d, d.K, bf(k), sc.gam, sc.W, nullptr, nullptr, true, nullptr, nullptr, A, cs);
  }

  void initial_dstate(const GdnShape& s, const void* q, const void* k, const float* g, const float* beta,
                      const void* d_o, float* D, Stream st) override {
    const Dims d = dims_of(s);
    check_aligned(q, "q"), check_aligned(k, "k"), check_aligned(d_o, "do");
    const gdn_cuda::Scratch sc = scratch(d, kInitialDstate);
    const cudaStream_t cs = stream_of(st);
    gdn_cuda::launch_chunk_prep(d, bf(k), nullptr, g, beta, sc, cs);
    gdn_cuda::launch_dUo(d, bf(q), bf(k), bf(d_o), sc, cs);
    gdn_cuda::launch_states_bwd(d, bf(q), bf(k), bf(d_o), sc, nullptr, nullptr, nullptr, D, cs);
  }

  void dense_apply(size_t heads, size_t n, size_t cols, const float* A, const float* x, const float* b, float* out,
                   Stream st) override {
    if (heads * n * cols == 0) return;
    float* tmp = dense_tmp_.at_least(heads * n * cols);
    gdn_cuda::launch_dense_apply(heads, n, cols, A, x, b, tmp, stream_of(st));
    gdn_cuda::launch_copy(heads * n * cols, tmp, out, stream_of(st));
  }
  void dense_product(size_t heads, size_t n, const float* A2, const float* A1, float* out, Stream st) override {
    if (heads * n == 0) return;
    float* tmp = dense_tmp_.at_least(heads * n * n);
    gdn_cuda::launch_dense_product(heads, n, A2, A1, tmp, stream_of(st));
    gdn_cuda::launch_copy(heads * n * n, tmp, out, stream_of(st));
  }
  void dense_transpose(size_t heads, size_t n, const float* A, float* out, Stream st) override {
    if (heads * n == 0) return;
    float* tmp = dense_tmp_.at_least(heads * n * n);
    gdn_cuda::launch_dense_transpose(heads, n, A, tmp, stream_of(st));
    gdn_cuda::launch_copy(heads * n * n, tmp, out, stream_of(st));
  }
  void dense_identity(size_t heads, size_t n, float* out, Stream st) override {
    if (heads * n == 0) return;
    gdn_cuda::launch_dense_identity(heads, n, out, stream_of(st));
  }

 private:
  enum Pass { kFactors, kInitialDstate, kForward, kBackward };
  static const bf16* bf(const void* p) { return static_cast<const bf16*>(p); }

  // The scratch a pass needs at shape d (gdn_cuda_common.cuh has the layouts); what it does not need stays null.
  gdn_cuda::Scratch scratch(const Dims& d, Pass pass) {
    const size_t bhc = size_t(d.B) * d.H * d.NC, bh = size_t(d.B) * d.H;
    gdn_cuda::Scratch s;
    s.gam = gam_.at_least(bhc * kChunk);
    s.Tm = Tm_.at_least(bhc * kChunk * kChunk);
    s.W = W_.at_least(bhc * kChunk * d.K);
    s.U0 = U0_.at_least(bhc * kChunk * d.V);
    if (pass == kForward || pass == kBackward) {
      s.Hs = Hs_.at_least(bh * (d.NC + 1) * d.K * d.V);
      s.U = U_.at_least(bhc * kChunk * d.V);
    }
    if (pass == kInitialDstate || pass == kBackward) s.dUo = dUo_.at_least(bhc * kChunk * d.V);
    if (pass == kBackward) {
      s.dHs = dHs_.at_least(bhc * d.K * d.V);
      s.dU = dU_.at_least(bhc * kChunk * d.V);
    }
    return s;
  }

  Grown gam_, Tm_, W_, U0_, Hs_, U_, dUo_, dHs_, dU_, dense_tmp_;
};

}  // namespace

std::unique_ptr<GdnKernels> make_cuda_gdn_kernels() { return std::make_unique<CudaGdnKernels>(); }

}  // namespace spb
