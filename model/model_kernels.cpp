#include "model/model_kernels.h"

#include "runtime/error.h"

namespace spb {

void ModelKernels::gemm_residual(int M, int N, int K, const void* x, const void* W, const float* C, float* D,
                                 Stream st) {
  convert(size_t(M) * N, C, DType::f32, D, DType::f32, st);
  gemm(false, true, M, N, K, 1.f, x, W, 1.f, D, DType::f32, st);
}

std::unique_ptr<ModelKernels> make_model_kernels(Device& dev) {
#ifdef SPB_HAVE_MODEL_CUDA  // the GPU kernels are built (model/cuda/)
  if (dev.is_gpu()) return make_cuda_model_kernels();
#endif
  SPB_CHECK(!dev.is_gpu(), "this spbench was built without the model's GPU kernels");
  return make_cpu_model_kernels();
}

}  // namespace spb
