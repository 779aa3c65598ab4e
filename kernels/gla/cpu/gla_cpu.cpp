// The chunked GLA stages on the CPU, in fp32: the shape of the algorithm the CUDA kernels implement, written plainly,
// one (batch, head) pair and one chunk at a time. Checked against the fp64 token loop (gla_reference.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/error.h"
#include "kernels/gla/gla_kernels.h"

namespace spb {

float GlaShape::scale() const { return 1.0f / std::sqrt(float(dk)); }

GlaShape GlaShape::pair_range(int begin, int count) const {
  SPB_CHECK(begin >= 0 && count >= 1 && long(begin) + count <= long(B) * H,
            "GlaShape::pair_range: pairs [" + std::to_string(begin) + ", " + std::to_string(long(begin) + count) +
                ") outside the " + std::to_string(long(B) * H) + " (b, h) pairs");
  GlaShape s = *this;
  s.pair_begin = begin, s.pair_count = count;
  return s;
}

std::vector<GlaShape> GlaShape::split_pairs(int n) const {
  SPB_CHECK(n >= 1 && n <= pairs(),
            "GlaShape::split_pairs: " + std::to_string(n) + " ranges of " + std::to_string(pairs()) + " pairs");
  std::vector<GlaShape> out;
  for (int i = 0, begin = pair_begin; i < n; ++i) {
    const int count = pairs() / n + (i < pairs() % n);
    out.push_back(pair_range(begin, count));
    begin += count;
  }
  return out;
}

namespace {

// Strided views of one (b, h) pair of a [B, T, H, D] tensor and of its [NT, dk, dv] chunk states.
struct TokenView {
  size_t base, stride;  // element (t, d) is at base + t * stride + d
  static TokenView of(const GlaShape& s, int b, int h, int D) {
    return {(size_t(b) * s.T * s.H + h) * D, size_t(s.H) * D};
  }
  // chunk_grads' dq, dk (D = dk) and dv (D = dv): rows of GlaShape::grad_ld elements where it is set.
  static TokenView grad(const GlaShape& s, int b, int h, int D) {
    if (s.grad_ld == 0) return of(s, b, h, D);
    return {size_t(b) * s.T * s.grad_ld + size_t(h) * D, size_t(s.grad_ld)};
  }
  size_t at(int t, int d = 0) const { return base + t * stride + d; }
};

size_t state_offset(const GlaShape& s, int b, int h) { return (size_t(b) * s.H + h) * s.dk * s.dv; }
size_t chunk_state_offset(const GlaShape& s, int b, int h, int n) {
  return ((size_t(b) * s.H + h) * s.chunks() + n) * s.dk * s.dv;
}

// A chunk's token range [t0, t1).
struct ChunkRange {
  int t0, t1;
  ChunkRange(const GlaShape& s, int n) : t0(n * kChunk), t1(std::min(s.T, (n + 1) * kChunk)) {}
};

// The shape's (b, h) pairs, in order.
template <class F>
void for_each_bh(const GlaShape& s, F&& f) {
  SPB_CHECK(s.pairs_in_range(), "GlaShape: a (b, h) pair range outside the tensor");
  for (int bh = s.pair_begin; bh < s.pair_begin + s.pairs(); ++bh) f(bh / s.H, bh % s.H);
}

class CpuKernels final : public GlaKernels {
 public:
  DType act_dtype() const override { return DType::f32; }
  DType chunk_state_type() const override { return DType::f32; }

  void chunk_cumsum(const GlaShape& s, const void* g_, float* gc, float* lambda, Stream) override {
    const float* g = static_cast<const float*>(g_);
    for_each_bh(s, [&](int b, int h) {
      TokenView tv = TokenView::of(s, b, h, s.dk);
      std::vector<float> total(s.dk, 0.f);
      for (int n = 0; n < s.chunks(); ++n) {
        ChunkRange c(s, n);
        for (int i = 0; i < s.dk; ++i) {
          float acc = 0.f;
          for (int t = c.t0; t < c.t1; ++t) gc[tv.at(t, i)] = acc += g[tv.at(t, i)];
          total[i] += acc;
        }
      }
      if (lambda)
        std::copy(total.begin(), total.end(), lambda + (size_t(b) * s.H + h) * s.dk);
    });
  }

  void chunk_states_fwd(const GlaShape& s, const void* k_, const void* v_, const float* gc, const float* h0,
                        void* hs_, float* ht, Stream) override {
    float* hs = static_cast<float*>(hs_);
    const float* k = static_cast<const float*>(k_);
    const float* v = static_cast<const float*>(v_);
    const int dk = s.dk, dv = s.dv;
    std::vector<float> S(size_t(dk) * dv);
    for_each_bh(s, [&](int b, int h) {
      TokenView tk = TokenView::of(s, b, h, dk), tv = TokenView::of(s, b, h, dv);
      if (h0) std::copy_n(h0 + state_offset(s, b, h), S.size(), S.begin());
      else std::fill(S.begin(), S.end(), 0.f);
      for (int n = 0; n < s.chunks(); ++n) {
        ChunkRange c(s, n);
        if (hs) std::copy(S.begin(), S.end(), hs + chunk_state_offset(s, b, h, n));
        for (int i = 0; i < dk; ++i) {
          const float B_i = gc[tk.at(c.t1 - 1, i)];
          float* row = &S[size_t(i) * dv];
          const float decay = std::exp(B_i);
          for (int j = 0; j < dv; ++j) row[j] *= decay;
          for (int t = c.t0; t < c.t1; ++t) {
            const float kd = k[tk.at(t, i)] * std::exp(B_i - gc[tk.at(t, i)]);
            const float* vt = v + tv.at(t);
            for (int j = 0; j < dv; ++j) row[j] += kd * vt[j];
          }
        }
      }
      if (ht) std::copy(S.begin(), S.end(), ht + state_offset(s, b, h));
    });
  }

  void chunk_output(const GlaShape& s, const void* q_, const void* k_, const void* v_, const float* gc,
                    const void* hs_, void* o_, Stream) override {
    const float* hs = static_cast<const float*>(hs_);
    const float* q = static_cast<const float*>(q_);
    const float* k = static_cast<const float*>(k_);
    const float* v = static_cast<const float*>(v_);
    float* o = static_cast<float*>(o_);
    const int dk = s.dk, dv = s.dv;
    const float scale = s.scale();
    std::vector<float> acc(dv);
    for_each_bh(s, [&](int b, int h) {
      TokenView tk = TokenView::of(s, b, h, dk), tv = TokenView::of(s, b, h, dv);
      for (int n = 0; n < s.chunks(); ++n) {
        ChunkRange c(s, n);
        const float* H0 = hs + chunk_state_offset(s, b, h, n);
        for (int r = c.t0; r < c.t1; ++r) {
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int i = 0; i < dk; ++i) {  // inter-chunk: (q_r * exp b_r)^T h
            const float qd = q[tk.at(r, i)] * std::exp(gc[tk.at(r, i)]);
            for (int j = 0; j < dv; ++j) acc[j] += qd * H0[size_t(i) * dv + j];
          }
          for (int t = c.t0; t <= r; ++t) {  // intra-chunk: A_rt = sum_i q_ri k_ti exp(b_ri - b_ti)
            float a = 0.f;
            for (int i = 0; i < dk; ++i)
              a += q[tk.at(r, i)] * k[tk.at(t, i)] * std::exp(gc[tk.at(r, i)] - gc[tk.at(t, i)]);
            for (int j = 0; j < dv; ++j) acc[j] += a * v[tv.at(t, j)];
          }
          for (int j = 0; j < dv; ++j) o[tv.at(r, j)] = scale * acc[j];
        }
      }
    });
  }

  void output_add_initial(const GlaShape& s, const void* q_, const float* gc, const float* S_in, void* o_,
                          Stream) override {
    const float* q = static_cast<const float*>(q_);
    float* o = static_cast<float*>(o_);
    const int dk = s.dk, dv = s.dv;
    const float scale = s.scale();
    std::vector<float> prefix(dk), acc(dv);
    for_each_bh(s, [&](int b, int h) {
      TokenView tk = TokenView::of(s, b, h, dk), tv = TokenView::of(s, b, h, dv);
      const float* S = S_in + state_offset(s, b, h);
      std::fill(prefix.begin(), prefix.end(), 0.f);  // sum of g over the chunks before this one
      for (int n = 0; n < s.chunks(); ++n) {
        ChunkRange c(s, n);
        for (int r = c.t0; r < c.t1; ++r) {
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int i = 0; i < dk; ++i) {
            const float qd = q[tk.at(r, i)] * std::exp(prefix[i] + gc[tk.at(r, i)]);
            for (int j = 0; j < dv; ++j) acc[j] += qd * S[size_t(i) * dv + j];
          }
          for (int j = 0; j < dv; ++j) o[tv.at(r, j)] += scale * acc[j];
        }
        for (int i = 0; i < dk; ++i) prefix[i] += gc[tk.at(c.t1 - 1, i)];
      }
    });
  }

  void states_add_initial(const GlaShape& s, const float* gc, const float* S_in, void* hs_, float* ht,
                          Stream) override {
    float* hs = static_cast<float*>(hs_);
    const int dk = s.dk, dv = s.dv;
    std::vector<float> prefix(dk);
    for_each_bh(s, [&](int b, int h) {
      TokenView tk = TokenView::of(s, b, h, dk);
      const float* S = S_in + state_offset(s, b, h);
      std::fill(prefix.begin(), prefix.end(), 0.f);
      for (int n = 0; n <= s.chunks(); ++n) {
        float* dst = n < s.chunks() ? hs + chunk_state_offset(s, b, h, n) : (ht ? ht + state_offset(s, b, h) : nullptr);
        if (dst)
          for (int i = 0; i < dk; ++i) {
            const float d = std::exp(prefix[i]);
            for (int j = 0; j < dv; ++j) dst[size_t(i) * dv + j] += d * S[size_t(i) * dv + j];
          }
        if (n < s.chunks())
          for (int i = 0; i < dk; ++i) prefix[i] += gc[tk.at(ChunkRange(s, n).t1 - 1, i)];
      }
    });
  }

  void chunk_states_bwd(const GlaShape& s, const void* q_, const void* do_, const float* gc, const float* dht,
                        void* dhs_, float* dh0, Stream) override {
    float* dhs = static_cast<float*>(dhs_);
    const float* q = static_cast<const float*>(q_);
    const float* dout = static_cast<const float*>(do_);
    const int dk = s.dk, dv = s.dv;
    const float scale = s.scale();
    std::vector<float> dS(size_t(dk) * dv);
    for_each_bh(s, [&](int b, int h) {
      TokenView tk = TokenView::of(s, b, h, dk), tv = TokenView::of(s, b, h, dv);
      if (dht) std::copy_n(dht + state_offset(s, b, h), dS.size(), dS.begin());
      else std::fill(dS.begin(), dS.end(), 0.f);
      for (int n = s.chunks() - 1; n >= 0; --n) {
        ChunkRange c(s, n);
        if (dhs) std::copy(dS.begin(), dS.end(), dhs + chunk_state_offset(s, b, h, n));
        for (int i = 0; i < dk; ++i) {
          float* row = &dS[size_t(i) * dv];
          const float decay = std::exp(gc[tk.at(c.t1 - 1, i)]);
          for (int j = 0; j < dv; ++j) row[j] *= decay;
          for (int t = c.t0; t < c.t1; ++t) {
            const float qd = scale * q[tk.at(t, i)] * std::exp(gc[tk.at(t, i)]);
            const float* dot = dout + tv.at(t);
            for (int j = 0; j < dv; ++j) row[j] += qd * dot[j];
          }
        }
      }
      if (dh0) std::copy(dS.begin(), dS.end(), dh0 + state_offset(s, b, h));
    });
  }

  void chunk_grads(const GlaShape& s, const void* q_, const void* k_, const void* v_, const float* gc,
                   const void* hs_, const float* ht, const void* dhs_, const void* do_, void* dq_, void* dk_,
                   void* dv_, void* dg_, Stream) override {
    const float* hs = static_cast<const float*>(hs_);
    const float* dhs = static_cast<const float*>(dhs_);
    const float* q = static_cast<const float*>(q_);
    const float* k = static_cast<const float*>(k_);
    const float* v = static_cast<const float*>(v_);
    const float* dout = static_cast<const float*>(do_);
    float* dq = static_cast<float*>(dq_);
    float* dk = static_cast<float*>(dk_);
    float* dv = static_cast<float*>(dv_);
    float* dg = static_cast<float*>(dg_);
    SPB_CHECK(s.grad_rows_fit(), "GlaShape: grad_ld " + std::to_string(s.grad_ld) + " is shorter than a token's row");
    const int DK = s.dk, DV = s.dv;
    const float scale = s.scale();
    std::vector<float> A(kChunk * kChunk), dA(kChunk * kChunk), db(size_t(kChunk) * DK);
    for_each_bh(s, [&](int b, int h) {
      TokenView tk = TokenView::of(s, b, h, DK), tv = TokenView::of(s, b, h, DV);
      TokenView gk = TokenView::grad(s, b, h, DK), gv = TokenView::grad(s, b, h, DV);
      for (int n = 0; n < s.chunks(); ++n) {
        ChunkRange c(s, n);
        const int len = c.t1 - c.t0;
        const float* H0 = hs + chunk_state_offset(s, b, h, n);
        const float* H1 = n + 1 < s.chunks() ? hs + chunk_state_offset(s, b, h, n + 1) : ht + state_offset(s, b, h);
        const float* dH = dhs + chunk_state_offset(s, b, h, n);
        auto G = [&](int t, int i) { return gc[tk.at(c.t0 + t, i)]; };
        const float* Bl = &gc[tk.at(c.t1 - 1)];  // the chunk's total decay
        // A_rt = s sum_i q_ri k_ti exp(b_ri - b_ti) and dA_rt = s do_r . v_t, for t <= r.
        for (int r = 0; r < len; ++r)
          for (int t = 0; t <= r; ++t) {
            float a = 0.f, da = 0.f;
            for (int i = 0; i < DK; ++i) a += q[tk.at(c.t0 + r, i)] * k[tk.at(c.t0 + t, i)] * std::exp(G(r, i) - G(t, i));
            for (int j = 0; j < DV; ++j) da += dout[tv.at(c.t0 + r, j)] * v[tv.at(c.t0 + t, j)];
            A[r * kChunk + t] = scale * a;
            dA[r * kChunk + t] = scale * da;
          }
        for (int r = 0; r < len; ++r) {
          const int tr = c.t0 + r;
          for (int i = 0; i < DK; ++i) {
            // dq_r = s exp(b_r) (h do_r) + sum_{t<=r} dA_rt k_t exp(b_r - b_t)
            float x = 0.f;
            for (int j = 0; j < DV; ++j) x += H0[size_t(i) * DV + j] * dout[tv.at(tr, j)];
            float acc = scale * std::exp(G(r, i)) * x;
            for (int t = 0; t <= r; ++t) acc += dA[r * kChunk + t] * k[tk.at(c.t0 + t, i)] * std::exp(G(r, i) - G(t, i));
            dq[gk.at(tr, i)] = acc;
            // dk_r = sum_{t>=r} dA_tr q_t exp(b_t - b_r) + exp(B - b_r) (dh v_r)
            float y = 0.f;
            for (int j = 0; j < DV; ++j) y += dH[size_t(i) * DV + j] * v[tv.at(tr, j)];
            float acck = std::exp(Bl[i] - G(r, i)) * y;
            for (int t = r; t < len; ++t) acck += dA[t * kChunk + r] * q[tk.at(c.t0 + t, i)] * std::exp(G(t, i) - G(r, i));
            dk[gk.at(tr, i)] = acck;
            db[size_t(r) * DK + i] = q[tk.at(tr, i)] * acc - k[tk.at(tr, i)] * acck;
          }
          // dv_r = sum_{t>=r} A_tr do_t + dh^T (k_r exp(B - b_r))
          for (int j = 0; j < DV; ++j) {
            float acc = 0.f;
            for (int t = r; t < len; ++t) acc += A[t * kChunk + r] * dout[tv.at(c.t0 + t, j)];
            for (int i = 0; i < DK; ++i) acc += dH[size_t(i) * DV + j] * k[tk.at(tr, i)] * std::exp(Bl[i] - G(r, i));
            dv[gv.at(tr, j)] = acc;
          }
        }
        // The chunk's total decay B = b_last also scales the state it hands on: d/dB = rowsum(dh * h_next).
        for (int i = 0; i < DK; ++i) {
          float x = 0.f;
          for (int j = 0; j < DV; ++j) x += dH[size_t(i) * DV + j] * H1[size_t(i) * DV + j];
          db[size_t(len - 1) * DK + i] += x;
        }
        // b is an in-chunk inclusive cumsum of g, so dg is the in-chunk reverse cumsum of db.
        for (int i = 0; i < DK; ++i) {
          float acc = 0.f;
          for (int r = len - 1; r >= 0; --r) dg[tk.at(c.t0 + r, i)] = acc += db[size_t(r) * DK + i];
        }
      }
    });
  }

  void state_fold(size_t rows, size_t cols, const float* decay, const float* x, const float* y, float* out,
                  Stream) override {
    for (size_t r = 0; r < rows; ++r) {
      const float d = std::exp(decay[r]);
      for (size_t c = 0; c < cols; ++c) out[r * cols + c] = d * x[r * cols + c] + y[r * cols + c];
    }
  }

  void vec_add(size_t n, const float* a, const float* b, float* out, Stream) override {
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }

  void copy_4d(void* dst, const void* src, size_t eb, const int64_t dims[4], const int64_t ds[4],
               const int64_t ss[4], Stream) override {
    auto* d = static_cast<char*>(dst);
    auto* sp = static_cast<const char*>(src);
    for (int64_t a = 0; a < dims[0]; ++a)
      for (int64_t b = 0; b < dims[1]; ++b)
        for (int64_t c = 0; c < dims[2]; ++c)
          for (int64_t e = 0; e < dims[3]; ++e)
            std::memcpy(d + (a * ds[0] + b * ds[1] + c * ds[2] + e * ds[3]) * eb,
                        sp + (a * ss[0] + b * ss[1] + c * ss[2] + e * ss[3]) * eb, eb);
  }
};

}  // namespace

std::unique_ptr<GlaKernels> make_cpu_kernels() { return std::make_unique<CpuKernels>(); }

}  // namespace spb
