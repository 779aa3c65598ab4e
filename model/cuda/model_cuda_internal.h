// Launchers of the GLA model's GPU kernels (one .cu file per kernel family), called by CudaModelKernels, the
// ModelKernels implementation in model_cuda.cu. Internal to model/cuda. Every launcher takes its arguments as the
// ModelKernels function of the same name does (activations bf16 behind void*), enqueues on `s` and checks the launch.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>

#include "runtime/cuda_check.h"
#include "runtime/device.h"

namespace spb {
namespace model_cuda {

constexpr int kThreads = 256;

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The grid sizes of the launchers: they depend on the device's SM count and, for the norm kernels, on how many blocks
// of a kernel an SM holds at once. One per CudaModelKernels.
class LaunchGrid {
 public:
  explicit LaunchGrid(int sms) : sms_(sms) {}
  int sms() const { return sms_; }

  // Blocks for a grid-stride loop over `work` items: enough to fill every SM several times over, no more.
  unsigned grid(size_t work) const {
    const size_t blocks = (work + kThreads - 1) / kThreads;
    return unsigned(std::max<size_t>(1, std::min<size_t>(blocks, size_t(sms_) * 16)));
  }
  // How many blocks of `kernel` (kThreads each, smem bytes of dynamic shared memory) an SM holds at once, at most cap
  // (asked of the runtime once per kernel and size).
  template <class Kernel>
  int resident(Kernel* kernel, size_t smem, int cap) {
    int& b = resident_[{reinterpret_cast<const void*>(kernel), smem}];
    if (b == 0) {
      SPB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kThreads, smem));
      b = std::max(1, b);
    }
    return std::min(b, cap);
  }
  // Blocks for n rows, rows_per_block at a time, at most per_sm per SM; as many as make every block loop the same
  // number of times (no block with one row group more than the others at the end).
  unsigned norm_blocks(int n, int rows_per_block, int per_sm) const {
    const size_t units = (size_t(n) + rows_per_block - 1) / rows_per_block;
    const size_t max_blocks = std::max<size_t>(1, size_t(sms_) * per_sm);
    const size_t iters = (units + max_blocks - 1) / max_blocks;
    return unsigned(std::max<size_t>(1, (units + iters - 1) / iters));
  }

 private:
  int sms_ = 1;
  std::map<std::pair<const void*, size_t>, int> resident_;  // resident(): blocks per SM by (kernel, shared memory)
};

// model_gemm.cu: the products, cublasGemmEx with a workspace per stream.
class CublasGemm {
 public:
  CublasGemm();
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B, float beta,
            void* C, DType c_type, cudaStream_t s);

 private:
  void* workspace(cudaStream_t s);

  cublasHandle_t cublas_ = nullptr;
  std::unordered_map<cudaStream_t, void*> workspaces_;
};

// model_elementwise.cu: conversions, the embedding, the forget gate, SwiGLU and the column copy.
void launch_convert(const LaunchGrid& l, size_t n, const void* src, DType src_type, void* dst, DType dst_type,
                    cudaStream_t s);
void launch_embedding_fwd(const LaunchGrid& l, int n, int D, const int32_t* tokens, const float* table, float* x,
                          cudaStream_t s);
void launch_embedding_bwd(const LaunchGrid& l, int n, int D, const int32_t* tokens, const float* dx, float* dtable,
                          cudaStream_t s);
void launch_forget_gate_fwd(const LaunchGrid& l, int n, int C, const void* pre, const float* bias, float normaliser,
                            void* g, cudaStream_t s);
void launch_forget_gate_bwd(const LaunchGrid& l, int n, int C, const void* pre, const float* bias, float normaliser,
                            const void* dg, void* dpre, float* dbias, cudaStream_t s);
void launch_swiglu_fwd(const LaunchGrid& l, int rows, int F, const void* ab, void* y, cudaStream_t s);
void launch_swiglu_bwd(const LaunchGrid& l, int rows, int F, const void* ab, const void* dy, void* dab, void* y,
                       cudaStream_t s);
void launch_copy_columns(const LaunchGrid& l, int rows, int cols, const void* src, int dst_cols, int col, void* dst,
                         cudaStream_t s);

// model_norms.cu: the RMSNorms (plain, with the residual add, and GLA's gated output norm).
void launch_rmsnorm_fwd(LaunchGrid& l, int n, int D, const float* x, const float* w, float eps, void* y, float* rstd,
                        cudaStream_t s);
void launch_rmsnorm_add_fwd(LaunchGrid& l, int n, int D, const float* x, const float* delta, const float* w, float eps,
                            float* x_out, void* y, float* rstd, cudaStream_t s);
void launch_rmsnorm_bwd(LaunchGrid& l, int n, int D, const float* x, const float* w, const float* rstd, const float* dy,
                        float* dx, float* dw, void* dx_act, cudaStream_t s);
void launch_gated_rmsnorm_fwd(LaunchGrid& l, int rows, int D, const void* o, const void* z, const float* w, float eps,
                              void* y, float* rstd, cudaStream_t s);
void launch_gated_rmsnorm_bwd(LaunchGrid& l, int rows, int D, const void* o, const void* z, const float* w,
                              const float* rstd, const void* dy, void* d_o, void* dz, float* dw, int heads,
                              size_t dz_ld, cudaStream_t s);

// model_cross_entropy.cu: the loss and dlogits of the LM head's logits.
void launch_cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                          void* dlogits, cudaStream_t s);

// model_adamw.cu: the optimizer step, the bf16 copy of the weights in the same pass.
void launch_adamw(const LaunchGrid& l, size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int step, void* p_act, cudaStream_t s);

}  // namespace model_cuda
}  // namespace spb
