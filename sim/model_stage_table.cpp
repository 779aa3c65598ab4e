#include "sim/model_stage_table.h"

#include <map>
#include <utility>

namespace spb {

namespace {

std::string key(std::initializer_list<std::pair<const char*, long long>> parts) {
  std::string s;
  for (const auto& [name, n] : parts) s += (s.empty() ? "" : " ") + std::string(name) + std::to_string(n);
  return s;
}

}  // namespace

RecordingModelKernels::RecordingModelKernels(std::unique_ptr<ModelKernels> inner, Device& dev)
    : inner_(std::move(inner)), dev_(dev) {}

RecordingModelKernels::~RecordingModelKernels() {
  for (Call& c : calls_) free_events_.push_back(c.start), free_events_.push_back(c.stop);
  for (Event e : free_events_) dev_.destroy_event(e);
}

Event RecordingModelKernels::take_event() {
  if (free_events_.empty()) return dev_.create_event(EventUse::timing);
  const Event e = free_events_.back();
  free_events_.pop_back();
  return e;
}

template <class Body>
void RecordingModelKernels::timed(const char* stage, const std::string& shape, Stream st, Body&& body) {
  if (!recording_) return body();
  calls_.push_back({stage, shape, take_event(), take_event()});
  const Call& c = calls_.back();
  dev_.record(c.start, st);
  body();
  dev_.record(c.stop, st);
}

std::vector<StageSample> RecordingModelKernels::take() {
  dev_.synchronize();
  std::map<std::pair<std::string, std::string>, std::vector<double>> by_key;
  for (Call& c : calls_) {
    by_key[{c.stage, c.shape}].push_back(dev_.elapsed_ms(c.start, c.stop));
    free_events_.push_back(c.start), free_events_.push_back(c.stop);
  }
  calls_.clear();
  std::vector<StageSample> out;
  for (auto& [k, ms] : by_key) out.push_back({k.first, k.second, std::move(ms)});
  return out;
}

void RecordingModelKernels::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                                 const void* B, float beta, void* C, DType c_type, Stream st) {
  const std::string shape =
      key({{"ta", trans_a}, {"tb", trans_b}, {"M", M}, {"N", N}, {"K", K}}) + " c_" + dtype_name(c_type);
  timed("gemm", shape, st, [&] { inner_->gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, c_type, st); });
}
void RecordingModelKernels::convert(size_t n, const void* src, DType src_type, void* dst, DType dst_type, Stream st) {
  const std::string shape = key({{"n", (long long)n}}) + " " + dtype_name(src_type) + "_to_" + dtype_name(dst_type);
  timed("convert", shape, st, [&] { inner_->convert(n, src, src_type, dst, dst_type, st); });
}
void RecordingModelKernels::embedding_fwd(int n, int D, const int32_t* tokens, const float* table, float* x,
                                          Stream st) {
  timed("embedding_fwd", key({{"n", n}, {"D", D}}), st, [&] { inner_->embedding_fwd(n, D, tokens, table, x, st); });
}
void RecordingModelKernels::embedding_bwd(int n, int D, const int32_t* tokens, const float* dx, float* dtable,
                                          Stream st) {
  timed("embedding_bwd", key({{"n", n}, {"D", D}}), st, [&] { inner_->embedding_bwd(n, D, tokens, dx, dtable, st); });
}
void RecordingModelKernels::rmsnorm_fwd(int n, int D, const float* x, const float* w, float eps, void* y, float* rstd,
                                        Stream st) {
  timed("rmsnorm_fwd", key({{"n", n}, {"D", D}}), st, [&] { inner_->rmsnorm_fwd(n, D, x, w, eps, y, rstd, st); });
}
void RecordingModelKernels::rmsnorm_add_fwd(int n, int D, const float* x, const float* delta, const float* w,
                                            float eps, float* x_out, void* y, float* rstd, Stream st) {
  timed("rmsnorm_add_fwd", key({{"n", n}, {"D", D}}), st,
        [&] { inner_->rmsnorm_add_fwd(n, D, x, delta, w, eps, x_out, y, rstd, st); });
}
void RecordingModelKernels::rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd,
                                        const float* dy, float* dx, float* dw, void* dx_act, Stream st) {
  timed("rmsnorm_bwd", key({{"n", n}, {"D", D}, {"dx_act", dx_act != nullptr}}), st,
        [&] { inner_->rmsnorm_bwd(n, D, x, w, rstd, dy, dx, dw, dx_act, st); });
}
void RecordingModelKernels::forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser,
                                            void* g, Stream st) {
  timed("forget_gate_fwd", key({{"n", n}, {"C", C}}), st,
        [&] { inner_->forget_gate_fwd(n, C, pre, bias, normaliser, g, st); });
}
void RecordingModelKernels::forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser,
                                            const void* dg, void* dpre, float* dbias, Stream st) {
  timed("forget_gate_bwd", key({{"n", n}, {"C", C}}), st,
        [&] { inner_->forget_gate_bwd(n, C, pre, bias, normaliser, dg, dpre, dbias, st); });
}
void RecordingModelKernels::gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w,
                                              float eps, void* y, float* rstd, Stream st) {
  timed("gated_rmsnorm_fwd", key({{"rows", rows}, {"D", D}}), st,
        [&] { inner_->gated_rmsnorm_fwd(rows, D, o, z, w, eps, y, rstd, st); });
}
void RecordingModelKernels::gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w,
                                              const float* rstd, const void* dy, void* d_o, void* dz, float* dw,
                                              int heads, size_t dz_ld, Stream st) {
  timed("gated_rmsnorm_bwd", key({{"rows", rows}, {"D", D}, {"heads", heads}, {"ld", (long long)dz_ld}}), st,
        [&] { inner_->gated_rmsnorm_bwd(rows, D, o, z, w, rstd, dy, d_o, dz, dw, heads, dz_ld, st); });
}
void RecordingModelKernels::swiglu_fwd(int rows, int F, const void* ab, void* y, Stream st) {
  timed("swiglu_fwd", key({{"rows", rows}, {"F", F}}), st, [&] { inner_->swiglu_fwd(rows, F, ab, y, st); });
}
void RecordingModelKernels::swiglu_bwd(int rows, int F, const void* ab, const void* dy, void* dab, void* y,
                                       Stream st) {
  timed("swiglu_bwd", key({{"rows", rows}, {"F", F}, {"y", y != nullptr}}), st,
        [&] { inner_->swiglu_bwd(rows, F, ab, dy, dab, y, st); });
}
void RecordingModelKernels::copy_columns(int rows, int cols, const void* src, int dst_cols, int col, void* dst,
                                         Stream st) {
  timed("copy_columns", key({{"rows", rows}, {"cols", cols}, {"dst_cols", dst_cols}}), st,
        [&] { inner_->copy_columns(rows, cols, src, dst_cols, col, dst, st); });
}
void RecordingModelKernels::cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale,
                                          float* loss, void* dlogits, Stream st) {
  timed("cross_entropy", key({{"n", n}, {"V", V}}), st,
        [&] { inner_->cross_entropy(n, V, logits, targets, grad_scale, loss, dlogits, st); });
}
void RecordingModelKernels::adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1,
                                  float beta2, float eps, float weight_decay, int step, void* p_act, Stream st) {
  timed("adamw", key({{"n", (long long)n}, {"act_copy", p_act != nullptr}}), st,
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
