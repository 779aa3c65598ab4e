#include "harness/runtime.h"

#include "harness/error.h"

#ifdef SPB_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/gla_cuda.h"
#endif

namespace spb {

std::string resolve_backend(const std::string& b) {
  if (b != "auto") return b;
#ifdef SPB_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return "gpu";
#endif
  return "cpu";
}

std::unique_ptr<Runtime> make_runtime(Bootstrap& boot, const std::string& backend) {
  auto rt = std::unique_ptr<Runtime>(new Runtime{boot, backend, nullptr, nullptr, nullptr, nullptr});
  if (backend == "cpu") {
    rt->dev = make_cpu_device();
    rt->kern = make_cpu_kernels();
    rt->comm = make_mpi_communicator(boot);
    return rt;
  }
  SPB_USAGE(backend == "gpu", "--backend: '" + backend + "' does not exist; use cpu or gpu");
#ifdef SPB_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  // Agree first, so that every rank stops with the same message instead of some waiting in NCCL's init.
  SPB_USAGE(boot.all(count > 0), "--backend gpu: no CUDA GPU found on at least one node (rank " +
                                     std::to_string(boot.rank()) + " sees " + std::to_string(count) + ")");
  SPB_USAGE(boot.all(boot.local_size() <= count),
            "--backend gpu: " + std::to_string(boot.local_size()) + " ranks on a node with " + std::to_string(count) +
                " GPUs; start at most one rank per GPU");
  rt->dev = make_cuda_device(boot.local_rank());
  rt->kern = make_cuda_kernels();
  rt->comm = make_nccl_communicator(boot, *rt->dev);
  return rt;
#else
  throw UsageError("--backend gpu: this spbench was built without CUDA (no nvcc or NCCL at configure time)");
#endif
}

}  // namespace spb
