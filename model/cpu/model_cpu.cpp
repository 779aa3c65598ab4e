// The model's kernels on CPU ranks: fp32 activations, the templates of model_cpu_ops.h at float.
#include <cstring>

#include "runtime/error.h"
#include "model/cpu/model_cpu_ops.h"
#include "model/model_kernels.h"

namespace spb {
namespace {

const float* F(const void* p) { return static_cast<const float*>(p); }
float* F(void* p) { return static_cast<float*>(p); }

class CpuModelKernels final : public ModelKernels {
 public:
  DType act_dtype() const override { return DType::f32; }

  void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const void* A, const void* B, float beta, void* C,
            DType c_type, Stream) override {
    SPB_CHECK(c_type == DType::f32, "the CPU model kernels hold every tensor in fp32");
    cpu_ops::gemm(ta, tb, M, N, K, alpha, F(A), F(B), beta, F(C));
  }
  void convert(size_t n, const void* src, DType st, void* dst, DType dt, Stream) override {
    SPB_CHECK(st == DType::f32 && dt == DType::f32, "the CPU model kernels hold every tensor in fp32");
    if (dst != src) std::memmove(dst, src, n * sizeof(float));
  }
  void embedding_fwd(int n, int D, const int32_t* tokens, const float* table, float* x, Stream) override {
    cpu_ops::embedding_fwd(n, D, tokens, table, x);
  }
  void embedding_bwd(int n, int D, const int32_t* tokens, const float* dx, float* dtable, Stream) override {
    cpu_ops::embedding_bwd(n, D, tokens, dx, dtable);
  }
  void rmsnorm_fwd(int n, int D, const float* x, const float* w, float eps, void* y, float* rstd, Stream) override {
    cpu_ops::rmsnorm_fwd(n, D, x, w, eps, F(y), rstd);
  }
  void rmsnorm_add_fwd(int n, int D, const float* x, const float* delta, const float* w, float eps, float* x_out,
                       void* y, float* rstd, Stream) override {
    const size_t nd = size_t(n) * D;
    for (size_t i = 0; i < nd; ++i) x_out[i] = x[i] + delta[i];
    cpu_ops::rmsnorm_fwd(n, D, x_out, w, eps, F(y), rstd);
  }
  void rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                   float* dw, void* dx_act, Stream) override {
    cpu_ops::rmsnorm_bwd(n, D, x, w, rstd, dy, dx, dw, true);
    if (dx_act && dx_act != dx) std::memcpy(dx_act, dx, size_t(n) * D * sizeof(float));
  }
  void forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser, void* g, Stream) override {
    cpu_ops::forget_gate_fwd(n, C, F(pre), bias, normaliser, F(g));
  }
  void forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser, const void* dg, void* dpre,
                       float* dbias, Stream) override {
    cpu_ops::forget_gate_bwd(n, C, F(pre), bias, normaliser, F(dg), F(dpre), dbias);
  }
  void gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w, float eps, void* y,
                         float* rstd, Stream) override {
    cpu_ops::rmsnorm_fwd(rows, D, F(o), w, eps, F(y), rstd, F(z));
  }
  void gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w, const float* rstd,
                         const void* dy, void* d_o, void* dz, float* dw, int heads, size_t dz_ld, Stream) override {
    check_dz_rows(rows, D, heads, dz_ld);
    cpu_ops::rmsnorm_bwd(rows, D, F(o), w, rstd, F(dy), F(d_o), dw, false, F(z), F(dz), heads, dz_ld);
  }
  void swiglu_fwd(int rows, int f, const void* ab, void* y, Stream) override {
    cpu_ops::swiglu_fwd(rows, f, F(ab), F(y));
  }
  void swiglu_bwd(int rows, int f, const void* ab, const void* dy, void* dab, void* y, Stream) override {
    cpu_ops::swiglu_bwd(rows, f, F(ab), F(dy), F(dab), F(y));
  }
  void copy_columns(int rows, int cols, const void* src, int dst_cols, int col, void* dst, Stream) override {
    for (int r = 0; r < rows; ++r)
      std::memcpy(F(dst) + size_t(r) * dst_cols + col, F(src) + size_t(r) * cols, size_t(cols) * sizeof(float));
  }
  void cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                     void* dlogits, Stream) override {
    cpu_ops::cross_entropy(n, V, logits, targets, grad_scale, loss, F(dlogits));
  }
  void adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1, float beta2, float eps,
             float weight_decay, int step, void* p_act, Stream) override {
    cpu_ops::adamw(n, p, grad, m, v, lr, beta1, beta2, eps, weight_decay, step);
    if (p_act && p_act != p) std::memcpy(p_act, p, n * sizeof(float));  // act is fp32 here
  }
};

}  // namespace

std::unique_ptr<ModelKernels> make_cpu_model_kernels() { return std::make_unique<CpuModelKernels>(); }

}  // namespace spb
