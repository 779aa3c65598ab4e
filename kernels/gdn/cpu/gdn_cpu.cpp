// Gated DeltaNet's stages on the CPU (kernels/gdn/gdn_kernels.h), fp32 in host memory: the chunked functions of
// gdn_chunked.h behind the stage interface, and the dense rank map's arithmetic as plain loops. Work runs at the
// call, so a stream orders nothing here.
#include <cstring>
#include <vector>

#include "kernels/gdn/cpu/gdn_chunked.h"
#include "kernels/gdn/gdn_kernels.h"

namespace spb {
namespace {

std::vector<float> take(const void* p, size_t n) {
  const float* f = static_cast<const float*>(p);
  return f ? std::vector<float>(f, f + n) : std::vector<float>();
}
void put(const std::vector<float>& x, void* dst) {
  if (dst) std::memcpy(dst, x.data(), x.size() * 4);
}

class CpuGdnKernels final : public GdnKernels {
 public:
  DType act_dtype() const override { return DType::f32; }

  void forward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g, const float* beta,
               const float* h0, void* o, float* ht, Stream) override {
    const GdnForward f = gdn_chunked_forward(s, take(q, s.qk_elems()), take(k, s.qk_elems()), take(v, s.v_elems()),
                                             take(g, s.gate_elems()), take(beta, s.gate_elems()),
                                             take(h0, s.state_elems()));
    put(f.o, o);
    put(f.ht, ht);
  }

  void backward(const GdnShape& s, const void* q, const void* k, const void* v, const float* g, const float* beta,
                const float* h0, const void* d_o, const float* dht, void* dq, void* dk, void* dv, float* dg,
                float* dbeta, float* dh0, Stream) override {
    const GdnBackward b = gdn_chunked_backward(
        s, take(q, s.qk_elems()), take(k, s.qk_elems()), take(v, s.v_elems()), take(g, s.gate_elems()),
        take(beta, s.gate_elems()), take(h0, s.state_elems()), take(d_o, s.v_elems()), take(dht, s.state_elems()));
    put(b.dq, dq), put(b.dk, dk), put(b.dv, dv), put(b.dg, dg), put(b.dbeta, dbeta), put(b.dh0, dh0);
  }

  void rank_map(const GdnShape& s, const void* k, const void* v, const float* g, const float* beta, float* A,
                float* M, Stream) override {
    const GdnMap m = gdn_chunked_rank_map(s, take(k, s.qk_elems()), take(v, s.v_elems()), take(g, s.gate_elems()),
                                          take(beta, s.gate_elems()));
    put(m.A, A);
    put(m.M, M);
  }

  // The backward's dh0 from a zero final gradient; the values v do not reach it, so zeros stand in for them.
  void initial_dstate(const GdnShape& s, const void* q, const void* k, const float* g, const float* beta,
                      const void* d_o, float* D, Stream) override {
    const GdnBackward b = gdn_chunked_backward(s, take(q, s.qk_elems()), take(k, s.qk_elems()),
                                               std::vector<float>(s.v_elems(), 0.0f), take(g, s.gate_elems()),
                                               take(beta, s.gate_elems()), {}, take(d_o, s.v_elems()), {});
    put(b.dh0, D);
  }

  void dense_apply(size_t heads, size_t n, size_t cols, const float* A, const float* x, const float* b, float* out,
                   Stream) override {
    std::vector<float> y(n * cols);
    for (size_t h = 0; h < heads; ++h) {
      const float* a = A + h * n * n;
      const float *xh = x + h * n * cols, *bh = b + h * n * cols;
      for (size_t r = 0; r < n; ++r)
        for (size_t c = 0; c < cols; ++c) {
          float acc = bh[r * cols + c];
          for (size_t i = 0; i < n; ++i) acc += a[r * n + i] * xh[i * cols + c];
          y[r * cols + c] = acc;
        }
      std::memcpy(out + h * n * cols, y.data(), y.size() * 4);
    }
  }

  void dense_product(size_t heads, size_t n, const float* A2, const float* A1, float* out, Stream) override {
    std::vector<float> y(n * n);
    for (size_t h = 0; h < heads; ++h) {
      const float *a2 = A2 + h * n * n, *a1 = A1 + h * n * n;
      for (size_t r = 0; r < n; ++r)
        for (size_t c = 0; c < n; ++c) {
          float acc = 0.0f;
          for (size_t i = 0; i < n; ++i) acc += a2[r * n + i] * a1[i * n + c];
          y[r * n + c] = acc;
        }
      std::memcpy(out + h * n * n, y.data(), y.size() * 4);
    }
  }

  void dense_transpose(size_t heads, size_t n, const float* A, float* out, Stream) override {
    std::vector<float> y(n * n);
    for (size_t h = 0; h < heads; ++h) {
      for (size_t r = 0; r < n; ++r)
        for (size_t c = 0; c < n; ++c) y[c * n + r] = A[h * n * n + r * n + c];
      std::memcpy(out + h * n * n, y.data(), y.size() * 4);
    }
  }

  void dense_identity(size_t heads, size_t n, float* out, Stream) override {
    std::memset(out, 0, heads * n * n * 4);
    for (size_t h = 0; h < heads; ++h)
      for (size_t r = 0; r < n; ++r) out[h * n * n + r * n + r] = 1.0f;
  }
};

}  // namespace

std::unique_ptr<GdnKernels> make_cpu_gdn_kernels() { return std::make_unique<CpuGdnKernels>(); }

}  // namespace spb
