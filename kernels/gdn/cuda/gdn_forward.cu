// The Gated DeltaNet forward on the GPU in three kernels (kernels/gdn/cuda/NOTES.md): the chunk factors (gamma, the
// solve T = (I + L)^-1, W, U0; parallel over chunks), the chunk-state recurrence (sequential over chunks, parallel
// over 16-column blocks of the state, which never mix) and the output (parallel over chunks). fp32 arithmetic
// throughout on bf16 activations; the formulas are kernels/gdn/cpu/gdn_chunked.h's.
#include <cmath>

#include "kernels/gdn/cuda/gdn_cuda_internal.h"
#include "runtime/cuda_check.h"

namespace spb {
namespace gdn_cuda {

namespace {

constexpr int kPad = kChunk + 1;  // the row pitch of a 64 x 64 matrix in shared memory

// Shared memory of chunk_prep_kernel (floats): gam, beta, e^gam, L, T, the product tiles.
constexpr int kPrepSmem = 3 * kChunk + 2 * kChunk * kPad + kGemmSmem;

__global__ void __launch_bounds__(kThreads) chunk_prep_kernel(Dims d, const bf16* k, const bf16* v, const float* g,
                                                              const float* beta, Scratch s) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* gam = reinterpret_cast<float*>(smem_raw);
  float* bet = gam + kChunk;
  float* eg = bet + kChunk;
  float* Lm = eg + kChunk;
  float* Tm = Lm + kChunk * kPad;
  float* gs = Tm + kChunk * kPad;
  const int c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z), tid = int(threadIdx.x);
  const int t0 = c * kChunk, n = min(kChunk, d.T - t0);
  const size_t bhc = bhc_of(d, b, h, c), ldk = size_t(d.H) * d.K, ldv = size_t(d.H) * d.V;
  const bf16* kc = k + act_at(d, b, h, t0, d.K);  // token t0 + i at kc + i * ldk
  if (tid == 0) {  // gamma: the inclusive cumsum of g; rows past the chunk's end repeat its last value, beta 0 there
    float acc = 0.0f;
    for (int i = 0; i < kChunk; ++i) {
      if (i < n) acc += g[gate_at(d, b, h, t0 + i)];
      gam[i] = acc;
      bet[i] = i < n ? beta[gate_at(d, b, h, t0 + i)] : 0.0f;
    }
  }
  __syncthreads();
  if (tid < kChunk) {
    eg[tid] = expf(gam[tid]);
    s.gam[bhc * kChunk + tid] = gam[tid];
  }
  // L_ij = beta_i e^{gam_i - gam_j} k_i . k_j, j < i (zero elsewhere)
  block_gemm<4, 4>(
      kChunk, kChunk, d.K, [=](int i, int x) { return i < n ? bf(kc[i * ldk + x]) : 0.0f; },
      [=](int x, int j) { return j < n ? bf(kc[j * ldk + x]) : 0.0f; },
      [=](int i, int j, float acc) {
        Lm[i * kPad + j] = (j < i && i < n) ? bet[i] * expf(gam[i] - gam[j]) * acc : 0.0f;
      },
      gs);
  // T = (I + L)^-1 by forward substitution, one column per thread: the columns of T are independent.
  if (tid < kChunk) {
    const int col = tid;
    for (int i = 0; i < kChunk; ++i) {
      float x = i == col ? 1.0f : 0.0f;
      if (i > col)
        for (int j = col; j < i; ++j) x -= Lm[i * kPad + j] * Tm[j * kPad + col];
      Tm[i * kPad + col] = x;
    }
  }
  __syncthreads();
  for (int e = tid; e < kChunk * kChunk; e += kThreads) s.Tm[bhc * kChunk * kChunk + e] = Tm[(e / kChunk) * kPad + e % kChunk];
  // W = T (beta e^gam K), U0 = T (beta V)
  float* Wc = s.W + bhc * kChunk * d.K;
  block_gemm<4, 4>(
      kChunk, d.K, kChunk, [=](int i, int j) { return Tm[i * kPad + j]; },
      [=](int j, int x) { return j < n ? bet[j] * eg[j] * bf(kc[j * ldk + x]) : 0.0f; },
      [=](int i, int x, float acc) { Wc[size_t(i) * d.K + x] = acc; }, gs);
  if (v) {
    const bf16* vc = v + act_at(d, b, h, t0, d.V);
    float* Uc = s.U0 + bhc * kChunk * d.V;
    block_gemm<4, 4>(
        kChunk, d.V, kChunk, [=](int i, int j) { return Tm[i * kPad + j]; },
        [=](int j, int x) { return j < n ? bet[j] * bf(vc[j * ldv + x]) : 0.0f; },
        [=](int i, int x, float acc) { Uc[size_t(i) * d.V + x] = acc; }, gs);
  }
}

// Shared memory of states_fwd_kernel (floats): the state block [K][16], v_new [64][16], the decays, the tiles.
int states_fwd_smem(int K) { return K * kStateCols + kChunk * kStateCols + kChunk + kGemmSmem; }

__global__ void __launch_bounds__(kThreads) states_fwd_kernel(Dims d, int cols, const bf16* k, const float* gam,
                                                              const float* W, const float* U0, const float* h0,
                                                              bool identity, float* Hs, float* U, float* fin) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* hS = reinterpret_cast<float*>(smem_raw);
  float* vn = hS + d.K * kStateCols;
  float* kd = vn + kChunk * kStateCols;
  float* gs = kd + kChunk;
  const int c0 = int(blockIdx.x) * kStateCols, h = int(blockIdx.y), b = int(blockIdx.z), tid = int(threadIdx.x);
  const size_t bh = size_t(b) * d.H + h, ldk = size_t(d.H) * d.K, KS = size_t(d.K) * cols;
  for (int e = tid; e < d.K * kStateCols; e += kThreads) {
    const int r = e / kStateCols, col = c0 + e % kStateCols;
    hS[e] = h0 ? h0[bh * KS + size_t(r) * cols + col] : (identity && r == col ? 1.0f : 0.0f);
  }
  auto store_state = [&](float* dst) {
    for (int e = tid; e < d.K * kStateCols; e += kThreads)
      dst[size_t(e / kStateCols) * cols + c0 + e % kStateCols] = hS[e];
  };
  __syncthreads();
  for (int c = 0; c < d.NC; ++c) {
    const int t0 = c * kChunk, n = min(kChunk, d.T - t0);
    const size_t bhc = bhc_of(d, b, h, c);
    const float* gc = gam + bhc * kChunk;
    const float gC = gc[kChunk - 1], eC = expf(gC);
    if (tid < kChunk) kd[tid] = tid < n ? expf(gC - gc[tid]) : 0.0f;
    if (Hs) store_state(Hs + (bh * (d.NC + 1) + c) * KS);
    const float* Wc = W + bhc * kChunk * d.K;
    const float* U0c = U0 ? U0 + bhc * kChunk * cols : nullptr;
    float* Uc = U ? U + bhc * kChunk * cols : nullptr;
    // v_new = U0 - W h (rows past the chunk's end: W and U0 are zero there)
    block_gemm<4, 1>(
        kChunk, kStateCols, d.K, [=](int i, int r) { return Wc[size_t(i) * d.K + r]; },
        [=](int r, int j) { return hS[r * kStateCols + j]; },
        [=](int i, int j, float acc) {
          const float x = (U0c ? U0c[size_t(i) * cols + c0 + j] : 0.0f) - acc;
          vn[i * kStateCols + j] = x;
          if (Uc) Uc[size_t(i) * cols + c0 + j] = x;
        },
        gs);
    // h <- e^{gam_C} h + K~^T v_new, K~_i = e^{gam_C - gam_i} k_i
    const bf16* kc = k + act_at(d, b, h, t0, d.K);
    block_gemm<8, 1>(
        d.K, kStateCols, kChunk, [=](int r, int i) { return i < n ? kd[i] * bf(kc[i * ldk + r]) : 0.0f; },
        [=](int i, int j) { return vn[i * kStateCols + j]; },
        [=](int r, int j, float acc) { hS[r * kStateCols + j] = eC * hS[r * kStateCols + j] + acc; }, gs);
  }
  if (Hs) store_state(Hs + (bh * (d.NC + 1) + d.NC) * KS);
  if (fin) store_state(fin + bh * KS);
}

// Shared memory of output_kernel (floats): gam, e^gam, P, the tiles.
constexpr int kOutputSmem = 2 * kChunk + kChunk * kPad + kGemmSmem;

__global__ void __launch_bounds__(kThreads) output_kernel(Dims d, const bf16* q, const bf16* k, Scratch s, bf16* o) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* gam = reinterpret_cast<float*>(smem_raw);
  float* eg = gam + kChunk;
  float* P = eg + kChunk;
  float* gs = P + kChunk * kPad;
  const int c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z), tid = int(threadIdx.x);
  const int t0 = c * kChunk, n = min(kChunk, d.T - t0);
  const size_t bhc = bhc_of(d, b, h, c), bh = size_t(b) * d.H + h, ldk = size_t(d.H) * d.K, ldv = size_t(d.H) * d.V;
  const float scale = 1.0f / sqrtf(float(d.K));
  if (tid < kChunk) gam[tid] = s.gam[bhc * kChunk + tid], eg[tid] = expf(gam[tid]);
  const bf16* qc = q + act_at(d, b, h, t0, d.K);
  const bf16* kc = k + act_at(d, b, h, t0, d.K);
  // P_ij = e^{gam_i - gam_j} q_i . k_j, j <= i
  block_gemm<4, 4>(
      kChunk, kChunk, d.K, [=](int i, int x) { return i < n ? bf(qc[i * ldk + x]) : 0.0f; },
      [=](int x, int j) { return j < n ? bf(kc[j * ldk + x]) : 0.0f; },
      [=](int i, int j, float acc) { P[i * kPad + j] = (j <= i && i < n) ? expf(gam[i] - gam[j]) * acc : 0.0f; }, gs);
  // o = s [diag(e^gam) Q | P] [h[n] ; U]
  const float* S0 = s.Hs + (bh * (d.NC + 1) + c) * size_t(d.K) * d.V;
  const float* Uc = s.U + bhc * kChunk * d.V;
  bf16* oc = o + act_at(d, b, h, t0, d.V);
  block_gemm<4, 4>(
      kChunk, d.V, d.K + kChunk,
      [=](int i, int x) { return x < d.K ? (i < n ? eg[i] * bf(qc[i * ldk + x]) : 0.0f) : P[i * kPad + x - d.K]; },
      [=](int x, int j) { return x < d.K ? S0[size_t(x) * d.V + j] : Uc[size_t(x - d.K) * d.V + j]; },
      [=](int i, int j, float acc) {
        if (i < n) oc[i * ldv + j] = __float2bfloat16(scale * acc);
      },
      gs);
}

template <class Kern>
void allow_smem(Kern kernel, size_t bytes) {
  if (bytes > 48 * 1024) SPB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace

void launch_chunk_prep(const Dims& d, const bf16* k, const bf16* v, const float* g, const float* beta,
                       const Scratch& s, cudaStream_t st) {
  const size_t smem = size_t(kPrepSmem) * 4;
  allow_smem(chunk_prep_kernel, smem);
  chunk_prep_kernel<<<dim3(d.NC, d.H, d.B), kThreads, smem, st>>>(d, k, v, g, beta, s);
  SPB_CUDA_LAUNCH();
}

void launch_states_fwd(const Dims& d, int cols, const bf16* k, const float* gam, const float* W, const float* U0,
                       const float* h0, bool identity, float* Hs, float* U, float* final_state, cudaStream_t st) {
  const size_t smem = size_t(states_fwd_smem(d.K)) * 4;
  allow_smem(states_fwd_kernel, smem);
  states_fwd_kernel<<<dim3(cols / kStateCols, d.H, d.B), kThreads, smem, st>>>(d, cols, k, gam, W, U0, h0, identity,
                                                                                Hs, U, final_state);
  SPB_CUDA_LAUNCH();
}

void launch_output(const Dims& d, const bf16* q, const bf16* k, const Scratch& s, bf16* o, cudaStream_t st) {
  const size_t smem = size_t(kOutputSmem) * 4;
  allow_smem(output_kernel, smem);
  output_kernel<<<dim3(d.NC, d.H, d.B), kThreads, smem, st>>>(d, q, k, s, o);
  SPB_CUDA_LAUNCH();
}

}  // namespace gdn_cuda
}  // namespace spb
