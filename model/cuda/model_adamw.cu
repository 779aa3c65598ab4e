// AdamW: elementwise fp32, 4 elements a thread, the bf16 copy of p in the same pass; bias corrections from the host
// in double.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "model/cuda/model_cuda_common.cuh"
#include "runtime/error.h"

namespace spb {
namespace model_cuda {
namespace {

// ---- AdamW ----------------------------------------------------------------------------------------------------------
struct AdamParams {
  float lr, beta1, beta2, eps, weight_decay, bias_corr1, bias_corr2;  // bias_corr = 1 - beta^step
};
__device__ __forceinline__ void adamw_one(const AdamParams& a, float& p, float g, float& m, float& v) {
  m = a.beta1 * m + (1.f - a.beta1) * g;
  v = a.beta2 * v + (1.f - a.beta2) * g * g;
  const float m_hat = m / a.bias_corr1, v_hat = v / a.bias_corr2;
  p -= a.lr * m_hat / (sqrtf(v_hat) + a.eps) + a.lr * a.weight_decay * p;  // the decay reads p before the step
}
// p_act (nullable): the bf16 copy of the new p, stored in the same pass.
__global__ void adamw_kernel(size_t n, bool vec, AdamParams a, float* p, const float* grad, float* m, float* v,
                             bf16* p_act) {
  SPB_FOR_EACH_GROUP_OF_4(n, g) {
    const size_t i = g * 4;
    if (vec && i + 4 <= n) {
      float pv[4], gv[4], mv[4], vv[4];
      load4(p + i, pv);
      load4(grad + i, gv);
      load4(m + i, mv);
      load4(v + i, vv);
      for (int k = 0; k < 4; ++k) adamw_one(a, pv[k], gv[k], mv[k], vv[k]);
      store4(p + i, pv);
      store4(m + i, mv);
      store4(v + i, vv);
      if (p_act) store4(p_act + i, pv);
    } else {
      for (size_t k = i; k < n && k < i + 4; ++k) {
        adamw_one(a, p[k], grad[k], m[k], v[k]);
        if (p_act) p_act[k] = to_bf(p[k]);
      }
    }
  }
}

}  // namespace

void launch_adamw(const LaunchGrid& l, size_t n, float* p, const float* grad, float* m, float* v, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int step, void* p_act, cudaStream_t s) {
  SPB_CHECK(step >= 1, "adamw: the step counts from 1");
  if (n == 0) return;
  const AdamParams a{lr,
                     beta1,
                     beta2,
                     eps,
                     weight_decay,
                     float(1.0 - std::pow(double(beta1), step)),
                     float(1.0 - std::pow(double(beta2), step))};
  const bool vec = aligned(p, 16) && aligned(grad, 16) && aligned(m, 16) && aligned(v, 16) && aligned(p_act, 8);
  adamw_kernel<<<l.grid((n + 3) / 4), kThreads, 0, s>>>(n, vec, a, p, grad, m, v, as_bf16(p_act));
  SPB_CUDA_LAUNCH();
}

}  // namespace model_cuda
}  // namespace spb
