// The model's elementwise kernels, bf16 activations and fp32 math inside every kernel:
//   convert              fp32 <-> bf16, 4 elements a thread where the pointers allow it
//   embedding_fwd/bwd    gather rows; scatter-add with fp32 atomics
//   forget_gate_fwd/bwd  logsigmoid / normaliser, 4 elements a thread; the backward writes dpre and sums dbias in
//                        one pass
//   swiglu_fwd/bwd       elementwise over [rows, F] from (a | b) rows, 8 (or 4) elements a thread; the backward
//                        writes the forward's output again where asked, in the same pass
//   copy_columns         a strided copy, 16 bytes a thread where columns and pointers allow it
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "model/cuda/model_cuda_common.cuh"

namespace spb {
namespace model_cuda {
namespace {

// ---- convert --------------------------------------------------------------------------------------------------------
template <class Src, class Dst>
__global__ void convert_kernel(size_t n, bool vec, const Src* src, Dst* dst) {
  SPB_FOR_EACH_GROUP_OF_4(n, g) {
    const size_t i = g * 4;
    if (vec && i + 4 <= n) {
      float v[4];
      load4(src + i, v);
      store4(dst + i, v);
    } else {
      for (size_t k = i; k < n && k < i + 4; ++k) store1(dst + k, to_f(src[k]));
    }
  }
}

// ---- embedding ------------------------------------------------------------------------------------------------------
__global__ void embedding_fwd_kernel(int n, int D, const int32_t* tokens, const float* table, float* x) {
  const size_t total = size_t(n) * D;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / D, col = i % D;
    x[i] = table[size_t(tokens[row]) * D + col];
  }
}
__global__ void embedding_bwd_kernel(int n, int D, const int32_t* tokens, const float* dx, float* dtable) {
  const size_t total = size_t(n) * D;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / D, col = i % D;
    atomicAdd(dtable + size_t(tokens[row]) * D + col, dx[i]);  // a token may occur in many rows
  }
}

// ---- column sums over rows ------------------------------------------------------------------------------------------
// out[c] += sum_r op(r, c) for c < D. A block covers 32 columns (threadIdx.x, so a warp reads 32 consecutive elements
// of one row) and strides over rows with its 8 warps; the grid's y dimension splits the rows further. op(r, c) is
// called exactly once for every (r, c), so it may also write element (r, c) of an output (forget_gate_bwd does).
constexpr int kColRows = 8;
template <class Op>
__global__ void column_sum_kernel(int n, int D, Op op, float* out) {
  __shared__ float part[kColRows][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (c < D)
    for (int r = blockIdx.y * kColRows + threadIdx.y; r < n; r += gridDim.y * kColRows) acc += op(r, c);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < D) {
    float s = 0.f;
    for (int k = 0; k < kColRows; ++k) s += part[k][threadIdx.x];
    atomicAdd(out + c, s);
  }
}

// dpre = dg sigmoid(-(pre + bias)) / normaliser, written as bf16; dbias sums the fp32 values (before rounding).
struct ForgetGateBwd {
  int C;
  const bf16 *pre, *dg;
  const float* bias;
  float normaliser;
  bf16* dpre;
  __device__ float operator()(int r, int c) const {
    const size_t i = size_t(r) * C + c;
    const float x = to_f(pre[i]) + bias[c];
    const float d = to_f(dg[i]) / (1.f + expf(x)) / normaliser;
    dpre[i] = to_bf(d);
    return d;
  }
};

// ---- forget gate, SwiGLU --------------------------------------------------------------------------------------------
// logsigmoid(x) = min(x, 0) - log1p(exp(-|x|)): exp never overflows, and log1p keeps the small values of large x.
__device__ __forceinline__ float logsigmoid(float x) { return fminf(x, 0.f) - log1pf(expf(-fabsf(x))); }
// Groups of 4 elements; `vec` (C % 4 == 0 and aligned pointers) keeps a group inside one row and moves it at once.
__global__ void forget_gate_fwd_kernel(int n, int C, bool vec, const bf16* pre, const float* bias, float normaliser,
                                       bf16* g) {
  const size_t total = size_t(n) * C;
  const float inv = 1.f / normaliser;
  SPB_FOR_EACH_GROUP_OF_4(total, grp) {
    const size_t i = grp * 4;
    if (vec) {
      const int c = int(i % unsigned(C));
      float x[4];
      load4(pre + i, x);
      const float4 b = *reinterpret_cast<const float4*>(bias + c);
      x[0] = logsigmoid(x[0] + b.x) * inv, x[1] = logsigmoid(x[1] + b.y) * inv;
      x[2] = logsigmoid(x[2] + b.z) * inv, x[3] = logsigmoid(x[3] + b.w) * inv;
      store4(g + i, x);
    } else {
      for (size_t k = i; k < total && k < i + 4; ++k) g[k] = to_bf(logsigmoid(to_f(pre[k]) + bias[k % C]) * inv);
    }
  }
}

// The backward with 4 columns a thread (C % 4 == 0, aligned pointers): a warp reads 128 columns of a row with 8-byte
// accesses, the block's 8 warps and the grid's y dimension stride over rows, and dbias is summed in registers, then
// over the block's warps, then by one atomic per column and block.
__global__ void forget_gate_bwd_vec_kernel(int n, int C, const bf16* pre, const bf16* dg, const float* bias,
                                           float normaliser, bf16* dpre, float* dbias) {
  __shared__ float part[kColRows][32 * 4 + 1];
  const int c = (blockIdx.x * 32 + threadIdx.x) * 4;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (c < C) {
    const float4 b = *reinterpret_cast<const float4*>(bias + c);
    const float inv = 1.f / normaliser;
#pragma unroll 4
    for (int r = blockIdx.y * kColRows + threadIdx.y; r < n; r += gridDim.y * kColRows) {
      const size_t i = size_t(r) * C + c;
      float x[4], d[4];
      load4(pre + i, x);
      load4(dg + i, d);
      d[0] = d[0] * inv / (1.f + expf(x[0] + b.x)), d[1] = d[1] * inv / (1.f + expf(x[1] + b.y));
      d[2] = d[2] * inv / (1.f + expf(x[2] + b.z)), d[3] = d[3] * inv / (1.f + expf(x[3] + b.w));
      store4(dpre + i, d);
      for (int k = 0; k < 4; ++k) acc[k] += d[k];
    }
  }
  for (int k = 0; k < 4; ++k) part[threadIdx.y][threadIdx.x * 4 + k] = acc[k];
  __syncthreads();
  const int j = threadIdx.y * 32 + threadIdx.x;  // one of the block's 128 columns
  if (j < 128 && blockIdx.x * 128 + j < C) {
    float s = 0.f;
    for (int k = 0; k < kColRows; ++k) s += part[k][j];
    atomicAdd(dbias + blockIdx.x * 128 + j, s);
  }
}

// dst[:, col : col + cols] = src, in units of U (a uint4 of 8 bf16 where columns and pointers allow it, else one bf16).
template <class U>
__global__ void copy_columns_kernel(int rows, int units, const U* src, size_t dst_units, U* dst) {
  const size_t total = size_t(rows) * units;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / unsigned(units);
    dst[r * dst_units + (i - r * units)] = src[i];
  }
}

__device__ __forceinline__ float swiglu(float a, float b) { return a * sigmoid(a) * b; }
__device__ __forceinline__ void swiglu_grad(float a, float b, float dy, float& da, float& db) {
  const float sg = sigmoid(a);
  da = dy * b * sg * (1.f + a * (1.f - sg));
  db = dy * a * sg;
}

// ab [rows, 2F] holds a row's a then its b; y, dy [rows, F]. A thread takes groups of W outputs; with `vec`
// (F % W == 0, pointers aligned to W bf16) a group lies in one row and each operand moves as one access.
template <int W>
__global__ void swiglu_fwd_kernel(int F, size_t n, bool vec, const bf16* ab, bf16* y) {
  for (size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x, groups = (n + W - 1) / W; g < groups;
       g += size_t(gridDim.x) * blockDim.x) {
    const size_t e = g * W;
    if (vec) {
      const bf16* a = ab + e + (e / F) * F;  // row r starts at 2F r: e + F r
      float av[W], bv[W];
      loadw<W>(a, av);
      loadw<W>(a + F, bv);
#pragma unroll
      for (int k = 0; k < W; ++k) av[k] = swiglu(av[k], bv[k]);
      storew<W>(y + e, av);
    } else {
      for (size_t k = e; k < n && k < e + W; ++k) {
        const bf16* a = ab + k + (k / F) * F;
        y[k] = to_bf(swiglu(to_f(a[0]), to_f(a[F])));
      }
    }
  }
}

// kY: y = swiglu(a, b) too, as swiglu_fwd_kernel writes it (the same function, the same rounding to bf16).
template <int W, bool kY>
__global__ void swiglu_bwd_kernel(int F, size_t n, bool vec, const bf16* ab, const bf16* dy, bf16* dab, bf16* y) {
  for (size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x, groups = (n + W - 1) / W; g < groups;
       g += size_t(gridDim.x) * blockDim.x) {
    const size_t e = g * W;
    if (vec) {
      const size_t ia = e + (e / F) * F;
      float av[W], bv[W], dyv[W], dav[W], dbv[W];
      loadw<W>(ab + ia, av);
      loadw<W>(ab + ia + F, bv);
      loadw<W>(dy + e, dyv);
#pragma unroll
      for (int k = 0; k < W; ++k) swiglu_grad(av[k], bv[k], dyv[k], dav[k], dbv[k]);
      storew<W>(dab + ia, dav);
      storew<W>(dab + ia + F, dbv);
      if (kY) {
#pragma unroll
        for (int k = 0; k < W; ++k) av[k] = swiglu(av[k], bv[k]);
        storew<W>(y + e, av);
      }
    } else {
      for (size_t k = e; k < n && k < e + W; ++k) {
        const size_t ia = k + (k / F) * F;
        const float a = to_f(ab[ia]), b = to_f(ab[ia + F]);
        float dak, dbk;
        swiglu_grad(a, b, to_f(dy[k]), dak, dbk);
        dab[ia] = to_bf(dak);
        dab[ia + F] = to_bf(dbk);
        if (kY) y[k] = to_bf(swiglu(a, b));
      }
    }
  }
}

template <int W>
void launch_swiglu_bwd_w(const LaunchGrid& l, int F, size_t n, bool vec, const void* ab, const void* dy, void* dab,
                         void* y, cudaStream_t s) {
  if (y)
    swiglu_bwd_kernel<W, true><<<l.grid((n + W - 1) / W), kThreads, 0, s>>>(F, n, vec, as_bf16(ab), as_bf16(dy),
                                                                          as_bf16(dab), as_bf16(y));
  else
    swiglu_bwd_kernel<W, false><<<l.grid((n + W - 1) / W), kThreads, 0, s>>>(F, n, vec, as_bf16(ab), as_bf16(dy),
                                                                           as_bf16(dab), nullptr);
}

// 32-column tiles across x; the rows split over y until the grid has about 4 blocks per SM.
dim3 column_grid(const LaunchGrid& l, int n, int D) {
  const int gx = (D + 31) / 32;
  const int row_groups = (n + kColRows - 1) / kColRows;
  const int gy = std::max(1, std::min(row_groups, l.sms() * 4 / gx));
  return dim3(unsigned(gx), unsigned(gy));
}

}  // namespace

void launch_convert(const LaunchGrid& l, size_t n, const void* src, DType src_type, void* dst, DType dst_type,
                    cudaStream_t s) {
  if (n == 0) return;
  if (src_type == dst_type) {
    if (dst != src) SPB_CUDA(cudaMemcpyAsync(dst, src, n * dtype_size(src_type), cudaMemcpyDeviceToDevice, s));
  } else if (src_type == DType::f32) {
    const bool vec = aligned(src, 16) && aligned(dst, 8);
    convert_kernel<<<l.grid((n + 3) / 4), kThreads, 0, s>>>(n, vec, static_cast<const float*>(src), as_bf16(dst));
    SPB_CUDA_LAUNCH();
  } else {
    const bool vec = aligned(src, 8) && aligned(dst, 16);
    convert_kernel<<<l.grid((n + 3) / 4), kThreads, 0, s>>>(n, vec, as_bf16(src), static_cast<float*>(dst));
    SPB_CUDA_LAUNCH();
  }
}

void launch_embedding_fwd(const LaunchGrid& l, int n, int D, const int32_t* tokens, const float* table, float* x,
                          cudaStream_t s) {
  if (n <= 0 || D <= 0) return;
  embedding_fwd_kernel<<<l.grid(size_t(n) * D), kThreads, 0, s>>>(n, D, tokens, table, x);
  SPB_CUDA_LAUNCH();
}
void launch_embedding_bwd(const LaunchGrid& l, int n, int D, const int32_t* tokens, const float* dx, float* dtable,
                          cudaStream_t s) {
  if (n <= 0 || D <= 0) return;
  embedding_bwd_kernel<<<l.grid(size_t(n) * D), kThreads, 0, s>>>(n, D, tokens, dx, dtable);
  SPB_CUDA_LAUNCH();
}

void launch_forget_gate_fwd(const LaunchGrid& l, int n, int C, const void* pre, const float* bias, float normaliser,
                            void* g, cudaStream_t s) {
  if (n <= 0 || C <= 0) return;
  const bool vec = C % 4 == 0 && aligned(pre, 8) && aligned(bias, 16) && aligned(g, 8);
  forget_gate_fwd_kernel<<<l.grid((size_t(n) * C + 3) / 4), kThreads, 0, s>>>(n, C, vec, as_bf16(pre), bias,
                                                                               normaliser, as_bf16(g));
  SPB_CUDA_LAUNCH();
}
void launch_forget_gate_bwd(const LaunchGrid& l, int n, int C, const void* pre, const float* bias, float normaliser,
                            const void* dg, void* dpre, float* dbias, cudaStream_t s) {
  if (n <= 0 || C <= 0) return;
  if (C % 4 == 0 && aligned(pre, 8) && aligned(dg, 8) && aligned(bias, 16) && aligned(dpre, 8)) {
    // enough blocks to keep ~8 row loads of every warp in flight on every SM
    const int gx = (C + 127) / 128, gy = std::max(1, std::min((n + kColRows - 1) / kColRows, l.sms() * 8 / gx));
    forget_gate_bwd_vec_kernel<<<dim3(unsigned(gx), unsigned(gy)), dim3(32, kColRows), 0, s>>>(
        n, C, as_bf16(pre), as_bf16(dg), bias, normaliser, as_bf16(dpre), dbias);
  } else {
    const ForgetGateBwd op{C, as_bf16(pre), as_bf16(dg), bias, normaliser, as_bf16(dpre)};
    column_sum_kernel<<<column_grid(l, n, C), dim3(32, kColRows), 0, s>>>(n, C, op, dbias);
  }
  SPB_CUDA_LAUNCH();
}

void launch_swiglu_fwd(const LaunchGrid& l, int rows, int F, const void* ab, void* y, cudaStream_t s) {
  const size_t n = size_t(rows) * F;
  if (n == 0) return;
  if (F % 8 == 0 && aligned(ab, 16) && aligned(y, 16)) {
    swiglu_fwd_kernel<8><<<l.grid((n + 7) / 8), kThreads, 0, s>>>(F, n, true, as_bf16(ab), as_bf16(y));
  } else {
    const bool vec = F % 4 == 0 && aligned(ab, 8) && aligned(y, 8);
    swiglu_fwd_kernel<4><<<l.grid((n + 3) / 4), kThreads, 0, s>>>(F, n, vec, as_bf16(ab), as_bf16(y));
  }
  SPB_CUDA_LAUNCH();
}
void launch_swiglu_bwd(const LaunchGrid& l, int rows, int F, const void* ab, const void* dy, void* dab, void* y,
                       cudaStream_t s) {
  const size_t n = size_t(rows) * F;
  if (n == 0) return;
  if (F % 8 == 0 && aligned(ab, 16) && aligned(dy, 16) && aligned(dab, 16) && (!y || aligned(y, 16))) {
    launch_swiglu_bwd_w<8>(l, F, n, true, ab, dy, dab, y, s);
  } else {
    const bool vec = F % 4 == 0 && aligned(ab, 8) && aligned(dy, 8) && aligned(dab, 8) && (!y || aligned(y, 8));
    launch_swiglu_bwd_w<4>(l, F, n, vec, ab, dy, dab, y, s);
  }
  SPB_CUDA_LAUNCH();
}

void launch_copy_columns(const LaunchGrid& l, int rows, int cols, const void* src, int dst_cols, int col, void* dst,
                         cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  bf16* d = as_bf16(dst) + col;
  const size_t total = size_t(rows) * cols;
  if (cols % 8 == 0 && dst_cols % 8 == 0 && aligned(src, 16) && aligned(d, 16))
    copy_columns_kernel<<<l.grid(total / 8), kThreads, 0, s>>>(rows, cols / 8, static_cast<const uint4*>(src),
                                                               size_t(dst_cols) / 8, reinterpret_cast<uint4*>(d));
  else
    copy_columns_kernel<<<l.grid(total), kThreads, 0, s>>>(rows, cols, as_bf16(src), size_t(dst_cols), d);
  SPB_CUDA_LAUNCH();
}

}  // namespace model_cuda
}  // namespace spb
