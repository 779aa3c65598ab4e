// The model's products: cublasGemmEx, bf16 A and B, bf16 or fp32 C, fp32 compute; row-major mapped onto cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "model/cuda/model_cuda_internal.h"
#include "runtime/error.h"

#define SPB_CUBLAS(call)                                                                      \
  do {                                                                                        \
    cublasStatus_t s_ = (call);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::spb::fail(__FILE__, __LINE__, std::string(#call) + ": " + cublasGetStatusString(s_)); \
  } while (0)

namespace spb {
namespace model_cuda {
namespace {

// 32 MiB: what cuBLAS recommends on Hopper, so that its best kernels (split-K among them) are all available.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

}  // namespace

CublasGemm::CublasGemm() { SPB_CUBLAS(cublasCreate(&cublas_)); }

CublasGemm::~CublasGemm() {
  cublasDestroy(cublas_);
  for (auto& sw : workspaces_) cudaFree(sw.second);
}

// Row-major C [M, N] is column-major C^T [N, M] (ld N), and C^T = op(B)^T op(A)^T: cuBLAS multiplies B first. B
// stored row-major [K, N] (trans_b false) is column-major [N, K] = op(B)^T itself (OP_N, ld N); stored [N, K] it is
// column-major [K, N] = op(B), transposed by cuBLAS (OP_T, ld K). Likewise A: [M, K] is op(A)^T (OP_N, ld K), [K, M]
// is op(A) (OP_T, ld M).
void CublasGemm::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B,
                      float beta, void* C, DType c_type, cudaStream_t s) {
  SPB_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size");
  if (M == 0 || N == 0) return;
  // cublasSetStream drops a user workspace, so the stream's own workspace is set again on every call.
  SPB_CUBLAS(cublasSetStream(cublas_, s));
  SPB_CUBLAS(cublasSetWorkspace(cublas_, workspace(s), kCublasWorkspaceBytes));
  const int ldb = std::max(1, trans_b ? K : N);
  const int lda = std::max(1, trans_a ? M : K);
  const cudaDataType_t ct = c_type == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
  SPB_CUBLAS(cublasGemmEx(cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                          &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C, ct, N, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
}

// One workspace per stream: two streams' products may run at the same time.
void* CublasGemm::workspace(cudaStream_t s) {
  void*& w = workspaces_[s];
  if (!w) SPB_CUDA(cudaMalloc(&w, kCublasWorkspaceBytes));
  return w;
}

}  // namespace model_cuda
}  // namespace spb
