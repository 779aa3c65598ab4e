#include "sim/stage_table_gdn.h"

#include <utility>

namespace spb {

std::string gdn_stage_shape_key(const GdnShape& s) {
  return stage_key({{"B", s.B}, {"T", s.T}, {"H", s.H}, {"dk", s.dk}, {"dv", s.dv}});
}

std::string gdn_rank_map_key(const GdnShape& s, bool with_A) {
  return gdn_stage_shape_key(s) + " " + stage_key({{"A", with_A}});
}

std::string gdn_dense_key(size_t heads, size_t n) {
  return stage_key({{"heads", (long long)heads}, {"n", (long long)n}});
}

std::string gdn_dense_apply_key(size_t heads, size_t n, size_t cols) {
  return stage_key({{"heads", (long long)heads}, {"n", (long long)n}, {"cols", (long long)cols}});
}

RecordingGdnKernels::RecordingGdnKernels(std::unique_ptr<GdnKernels> inner, Device& dev)
    : inner_(std::move(inner)), rec_(dev) {}

void RecordingGdnKernels::forward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g,
                                  const float* beta, const float* h0, void* o, float* ht, Stream st) {
  rec_.timed("gdn_forward", gdn_stage_shape_key(s), st,
             [&] { inner_->forward(s, q, k, v, g, beta, h0, o, ht, st); });
}
void RecordingGdnKernels::backward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g,
                                   const float* beta, const float* h0, const void* d_o, const float* dht, void* dq,
                                   void* dk, void* dv, float* dg, float* dbeta, float* dh0, Stream st) {
  rec_.timed("gdn_backward", gdn_stage_shape_key(s), st,
             [&] { inner_->backward(s, q, k, v, g, beta, h0, d_o, dht, dq, dk, dv, dg, dbeta, dh0, st); });
}
void RecordingGdnKernels::rank_map(const GdnShape& s, const void* k, const void* v, const float* g, const float* beta,
                                   float* A, float* M, Stream st) {
  rec_.timed("gdn_rank_map", gdn_rank_map_key(s, A != nullptr), st,
             [&] { inner_->rank_map(s, k, v, g, beta, A, M, st); });
}
void RecordingGdnKernels::initial_dstate(const GdnShape& s, const void* q, const void* k, const float* g,
                                         const float* beta, const void* d_o, float* D, Stream st) {
  rec_.timed("gdn_initial_dstate", gdn_stage_shape_key(s), st,
             [&] { inner_->initial_dstate(s, q, k, g, beta, d_o, D, st); });
}
void RecordingGdnKernels::dense_apply(size_t heads, size_t n, size_t cols, const float* A, const float* x,
                                      const float* b, float* out, Stream st) {
  rec_.timed("gdn_dense_apply", gdn_dense_apply_key(heads, n, cols), st,
             [&] { inner_->dense_apply(heads, n, cols, A, x, b, out, st); });
}
void RecordingGdnKernels::dense_product(size_t heads, size_t n, const float* A2, const float* A1, float* out,
                                        Stream st) {
  rec_.timed("gdn_dense_product", gdn_dense_key(heads, n), st,
             [&] { inner_->dense_product(heads, n, A2, A1, out, st); });
}
void RecordingGdnKernels::dense_transpose(size_t heads, size_t n, const float* A, float* out, Stream st) {
  rec_.timed("gdn_dense_transpose", gdn_dense_key(heads, n), st,
             [&] { inner_->dense_transpose(heads, n, A, out, st); });
}
void RecordingGdnKernels::dense_identity(size_t heads, size_t n, float* out, Stream st) {
  rec_.timed("gdn_dense_identity", gdn_dense_key(heads, n), st, [&] { inner_->dense_identity(heads, n, out, st); });
}

}  // namespace spb
