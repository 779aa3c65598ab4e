// The kernels of the GLA language model outside the attention's scan (DESIGN §9): dense products and the elementwise
// chains around them, one interface for the CPU (fp32, model/cpu/) and the GPU (bf16 activations with fp32
// accumulation, cuBLAS, model/cuda/), so that the model (model/gla_model.h) is written once.
//
// Every matrix is row-major and contiguous. "act" is act_dtype() (fp32 on the CPU, bf16 on the GPU); "f32" is always
// fp32. Weights are fp32 masters; the products read an act copy of them. A call is ordered on its stream like the
// GLA stages (on the CPU it has completed when it returns). "+=" accumulates into its output, "=" overwrites it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/device.h"
#include "runtime/error.h"

namespace spb {

class ModelKernels {
 public:
  virtual ~ModelKernels() = default;
  virtual DType act_dtype() const = 0;
  // Whether the calls compute values (false: a simulated device's kernels, which only advance its clocks): the model
  // skips the host work that only matters for values (drawing the weights, laying out and copying the tokens).
  virtual bool computes() const { return true; }

  // C[M, N] = alpha * op(A) op(B) + beta * C, op(A) [M, K] and op(B) [K, N]; trans_a: A is stored [K, M], trans_b:
  // B is stored [N, K]. A and B are act; C is act or f32 (c_type). beta = 0 never reads C. fp32 accumulation.
  //   y = x W^T:   gemm(false, true,  N, out, in, 1, x, W, 0, y)
  //   dx = dy W:   gemm(false, false, N, in, out, 1, dy, W, beta, dx)
  //   dW += dy^T x: gemm(true, false, out, in, N, 1, dy, x, 1, dW, f32)
  virtual void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B,
                    float beta, void* C, DType c_type, Stream st) = 0;

  // dst = src converted, n elements (f32 <-> act; the same type is a copy).
  virtual void convert(size_t n, const void* src, DType src_type, void* dst, DType dst_type, Stream st) = 0;

  // x[i, :] (f32, [n, D]) = table[tokens[i], :] (f32, [V, D]).
  virtual void embedding_fwd(int n, int D, const int32_t* tokens, const float* table, float* x, Stream st) = 0;
  // dtable[tokens[i], :] += dx[i, :].
  virtual void embedding_bwd(int n, int D, const int32_t* tokens, const float* dx, float* dtable, Stream st) = 0;

  // The residual stream's RMSNorm: y (act) = x / rms(x) * w, rms(x) = sqrt(mean(x^2) + eps) per row of D;
  // x f32 [n, D], w f32 [D], rstd f32 [n] = 1 / rms(x) (kept for the backward).
  virtual void rmsnorm_fwd(int n, int D, const float* x, const float* w, float eps, void* y, float* rstd,
                           Stream st) = 0;
  // The same after a residual add: x_out (f32) = x + delta (f32 [n, D]: a block's output product), then
  // y = RMSNorm(x_out). x_out is the residual stream's next value, written beside the old one (the backward reads
  // both).
  virtual void rmsnorm_add_fwd(int n, int D, const float* x, const float* delta, const float* w, float eps,
                               float* x_out, void* y, float* rstd, Stream st) = 0;
  // dx (f32) += d/dx, dw (f32) += d/dw, from dy f32 [n, D]; dx_act (nullable) = the act copy of the new dx (what the
  // products before the norm read next).
  virtual void rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd, const float* dy,
                           float* dx, float* dw, void* dx_act, Stream st) = 0;

  // GLA's forget gate: g (act) = logsigmoid(pre + bias) / normaliser, pre act [n, C], bias f32 [C].
  virtual void forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser, void* g,
                               Stream st) = 0;
  // dpre (act) = dg * sigmoid(-(pre + bias)) / normaliser; dbias (f32) += its column sums.
  virtual void forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser, const void* dg,
                               void* dpre, float* dbias, Stream st) = 0;

  // GLA's output gate over rows of one head (rows = tokens * heads, D = dv): y (act) = o / rms(o) * w * swish(z),
  // o, z act [rows, D], w f32 [D], rstd f32 [rows].
  virtual void gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w, float eps, void* y,
                                 float* rstd, Stream st) = 0;
  // From dy act: d_o (act) =, dz (act) =, dw (f32) +=. dz_ld 0: dz is [rows, D]; else the rows of `heads` heads sit
  // side by side in rows of dz_ld elements (row r at (r / heads) dz_ld + (r % heads) D): the model's stacked
  // projections' gradient takes dz there.
  virtual void gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w, const float* rstd,
                                 const void* dy, void* d_o, void* dz, float* dw, int heads, size_t dz_ld,
                                 Stream st) = 0;
  static void check_dz_rows(int rows, int D, int heads, size_t dz_ld) {
    SPB_CHECK(dz_ld == 0 || (heads >= 1 && rows % heads == 0 && dz_ld >= size_t(heads) * size_t(D)),
              "gated_rmsnorm_bwd: rows of " + std::to_string(dz_ld) + " elements do not hold " +
                  std::to_string(heads) + " heads of " + std::to_string(D));
  }

  // SwiGLU over rows of F: ab act [rows, 2F] holds a row's a then its b (the gate and up products of one GEMM);
  // y (act) [rows, F] = silu(a) * b; backward: dab (act) [rows, 2F] = (da | db) from dy (act) [rows, F], and y
  // (nullable) = silu(a) * b again in the same pass, the forward's values exactly (the model keeps no y per block:
  // the down product's weight gradient reads the one the backward makes).
  virtual void swiglu_fwd(int rows, int F, const void* ab, void* y, Stream st) = 0;
  virtual void swiglu_bwd(int rows, int F, const void* ab, const void* dy, void* dab, void* y, Stream st) = 0;

  // dst[:, col : col + cols] = src (act): src [rows, cols], dst [rows, dst_cols]. Lays gradients side by side so that
  // one product reads them all.
  virtual void copy_columns(int rows, int cols, const void* src, int dst_cols, int col, void* dst, Stream st) = 0;

  // Cross-entropy of n rows of logits (f32 [n, V]) against targets: loss[i] (f32) = logsumexp(logits[i]) -
  // logits[i, target[i]], and dlogits (act) = (softmax(logits[i]) - onehot(target[i])) * grad_scale.
  virtual void cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale,
                             float* loss, void* dlogits, Stream st) = 0;

  // AdamW (decoupled weight decay), n elements of fp32 p, grad, m, v; step counts from 1:
  //   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps) + lr wd p
  // p_act (nullable): the act copy of the new p, written in the same pass (what the next step's products read).
  virtual void adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1, float beta2,
                     float eps, float weight_decay, int step, void* p_act, Stream st) = 0;
};

std::unique_ptr<ModelKernels> make_cpu_model_kernels();
#ifdef SPB_HAVE_CUDA
std::unique_ptr<ModelKernels> make_cuda_model_kernels();  // model/cuda/model_cuda.cu
#endif
// The kernels for `dev`: the GPU's where it is one, the CPU's otherwise (what a level gives GlaModel unless it wraps
// or replaces them).
std::unique_ptr<ModelKernels> make_model_kernels(Device& dev);

}  // namespace spb
