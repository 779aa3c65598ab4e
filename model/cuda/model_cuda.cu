// The GPU implementation of the GLA language model's kernels (model/model_kernels.h): bf16 activations, fp32 math
// inside every kernel. CudaModelKernels holds the device's launch geometry and the cuBLAS handle and calls the
// launchers of model_cuda_internal.h, one .cu file per kernel family:
//   model_gemm.cu           gemm: cublasGemmEx, bf16 A and B, bf16 or fp32 C, fp32 compute
//   model_elementwise.cu    convert, embedding_fwd/bwd, forget_gate_fwd/bwd, swiglu_fwd/bwd, copy_columns
//   model_norms.cu          rmsnorm_fwd, rmsnorm_add_fwd, rmsnorm_bwd, gated_rmsnorm_fwd/bwd
//   model_cross_entropy.cu  cross_entropy (the LM head's loss and dlogits)
//   model_adamw.cu          adamw (with the bf16 copy of the weights)
// and the device helpers they share in model_cuda_common.cuh. Built into spb_model_cuda (model/cuda/CMakeLists.txt);
// tested against the CPU kernels by tests/model/test_model_kernels_gpu.cpp (ctest -R model.kernels_gpu).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "model/cuda/model_cuda_internal.h"
#include "model/model_kernels.h"
#include "runtime/cuda_check.h"

namespace spb {
namespace {

using namespace model_cuda;

int device_sms() {
  int dev = 0, sms = 1;
  SPB_CUDA(cudaGetDevice(&dev));
  SPB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

class CudaModelKernels final : public ModelKernels {
 public:
  CudaModelKernels() : grid_(device_sms()) {}
  DType act_dtype() const override { return DType::bf16; }

  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B, float beta,
            void* C, DType c_type, Stream st) override {
    gemm_.gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, c_type, stream(st));
  }

  void convert(size_t n, const void* src, DType src_type, void* dst, DType dst_type, Stream st) override {
    launch_convert(grid_, n, src, src_type, dst, dst_type, stream(st));
  }

  void embedding_fwd(int n, int D, const int32_t* tokens, const float* table, float* x, Stream st) override {
    launch_embedding_fwd(grid_, n, D, tokens, table, x, stream(st));
  }
  void embedding_bwd(int n, int D, const int32_t* tokens, const float* dx, float* dtable, Stream st) override {
    launch_embedding_bwd(grid_, n, D, tokens, dx, dtable, stream(st));
  }

  void rmsnorm_fwd(int n, int D, const float* x, const float* w, float eps, void* y, float* rstd, Stream st) override {
    launch_rmsnorm_fwd(grid_, n, D, x, w, eps, y, rstd, stream(st));
  }
  void rmsnorm_add_fwd(int n, int D, const float* x, const float* delta, const float* w, float eps, float* x_out,
                       void* y, float* rstd, Stream st) override {
    launch_rmsnorm_add_fwd(grid_, n, D, x, delta, w, eps, x_out, y, rstd, stream(st));
  }
  void rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                   float* dw, void* dx_act, Stream st) override {
    launch_rmsnorm_bwd(grid_, n, D, x, w, rstd, dy, dx, dw, dx_act, stream(st));
  }

  void forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser, void* g,
                       Stream st) override {
    launch_forget_gate_fwd(grid_, n, C, pre, bias, normaliser, g, stream(st));
  }
  void forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser, const void* dg, void* dpre,
                       float* dbias, Stream st) override {
    launch_forget_gate_bwd(grid_, n, C, pre, bias, normaliser, dg, dpre, dbias, stream(st));
  }

  void gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w, float eps, void* y, float* rstd,
                         Stream st) override {
    launch_gated_rmsnorm_fwd(grid_, rows, D, o, z, w, eps, y, rstd, stream(st));
  }
  void gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w, const float* rstd,
                         const void* dy, void* d_o, void* dz, float* dw, int heads, size_t dz_ld, Stream st) override {
    check_dz_rows(rows, D, heads, dz_ld);
    launch_gated_rmsnorm_bwd(grid_, rows, D, o, z, w, rstd, dy, d_o, dz, dw, heads, dz_ld, stream(st));
  }

  void swiglu_fwd(int rows, int F, const void* ab, void* y, Stream st) override {
    launch_swiglu_fwd(grid_, rows, F, ab, y, stream(st));
  }
  void swiglu_bwd(int rows, int F, const void* ab, const void* dy, void* dab, void* y, Stream st) override {
    launch_swiglu_bwd(grid_, rows, F, ab, dy, dab, y, stream(st));
  }
  void copy_columns(int rows, int cols, const void* src, int dst_cols, int col, void* dst, Stream st) override {
    launch_copy_columns(grid_, rows, cols, src, dst_cols, col, dst, stream(st));
  }

  void cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                     void* dlogits, Stream st) override {
    launch_cross_entropy(n, V, logits, targets, grad_scale, loss, dlogits, stream(st));
  }

  void adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1, float beta2, float eps,
             float weight_decay, int step, void* p_act, Stream st) override {
    launch_adamw(grid_, n, p, grad, m, v, lr, beta1, beta2, eps, weight_decay, step, p_act, stream(st));
  }

 private:
  static cudaStream_t stream(Stream st) { return static_cast<cudaStream_t>(st.handle); }  // nullptr: the default stream

  LaunchGrid grid_;  // first: the device is asked for its SM count before cuBLAS starts
  CublasGemm gemm_;
};

}  // namespace

std::unique_ptr<ModelKernels> make_cuda_model_kernels() { return std::make_unique<CudaModelKernels>(); }

}  // namespace spb
