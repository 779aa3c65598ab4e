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

// states_fwd_kernel's shared memory (floats): the state block h [K][kSP] and v_new [64][kSP] (pitch 24: conflict-free
// B fragments), the decays, and two stages (chunk c, chunk c + 1 in flight) of gam [64], W [64][K + 4] fp32, k
// [64][K + 8] bf16 and U0's column block [64][16] fp32, loaded by cp.async.
constexpr int kSP = kStateCols + 8;
__host__ __device__ inline int states_fwd_stage(int K) { return kChunk + kChunk * (K + 4) + kChunk * (K + 8) / 2 + kChunk * kStateCols; }
int states_fwd_smem(int K) { return K * kSP + kChunk * kSP + kChunk + 2 * states_fwd_stage(K); }

__global__ void __launch_bounds__(kThreads) states_fwd_kernel(Dims d, int cols, const bf16* k, const float* gam,
                                                              const float* W, const float* U0, const float* h0,
                                                              bool identity, float* Hs, float* U, float* fin) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int K = d.K, wp = K + 4, kp = K + 8;
  float* hS = reinterpret_cast<float*>(smem_raw);
  float* vn = hS + K * kSP;
  float* kd = vn + kChunk * kSP;
  float* stages = kd + kChunk;
  const int stage_floats = states_fwd_stage(K);
  auto gam_of = [=](int buf) { return stages + buf * stage_floats; };
  auto W_of = [=](int buf) { return gam_of(buf) + kChunk; };
  auto k_of = [=](int buf) { return reinterpret_cast<bf16*>(W_of(buf) + kChunk * wp); };
  auto U0_of = [=](int buf) { return W_of(buf) + kChunk * wp + kChunk * kp / 2; };
  const int c0 = int(blockIdx.x) * kStateCols, h = int(blockIdx.y), b = int(blockIdx.z), tid = int(threadIdx.x);
  const int warp = tid / 32;
  const size_t bh = size_t(b) * d.H + h, KS = size_t(K) * cols;
  // Chunk c's gam, W, k and U0 columns into stage buf (rows of k past the sequence's end are not read).
  auto stage = [=](int c, int buf) {
    const int t0 = c * kChunk, n = min(kChunk, d.T - t0);
    const size_t bhc = bhc_of(d, b, h, c);
    for (int e = tid; e < kChunk / 4; e += kThreads) copy16(gam_of(buf) + 4 * e, gam + bhc * kChunk + 4 * e);
    for (int e = tid; e < kChunk * K / 4; e += kThreads) {
      const int i = e / (K / 4), p = e % (K / 4);
      copy16(W_of(buf) + i * wp + 4 * p, W + (bhc * kChunk + i) * K + 4 * p);
    }
    for (int e = tid; e < n * K / 8; e += kThreads) {
      const int i = e / (K / 8), p = e % (K / 8);
      copy16(k_of(buf) + i * kp + 8 * p, k + act_at(d, b, h, t0 + i, K) + 8 * p);
    }
    if (U0)
      for (int e = tid; e < kChunk * 4; e += kThreads) {
        const int i = e / 4, p = e % 4;
        copy16(U0_of(buf) + i * kStateCols + 4 * p, U0 + (bhc * kChunk + i) * cols + c0 + 4 * p);
      }
    copy_commit();
  };
  for (int e = tid; e < K * kStateCols; e += kThreads) {
    const int r = e / kStateCols, j = e % kStateCols, col = c0 + j;
    hS[r * kSP + j] = h0 ? h0[bh * KS + size_t(r) * cols + col] : (identity && r == col ? 1.0f : 0.0f);
  }
  auto store_state = [=](float* dst) {
    for (int e = tid; e < K * kStateCols; e += kThreads)
      dst[size_t(e / kStateCols) * cols + c0 + e % kStateCols] = hS[(e / kStateCols) * kSP + e % kStateCols];
  };
  stage(0, 0);
  for (int c = 0; c < d.NC; ++c) {
    const int cur = c & 1, t0 = c * kChunk, n = min(kChunk, d.T - t0);
    copy_wait_all();
    __syncthreads();  // chunk c's stage is in; every read of the other stage (chunk c - 1) is done
    if (c + 1 < d.NC) stage(c + 1, cur ^ 1);
    const float* gc = gam_of(cur);
    const float* Wc = W_of(cur);
    const bf16* kc = k_of(cur);
    const float* U0c = U0_of(cur);
    const float gC = gc[kChunk - 1], eC = expf(gC);
    if (tid < kChunk) kd[tid] = tid < n ? expf(gC - gc[tid]) : 0.0f;
    if (Hs) store_state(Hs + (bh * (d.NC + 1) + c) * KS);
    float* Uc = U ? U + bhc_of(d, b, h, c) * kChunk * cols : nullptr;
    {  // v_new = U0 - W h: 64 x 16, one m16n8 piece per warp (W rows past the chunk's end are zero, and U0's)
      const int m0 = (warp >> 1) * 16, n0 = (warp & 1) * 8;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      piece_product(
            acc, m0, n0, 0, K, [=](int i, int r) { return Wc[i * wp + r]; },
            [=](int r, int j) { return hS[r * kSP + j]; });
      piece_epi(acc, m0, n0, [=](int i, int j, float x) {
        const float v = (U0 ? U0c[i * kStateCols + j] : 0.0f) - x;
        vn[i * kSP + j] = v;
        if (Uc) Uc[size_t(i) * cols + c0 + j] = v;
      });
    }
    __syncthreads();  // v_new and kd are in; every read of h is done
    // h <- e^{gam_C} h + K~^T v_new, K~_i = e^{gam_C - gam_i} k_i: (K / 16) x 2 pieces over the 8 warps
    for (int piece = warp; piece < (K / 16) * 2; piece += kThreads / 32) {
      const int m0 = (piece >> 1) * 16, n0 = (piece & 1) * 8;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      piece_product(
            acc, m0, n0, 0, kChunk, [=](int r, int i) { return i < n ? kd[i] * bf(kc[i * kp + r]) : 0.0f; },
            [=](int i, int j) { return vn[i * kSP + j]; });
      piece_epi(acc, m0, n0, [=](int r, int j, float x) { hS[r * kSP + j] = eC * hS[r * kSP + j] + x; });
    }
  }
  __syncthreads();
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
  block_gemm<4, 4, kChunkPasses>(
      kChunk, kChunk, d.K, [=](int i, int x) { return i < n ? bf(qc[i * ldk + x]) : 0.0f; },
      [=](int x, int j) { return j < n ? bf(kc[j * ldk + x]) : 0.0f; },
      [=](int i, int j, float acc) { P[i * kPad + j] = (j <= i && i < n) ? expf(gam[i] - gam[j]) * acc : 0.0f; }, gs);
  // o = s [diag(e^gam) Q | P] [h[n] ; U]
  const float* S0 = s.Hs + (bh * (d.NC + 1) + c) * size_t(d.K) * d.V;
  const float* Uc = s.U + bhc * kChunk * d.V;
  bf16* oc = o + act_at(d, b, h, t0, d.V);
  block_gemm<4, 4, kChunkPasses>(
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
