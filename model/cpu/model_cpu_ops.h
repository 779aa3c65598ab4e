// The model's layers on the CPU, written once as templates over the scalar type: float is what the CPU ranks run
// (model/cpu/model_cpu.cpp wraps these as ModelKernels), double is what the finite-difference tests check each
// backward with (tests/model/test_model_layers.cpp). Plain loops, one row at a time, OpenMP over rows; the formulas
// are those of model/model_kernels.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spb::cpu_ops {

// C[M, N] = alpha * op(A) op(B) + beta * C (row-major; trans_a: A stored [K, M]; trans_b: B stored [N, K]).
template <class T, class TC>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, const T* B, T beta, TC* C) {
#pragma omp parallel
  {
    std::vector<T> a(static_cast<size_t>(K)), row(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int i = 0; i < M; ++i) {
      for (int k = 0; k < K; ++k) a[size_t(k)] = trans_a ? A[size_t(k) * M + i] : A[size_t(i) * K + k];
      if (trans_b) {  // row i . row j of B: both contiguous
        for (int j = 0; j < N; ++j) {
          const T* b = B + size_t(j) * K;
          T acc = 0;
          for (int k = 0; k < K; ++k) acc += a[size_t(k)] * b[k];
          row[size_t(j)] = acc;
        }
      } else {  // row i += a[k] * row k of B
        std::fill(row.begin(), row.end(), T(0));
        for (int k = 0; k < K; ++k) {
          const T* b = B + size_t(k) * N;
          for (int j = 0; j < N; ++j) row[size_t(j)] += a[size_t(k)] * b[j];
        }
      }
      TC* c = C + size_t(i) * N;
      for (int j = 0; j < N; ++j)
        c[j] = TC(beta == T(0) ? alpha * row[size_t(j)] : alpha * row[size_t(j)] + beta * T(c[j]));
    }
  }
}

template <class T>
void embedding_fwd(int n, int D, const int32_t* tokens, const T* table, T* x) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const T* row = table + size_t(tokens[i]) * D;
    std::copy(row, row + D, x + size_t(i) * D);
  }
}

template <class T>
void embedding_bwd(int n, int D, const int32_t* tokens, const T* dx, T* dtable) {
  for (int i = 0; i < n; ++i)  // serial: two rows may share a token
    for (int d = 0; d < D; ++d) dtable[size_t(tokens[i]) * D + d] += dx[size_t(i) * D + d];
}

// y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps); with z (nullable), y *= swish(z) (GLA's output gate).
template <class T>
void rmsnorm_fwd(int n, int D, const T* x, const T* w, T eps, T* y, T* rstd, const T* z = nullptr) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const T* xi = x + size_t(i) * D;
    T ss = 0;
    for (int d = 0; d < D; ++d) ss += xi[d] * xi[d];
    const T r = T(1) / std::sqrt(ss / T(D) + eps);
    rstd[i] = r;
    for (int d = 0; d < D; ++d) {
      T v = xi[d] * r * w[d];
      if (z) {
        const T zz = z[size_t(i) * D + d];
        v *= zz / (T(1) + std::exp(-zz));
      }
      y[size_t(i) * D + d] = v;
    }
  }
}

// With u = x * rstd (the normalised row) and a = dy * w (* swish(z) where gated):
//   dx = rstd * (a - u * mean(a * u)),  dw += dy * u (* swish(z)),  dz = dy * u * w * swish'(z).
// accumulate_dx: dx += (the residual stream's gradient) instead of dx =.
template <class T>
void rmsnorm_bwd(int n, int D, const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw, bool accumulate_dx,
                 const T* z = nullptr, T* dz = nullptr, int heads = 1, size_t dz_ld = 0) {
  std::vector<T> dw_sum(size_t(D), T(0));
#pragma omp parallel
  {
    std::vector<T> dw_part(size_t(D), T(0)), a(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const size_t o = size_t(i) * D;
      const size_t oz = dz_ld ? size_t(i / heads) * dz_ld + size_t(i % heads) * D : o;  // (gated_rmsnorm_bwd)
      const T r = rstd[i];
      T dot = 0;
      for (int d = 0; d < D; ++d) {
        const T u = x[o + d] * r;
        T g = dy[o + d];
        if (z) {
          const T zz = z[o + d], sig = T(1) / (T(1) + std::exp(-zz)), sw = zz * sig;
          dz[oz + d] = g * u * w[d] * sig * (T(1) + zz * (T(1) - sig));
          g *= sw;
        }
        dw_part[size_t(d)] += g * u;
        a[size_t(d)] = g * w[d];
        dot += a[size_t(d)] * u;
      }
      dot /= T(D);
      for (int d = 0; d < D; ++d) {
        const T v = r * (a[size_t(d)] - x[o + d] * r * dot);
        dx[o + d] = accumulate_dx ? dx[o + d] + v : v;
      }
    }
#pragma omp critical
    for (int d = 0; d < D; ++d) dw_sum[size_t(d)] += dw_part[size_t(d)];
  }
  for (int d = 0; d < D; ++d) dw[d] += dw_sum[size_t(d)];
}

template <class T>
T logsigmoid(T x) {
  return std::min(x, T(0)) - std::log1p(std::exp(-std::abs(x)));
}

template <class T>
void forget_gate_fwd(int n, int C, const T* pre, const T* bias, T normaliser, T* g) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < C; ++c) g[size_t(i) * C + c] = logsigmoid(pre[size_t(i) * C + c] + bias[c]) / normaliser;
}

template <class T>
void forget_gate_bwd(int n, int C, const T* pre, const T* bias, T normaliser, const T* dg, T* dpre, T* dbias) {
  for (int i = 0; i < n; ++i)  // serial over rows: dbias sums them
    for (int c = 0; c < C; ++c) {
      const size_t o = size_t(i) * C + c;
      const T d = dg[o] / (T(1) + std::exp(pre[o] + bias[c])) / normaliser;  // sigmoid(-x) = 1 / (1 + e^x)
      dpre[o] = d;
      dbias[c] += d;
    }
}

// ab [rows, 2F]: a row's a, then its b.
template <class T>
T swiglu(T a, T b) {
  return a / (T(1) + std::exp(-a)) * b;
}

template <class T>
void swiglu_fwd(int rows, int F, const T* ab, T* y) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < F; ++i) y[size_t(r) * F + i] = swiglu(ab[size_t(r) * 2 * F + i], ab[size_t(r) * 2 * F + F + i]);
}

// y (nullable): the forward's output again, the same expression as swiglu_fwd's.
template <class T>
void swiglu_bwd(int rows, int F, const T* ab, const T* dy, T* dab, T* y = nullptr) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < F; ++i) {
      const size_t ia = size_t(r) * 2 * F + i, ib = ia + F;
      const T a = ab[ia], b = ab[ib], d = dy[size_t(r) * F + i];
      const T sig = T(1) / (T(1) + std::exp(-a)), silu = a * sig;
      if (y) y[size_t(r) * F + i] = swiglu(a, b);
      dab[ib] = d * silu;
      dab[ia] = d * b * sig * (T(1) + a * (T(1) - sig));
    }
}

template <class T>
void cross_entropy(int n, int V, const T* logits, const int32_t* targets, T grad_scale, T* loss, T* dlogits) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const T* l = logits + size_t(i) * V;
    const T mx = *std::max_element(l, l + V);
    T sum = 0;
    for (int j = 0; j < V; ++j) sum += std::exp(l[j] - mx);
    const T lse = mx + std::log(sum);
    loss[i] = lse - l[targets[i]];
    T* d = dlogits + size_t(i) * V;
    for (int j = 0; j < V; ++j) d[j] = std::exp(l[j] - lse) * grad_scale;
    d[targets[i]] -= grad_scale;
  }
}

template <class T>
void adamw(size_t n, T* p, const T* grad, T* m, T* v, T lr, T beta1, T beta2, T eps, T weight_decay, int step) {
  const T c1 = T(1) - std::pow(beta1, T(step)), c2 = T(1) - std::pow(beta2, T(step));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (T(1) - beta1) * grad[i];
    v[i] = beta2 * v[i] + (T(1) - beta2) * grad[i] * grad[i];
    p[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps) + lr * weight_decay * p[i];
  }
}

}  // namespace spb::cpu_ops
