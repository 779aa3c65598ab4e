#include "sim/model_stage_table.h"

#include <utility>

namespace spb {

std::string gemm_shape_key(bool trans_a, bool trans_b, int M, int N, int K, DType c_type) {
  return stage_key({{"ta", trans_a}, {"tb", trans_b}, {"M", M}, {"N", N}, {"K", K}}) + " c_" + dtype_name(c_type);
}

std::string convert_shape_key(size_t n, DType src_type, DType dst_type) {
  return stage_key({{"n", (long long)n}}) + " " + dtype_name(src_type) + "_to_" + dtype_name(dst_type);
}

RecordingModelKernels::RecordingModelKernels(std::unique_ptr<ModelKernels> inner, Device& dev)
    : inner_(std::move(inner)), rec_(dev) {}

void RecordingModelKernels::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                                 const void* B, float beta, void* C, DType c_type, Stream st) {
  rec_.timed("gemm", gemm_shape_key(trans_a, trans_b, M, N, K, c_type), st,
             [&] { inner_->gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, c_type, st); });
}
void RecordingModelKernels::convert(size_t n, const void* src, DType src_type, void* dst, DType dst_type, Stream st) {
  rec_.timed("convert", convert_shape_key(n, src_type, dst_type), st,
             [&] { inner_->convert(n, src, src_type, dst, dst_type, st); });
}
void RecordingModelKernels::embedding_fwd(int n, int D, const int32_t* tokens, const float* table, float* x,
                                          Stream st) {
  rec_.timed("embedding_fwd", stage_key({{"n", n}, {"D", D}}), st,
             [&] { inner_->embedding_fwd(n, D, tokens, table, x, st); });
}
void RecordingModelKernels::embedding_bwd(int n, int D, const int32_t* tokens, const float* dx, float* dtable,
                                          Stream st) {
  rec_.timed("embedding_bwd", stage_key({{"n", n}, {"D", D}}), st,
             [&] { inner_->embedding_bwd(n, D, tokens, dx, dtable, st); });
}
void RecordingModelKernels::rmsnorm_fwd(int n, int D, const float* x, const float* w, float eps, void* y, float* rstd,
                                        Stream st) {
  rec_.timed("rmsnorm_fwd", stage_key({{"n", n}, {"D", D}}), st,
             [&] { inner_->rmsnorm_fwd(n, D, x, w, eps, y, rstd, st); });
}
void RecordingModelKernels::rmsnorm_add_fwd(int n, int D, const float* x, const float* delta, const float* w,
                                            float eps, float* x_out, void* y, float* rstd, Stream st) {
  rec_.timed("rmsnorm_add_fwd", stage_key({{"n", n}, {"D", D}}), st,
             [&] { inner_->rmsnorm_add_fwd(n, D, x, delta, w, eps, x_out, y, rstd, st); });
}
void RecordingModelKernels::rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd,
                                        const float* dy, float* dx, float* dw, void* dx_act, Stream st) {
  rec_.timed("rmsnorm_bwd", stage_key({{"n", n}, {"D", D}, {"dx_act", dx_act != nullptr}}), st,
             [&] { inner_->rmsnorm_bwd(n, D, x, w, rstd, dy, dx, dw, dx_act, st); });
}
void RecordingModelKernels::forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser,
                                            void* g, Stream st) {
  rec_.timed("forget_gate_fwd", stage_key({{"n", n}, {"C", C}}), st,
             [&] { inner_->forget_gate_fwd(n, C, pre, bias, normaliser, g, st); });
}
void RecordingModelKernels::forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser,
                                            const void* dg, void* dpre, float* dbias, Stream st) {
  rec_.timed("forget_gate_bwd", stage_key({{"n", n}, {"C", C}}), st,
             [&] { inner_->forget_gate_bwd(n, C, pre, bias, normaliser, dg, dpre, dbias, st); });
}
void RecordingModelKernels::gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w,
                                              float eps, void* y, float* rstd, Stream st) {
  rec_.timed("gated_rmsnorm_fwd", stage_key({{"rows", rows}, {"D", D}}), st,
             [&] { inner_->gated_rmsnorm_fwd(rows, D, o, z, w, eps, y, rstd, st); });
}
void RecordingModelKernels::gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w,
                                              const float* rstd, const void* dy, void* d_o, void* dz, float* dw,
                                              int heads, size_t dz_ld, Stream st) {
  rec_.timed("gated_rmsnorm_bwd", stage_key({{"rows", rows}, {"D", D}, {"heads", heads}, {"ld", (long long)dz_ld}}), st,
             [&] { inner_->gated_rmsnorm_bwd(rows, D, o, z, w, rstd, dy, d_o, dz, dw, heads, dz_ld, st); });
}
void RecordingModelKernels::swiglu_fwd(int rows, int F, const void* ab, void* y, Stream st) {
  rec_.timed("swiglu_fwd", stage_key({{"rows", rows}, {"F", F}}), st, [&] { inner_->swiglu_fwd(rows, F, ab, y, st); });
}
void RecordingModelKernels::swiglu_bwd(int rows, int F, const void* ab, const void* dy, void* dab, void* y,
                                       Stream st) {
  rec_.timed("swiglu_bwd", stage_key({{"rows", rows}, {"F", F}, {"y", y != nullptr}}), st,
             [&] { inner_->swiglu_bwd(rows, F, ab, dy, dab, y, st); });
}
void RecordingModelKernels::copy_columns(int rows, int cols, const void* src, int dst_cols, int col, void* dst,
                                         Stream st) {
  rec_.timed("copy_columns", stage_key({{"rows", rows}, {"cols", cols}, {"dst_cols", dst_cols}}), st,
             [&] { inner_->copy_columns(rows, cols, src, dst_cols, col, dst, st); });
}
void RecordingModelKernels::cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale,
                                          float* loss, void* dlogits, Stream st) {
  rec_.timed("cross_entropy", stage_key({{"n", n}, {"V", V}}), st,
             [&] { inner_->cross_entropy(n, V, logits, targets, grad_scale, loss, dlogits, st); });
}
void RecordingModelKernels::adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1,
                                  float beta2, float eps, float weight_decay, int step, void* p_act, Stream st) {
  rec_.timed("adamw", stage_key({{"n", (long long)n}, {"act_copy", p_act != nullptr}}), st,
             [&] { inner_->adamw(n, p, grad, m, v, lr, beta1, beta2, eps, weight_decay, step, p_act, st); });
}

const std::vector<std::string>& model_stage_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> c = stage_columns();
    for (const char* m : {"layers", "hidden", "vocab", "expand_k", "expand_v", "mlp", "recompute", "head_groups",
                          "grad_overlap", "shard_optimizer", "wgrad_beside"})
      c.push_back(m);
    return c;
  }();
  return cols;
}

}  // namespace spb
