// The dense rank map's arithmetic on the GPU (sp/rank_map.h, DESIGN §12): per head, out = A x + b, A2 A1, A^T and the
// identity, fp32. Each result goes to a scratch buffer first and is copied back, so out may alias any input.
#include "kernels/gdn/cuda/gdn_cuda_internal.h"
#include "runtime/cuda_check.h"

namespace spb {
namespace gdn_cuda {

namespace {

// out_h[:, c0 : c0 + 16] = A_h x_h[:, c0 : c0 + 16] (+ b_h), one block per (16-column block, head).
__global__ void __launch_bounds__(kThreads) dense_mm_kernel(int n, int cols, const float* A, const float* x,
                                                            const float* b, float* out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* gs = reinterpret_cast<float*>(smem_raw);
  const int c0 = int(blockIdx.x) * 16;
  const size_t h = blockIdx.y, nn = size_t(n) * n, nc = size_t(n) * cols;
  const float* Ah = A + h * nn;
  const float* xh = x + h * nc;
  const float* bh = b ? b + h * nc : nullptr;
  float* oh = out + h * nc;
  block_gemm<4, 1>(
      n, min(16, cols - c0), n, [=](int m, int k) { return Ah[size_t(m) * n + k]; },
      [=](int k, int j) { return xh[size_t(k) * cols + c0 + j]; },
      [=](int m, int j, float acc) {
        const size_t at = size_t(m) * cols + c0 + j;
        oh[at] = acc + (bh ? bh[at] : 0.0f);
      },
      gs);
}

// One thread per element, grid-strided.
__global__ void __launch_bounds__(kThreads) transpose_kernel(size_t heads, int n, const float* A, float* out) {
  const size_t nn = size_t(n) * n;
  for (size_t e = size_t(blockIdx.x) * kThreads + threadIdx.x; e < heads * nn; e += size_t(gridDim.x) * kThreads) {
    const size_t h = e / nn, i = (e % nn) / n, j = e % n;
    out[e] = A[h * nn + j * n + i];
  }
}
__global__ void __launch_bounds__(kThreads) copy_kernel(size_t elems, const float* src, float* dst) {
  for (size_t e = size_t(blockIdx.x) * kThreads + threadIdx.x; e < elems; e += size_t(gridDim.x) * kThreads) dst[e] = src[e];
}
__global__ void __launch_bounds__(kThreads) identity_kernel(size_t heads, int n, float* out) {
  const size_t nn = size_t(n) * n;
  for (size_t e = size_t(blockIdx.x) * kThreads + threadIdx.x; e < heads * nn; e += size_t(gridDim.x) * kThreads)
    out[e] = (e % nn) / n == e % n ? 1.0f : 0.0f;
}

unsigned blocks_for(size_t elems) {
  const size_t b = (elems + kThreads - 1) / kThreads;
  return unsigned(b < 4096 ? (b ? b : 1) : 4096);
}

void launch_mm(size_t heads, size_t n, size_t cols, const float* A, const float* x, const float* b, float* out,
               cudaStream_t st) {
  const size_t smem = size_t(gemm_smem_floats(4, 1)) * 4;
  dense_mm_kernel<<<dim3(unsigned((cols + 15) / 16), unsigned(heads)), kThreads, smem, st>>>(int(n), int(cols), A, x,
                                                                                           b, out);
  SPB_CUDA_LAUNCH();
}

}  // namespace

void launch_dense_apply(size_t heads, size_t n, size_t cols, const float* A, const float* x, const float* b,
                        float* tmp, cudaStream_t st) {
  launch_mm(heads, n, cols, A, x, b, tmp, st);
}
void launch_dense_product(size_t heads, size_t n, const float* A2, const float* A1, float* tmp, cudaStream_t st) {
  launch_mm(heads, n, n, A2, A1, nullptr, tmp, st);
}
void launch_dense_transpose(size_t heads, size_t n, const float* A, float* tmp, cudaStream_t st) {
  transpose_kernel<<<blocks_for(heads * n * n), kThreads, 0, st>>>(heads, int(n), A, tmp);
  SPB_CUDA_LAUNCH();
}
void launch_copy(size_t elems, const float* src, float* dst, cudaStream_t st) {
  copy_kernel<<<blocks_for(elems), kThreads, 0, st>>>(elems, src, dst);
  SPB_CUDA_LAUNCH();
}
void launch_dense_identity(size_t heads, size_t n, float* out, cudaStream_t st) {
  identity_kernel<<<blocks_for(heads * n * n), kThreads, 0, st>>>(heads, int(n), out);
  SPB_CUDA_LAUNCH();
}

}  // namespace gdn_cuda
}  // namespace spb
