#include "model/model_kernels.h"

#include "runtime/error.h"

namespace spb {

std::unique_ptr<ModelKernels> make_model_kernels(Device& dev) {
#ifdef SPB_HAVE_MODEL_CUDA  // the GPU kernels are built (model/cuda/)
  if (dev.is_gpu()) return make_cuda_model_kernels();
#endif
  SPB_CHECK(!dev.is_gpu(), "this spbench was built without the model's GPU kernels");
  return make_cpu_model_kernels();
}

}  // namespace spb
