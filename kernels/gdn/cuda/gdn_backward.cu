// The Gated DeltaNet backward on the GPU (kernels/gdn/cuda/NOTES.md): the output's share of dU per chunk (dUo), the
// state-gradient recurrence in reverse (sequential over chunks, parallel over 16-column blocks of the state), then
// every gradient of a chunk from its states, state gradients and factors (parallel over chunks). fp32 arithmetic on
// bf16 activations; the formulas are kernels/gdn/cpu/gdn_chunked.cpp's backward, regrouped into chunk products.
#include <cmath>

#include "kernels/gdn/cuda/gdn_cuda_internal.h"
#include "runtime/cuda_check.h"

namespace spb {
namespace gdn_cuda {

namespace {

constexpr int kPad = kChunk + 1;

template <class Kern>
void allow_smem(Kern kernel, size_t bytes) {
  if (bytes > 48 * 1024) SPB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// Shared memory of dUo_kernel (floats): gam, P, the tiles.
constexpr int kDUoSmem = kChunk + kChunk * kPad + kGemmSmem;

__global__ void __launch_bounds__(kThreads) dUo_kernel(Dims d, const bf16* q, const bf16* k, const bf16* d_o, Scratch s) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* gam = reinterpret_cast<float*>(smem_raw);
  float* P = gam + kChunk;
  float* gs = P + kChunk * kPad;
  const int c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z), tid = int(threadIdx.x);
  const int t0 = c * kChunk, n = min(kChunk, d.T - t0);
  const size_t bhc = bhc_of(d, b, h, c), ldk = size_t(d.H) * d.K, ldv = size_t(d.H) * d.V;
  const float scale = 1.0f / sqrtf(float(d.K));
  if (tid < kChunk) gam[tid] = s.gam[bhc * kChunk + tid];
  const bf16* qc = q + act_at(d, b, h, t0, d.K);
  const bf16* kc = k + act_at(d, b, h, t0, d.K);
  const bf16* doc = d_o + act_at(d, b, h, t0, d.V);
  block_gemm<4, 4, kChunkPasses>(
      kChunk, kChunk, d.K, [=](int i, int x) { return i < n ? bf(qc[i * ldk + x]) : 0.0f; },
      [=](int x, int j) { return j < n ? bf(kc[j * ldk + x]) : 0.0f; },
      [=](int i, int j, float acc) {
        P[i * kPad + j] = (j <= i && i < n) ? scale * expf(gam[i] - gam[j]) * acc : 0.0f;
      },
      gs);
  float* dUoc = s.dUo + bhc * kChunk * d.V;
  block_gemm<4, 4, kChunkPasses>(
      kChunk, d.V, kChunk, [=](int j, int i) { return P[i * kPad + j]; },
      [=](int i, int x) { return i < n ? bf(doc[i * ldv + x]) : 0.0f; },
      [=](int j, int x, float acc) { dUoc[size_t(j) * d.V + x] = acc; }, gs);
}

// states_bwd_kernel's shared memory (floats): dh [K][kSP] and dU [64][kSP] (pitch 24), e^gam and the decays, and
// two stages (chunk c, chunk c - 1 in flight) of gam [64], W [64][K + 8] fp32 (read transposed: pitch K + 8 keeps the
// fragments conflict-free), k and q [64][K + 8] bf16, do's column block [64][16] bf16 and dUo's [64][16] fp32.
constexpr int kSP = kStateCols + 8;
__host__ __device__ inline int states_bwd_stage(int K) {
  return kChunk + kChunk * (K + 8) + 2 * (kChunk * (K + 8) / 2) + kChunk * kStateCols / 2 + kChunk * kStateCols;
}
int states_bwd_smem(int K) { return K * kSP + kChunk * kSP + 2 * kChunk + 2 * states_bwd_stage(K); }

__global__ void __launch_bounds__(kThreads) states_bwd_kernel(Dims d, const bf16* q, const bf16* k, const bf16* d_o,
                                                              Scratch s, const float* dht, float* dHs, float* dU,
                                                              float* dh0) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int K = d.K, V = d.V, wp = K + 8, kp = K + 8;
  float* dh = reinterpret_cast<float*>(smem_raw);
  float* dUs = dh + K * kSP;
  float* eg = dUs + kChunk * kSP;
  float* kd = eg + kChunk;
  float* stages = kd + kChunk;
  const int stage_floats = states_bwd_stage(K);
  auto gam_of = [=](int buf) { return stages + buf * stage_floats; };
  auto W_of = [=](int buf) { return gam_of(buf) + kChunk; };
  auto k_of = [=](int buf) { return reinterpret_cast<bf16*>(W_of(buf) + kChunk * wp); };
  auto q_of = [=](int buf) { return reinterpret_cast<bf16*>(W_of(buf) + kChunk * wp + kChunk * kp / 2); };
  auto do_of = [=](int buf) { return reinterpret_cast<bf16*>(W_of(buf) + kChunk * wp + kChunk * kp); };
  auto dUo_of = [=](int buf) { return W_of(buf) + kChunk * wp + kChunk * kp + kChunk * kStateCols / 2; };
  const int c0 = int(blockIdx.x) * kStateCols, h = int(blockIdx.y), b = int(blockIdx.z), tid = int(threadIdx.x);
  const int warp = tid / 32;
  const size_t bh = size_t(b) * d.H + h, KS = size_t(K) * V;
  const float scale = 1.0f / sqrtf(float(K));
  auto stage = [=](int c, int buf) {
    const int t0 = c * kChunk, n = min(kChunk, d.T - t0);
    const size_t bhc = bhc_of(d, b, h, c);
    for (int e = tid; e < kChunk / 4; e += kThreads) copy16(gam_of(buf) + 4 * e, s.gam + bhc * kChunk + 4 * e);
    for (int e = tid; e < kChunk * K / 4; e += kThreads) {
      const int i = e / (K / 4), p = e % (K / 4);
      copy16(W_of(buf) + i * wp + 4 * p, s.W + (bhc * kChunk + i) * K + 4 * p);
    }
    for (int e = tid; e < n * K / 8; e += kThreads) {
      const int i = e / (K / 8), p = e % (K / 8);
      copy16(k_of(buf) + i * kp + 8 * p, k + act_at(d, b, h, t0 + i, K) + 8 * p);
      copy16(q_of(buf) + i * kp + 8 * p, q + act_at(d, b, h, t0 + i, K) + 8 * p);
    }
    for (int e = tid; e < n * 2; e += kThreads) {
      const int i = e / 2, p = e % 2;
      copy16(do_of(buf) + i * kStateCols + 8 * p, d_o + act_at(d, b, h, t0 + i, V) + c0 + 8 * p);
    }
    for (int e = tid; e < kChunk * 4; e += kThreads) {
      const int i = e / 4, p = e % 4;
      copy16(dUo_of(buf) + i * kStateCols + 4 * p, s.dUo + (bhc * kChunk + i) * V + c0 + 4 * p);
    }
    copy_commit();
  };
  for (int e = tid; e < K * kStateCols; e += kThreads) {
    const int r = e / kStateCols, j = e % kStateCols;
    dh[r * kSP + j] = dht ? dht[bh * KS + size_t(r) * V + c0 + j] : 0.0f;
  }
  auto store_state = [=](float* dst) {
    for (int e = tid; e < K * kStateCols; e += kThreads)
      dst[size_t(e / kStateCols) * V + c0 + e % kStateCols] = dh[(e / kStateCols) * kSP + e % kStateCols];
  };
  stage(d.NC - 1, 0);
  for (int it = 0; it < d.NC; ++it) {
    const int c = d.NC - 1 - it, cur = it & 1, t0 = c * kChunk, n = min(kChunk, d.T - t0);
    copy_wait_all();
    __syncthreads();  // chunk c's stage is in; every read of the other stage (chunk c + 1) is done
    if (c > 0) stage(c - 1, cur ^ 1);
    const float* gc = gam_of(cur);
    const float* Wc = W_of(cur);
    const bf16* kc = k_of(cur);
    const bf16* qc = q_of(cur);
    const bf16* doc = do_of(cur);
    const float* dUoc = dUo_of(cur);
    const float gC = gc[kChunk - 1], eC = expf(gC);
    if (tid < kChunk) {
      eg[tid] = tid < n ? expf(gc[tid]) : 0.0f;
      kd[tid] = tid < n ? expf(gC - gc[tid]) : 0.0f;
    }
    if (dHs) store_state(dHs + bhc_of(d, b, h, c) * KS);
    float* dUc = dU ? dU + bhc_of(d, b, h, c) * kChunk * V : nullptr;
    __syncthreads();  // the decays are in
    {  // dU = dUo + K~ dh: 64 x 16, one piece per warp (the state handed on reads U through K~^T U)
      const int m0 = (warp >> 1) * 16, n0 = (warp & 1) * 8;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      piece_product(
            acc, m0, n0, 0, K, [=](int i, int r) { return i < n ? kd[i] * bf(kc[i * kp + r]) : 0.0f; },
            [=](int r, int j) { return dh[r * kSP + j]; });
      piece_epi(acc, m0, n0, [=](int i, int j, float x) {
        const float v = dUoc[i * kStateCols + j] + x;
        dUs[i * kSP + j] = v;
        if (dUc) dUc[size_t(i) * V + c0 + j] = v;
      });
    }
    __syncthreads();  // dU is in; every read of dh is done
    // dh <- e^{gam_C} dh + [s diag(e^gam) Q | -W]^T [dO ; dU]: (K / 16) x 2 pieces over the 8 warps
    for (int piece = warp; piece < (K / 16) * 2; piece += kThreads / 32) {
      const int m0 = (piece >> 1) * 16, n0 = (piece & 1) * 8;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      piece_product(
            acc, m0, n0, 0, kChunk, [=](int r, int x) { return x < n ? scale * eg[x] * bf(qc[x * kp + r]) : 0.0f; },
            [=](int x, int j) { return x < n ? bf(doc[x * kStateCols + j]) : 0.0f; });
      piece_product(
            acc, m0, n0, 0, kChunk, [=](int r, int x) { return -Wc[x * wp + r]; },
            [=](int x, int j) { return dUs[x * kSP + j]; });
      piece_epi(acc, m0, n0, [=](int r, int j, float x) { dh[r * kSP + j] = eC * dh[r * kSP + j] + x; });
    }
  }
  __syncthreads();
  if (dh0) store_state(dh0 + bh * KS);
}

// Shared memory of chunk_grads_kernel (bytes): the chunk's q, k [64][K + 8] and v, do [64][V + 8] bf16 (rows 16-byte
// aligned for cp.async), then floats, P = max(K, V) + 1: six vectors of 64, a reduction row, two 64 x 64 matrices (Dm,
// then T, then dL; KK), three 64 x P buffers (dq then Y^W, dk, Y^U), the tiles. 213 KB at dk = dv = 128 (of the 227 KB
// a block may opt in to on sm_90; one block an SM either way).
__host__ __device__ inline int grads_act_bytes(int K, int V) {
  return 2 * kChunk * (K + 8) * 2 + 2 * kChunk * (V + 8) * 2;
}
int grads_smem(int K, int V) {
  const int P = (K > V ? K : V) + 1;
  return grads_act_bytes(K, V) + 4 * (7 * kChunk + kThreads + 2 * kChunk * kPad + 3 * kChunk * P + kGemmSmem);
}

// One warp's sum of f(x) over x in [0, width), lanes striding by 32, then a butterfly of shuffles (every lane gets it):
// the row dots of chunk_grads run a warp a row from shared memory, not 64 threads down 128-long serial chains.
template <class F>
__device__ __forceinline__ float warp_sum(int begin, int end, F f) {
  const int lane = int(threadIdx.x) % 32;
  float acc = 0.0f;
  for (int x = begin + lane; x < end; x += 32) acc += f(x);
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  return acc;
}

// One block an SM (by its shared memory), so ptxas may give it every register: the prefetching products need ~190.
__global__ void __launch_bounds__(kThreads, 1)
    chunk_grads_kernel(Dims d, const bf16* q, const bf16* k, const bf16* v, const float* beta, const bf16* d_o,
                       Scratch s, bf16* dq, bf16* dk, bf16* dv, float* dg, float* dbeta) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int P = (d.K > d.V ? d.K : d.V) + 1, kp = d.K + 8, vp = d.V + 8;
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* ks = qs + kChunk * kp;
  bf16* vs = ks + kChunk * kp;
  bf16* dos = vs + kChunk * vp;
  float* gam = reinterpret_cast<float*>(smem_raw + grads_act_bytes(d.K, d.V));
  float* eg = gam + kChunk;
  float* kd = eg + kChunk;
  float* bet = kd + kChunk;
  float* dgam = bet + kChunk;
  float* dbet = dgam + kChunk;
  float* rowR = dbet + kChunk;
  float* red = rowR + kChunk;
  float* M1 = red + kThreads;
  float* KK = M1 + kChunk * kPad;
  float* BA = KK + kChunk * kPad;
  float* BB = BA + kChunk * P;
  float* BC = BB + kChunk * P;
  float* gs = BC + kChunk * P;
  const int c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z), tid = int(threadIdx.x);
  const int t0 = c * kChunk, n = min(kChunk, d.T - t0), K = d.K, V = d.V, warp = tid / 32, lane = tid % 32;
  const size_t bhc = bhc_of(d, b, h, c), bh = size_t(b) * d.H + h;
  const size_t KS = size_t(K) * V;
  const float scale = 1.0f / sqrtf(float(K));
  if (tid < kChunk) {
    const float gi = s.gam[bhc * kChunk + tid], gC = s.gam[bhc * kChunk + kChunk - 1];
    gam[tid] = gi;
    eg[tid] = tid < n ? expf(gi) : 0.0f;
    kd[tid] = tid < n ? expf(gC - gi) : 0.0f;
    bet[tid] = tid < n ? beta[gate_at(d, b, h, t0 + tid)] : 0.0f;
    dgam[tid] = 0.0f, dbet[tid] = 0.0f, rowR[tid] = 0.0f;
  }
  // q, k, v and do of the chunk into shared memory once (rows past n zero): every product and row dot below reads
  // them there; from global memory each k-step of block_gemm and each row dot waited on L2 loads. The copies land
  // while (1) reads the states.
  stage_chunk_rows(d, b, h, t0, n, K, kp, qs, q, ks, k);
  stage_chunk_rows(d, b, h, t0, n, V, vp, vs, v, dos, d_o);
  copy_commit();
  const float* S0 = s.Hs + (bh * (d.NC + 1) + c) * KS;  // the state entering the chunk
  const float* S1 = S0 + KS;                            // and leaving it
  const float* dS = s.dHs + bhc * KS;                   // the gradient of the state leaving it
  const float* Uc = s.U + bhc * kChunk * V;
  const float* U0c = s.U0 + bhc * kChunk * V;
  const float* Wc = s.W + bhc * kChunk * K;
  const float* dUc = s.dU + bhc * kChunk * V;
  const float* Tc = s.Tm + bhc * kChunk * kChunk;
  auto kk_at = [=](int i, int x) { return bf(ks[i * kp + x]); };
  auto q_at = [=](int i, int x) { return bf(qs[i * kp + x]); };
  auto do_at = [=](int i, int x) { return bf(dos[i * vp + x]); };

  // (1) The state handed on decays by e^{gam_C}, and K~ = e^{gam_C - gam} K: their gate terms sum to <dS, S_leaving>.
  float part = 0.0f;
#pragma unroll 8
  for (size_t e = size_t(tid); e < KS; e += kThreads) part += dS[e] * S1[e];
  for (int m = 16; m > 0; m >>= 1) part += __shfl_xor_sync(0xffffffffu, part, m);
  if (lane == 0) red[warp] = part;
  copy_wait_all();
  __syncthreads();  // the warps' sums and the staged activations are in
  if (tid == 0) {
    float acc = 0.0f;
    for (int i = 0; i < kThreads / 32; ++i) acc += red[i];
    dgam[n - 1] += acc;
  }
  // (2) Dm = s (dO U^T) o G, G_ij = e^{gam_i - gam_j} for j <= i
  block_gemm<4, 4, kChunkPasses, true, true>(
      kChunk, kChunk, V, do_at, [=](int x, int j) { return Uc[size_t(j) * V + x]; },
      [=](int i, int j, float acc) {
        M1[i * kPad + j] = (j <= i && i < n) ? scale * expf(gam[i] - gam[j]) * acc : 0.0f;
      },
      gs);
  // (3) dq = [s diag(e^gam) dO | Dm] [S0^T ; K]; the output's gate terms: dgam_i += q_i . dq_i (and -k_j . dk_j below)
  block_gemm<4, 4, kChunkPasses, true, true>(
      kChunk, K, V + kChunk,
      [=](int i, int x) { return x < V ? scale * eg[i] * do_at(i, x) : M1[i * kPad + x - V]; },
      [=](int x, int r) { return x < V ? S0[size_t(r) * V + x] : kk_at(x - V, r); },
      [=](int i, int r, float acc) { BA[i * P + r] = acc; }, gs);
  for (int e = tid; e < n * K; e += kThreads) dq[act_at(d, b, h, t0 + e / K, K) + e % K] = __float2bfloat16(BA[(e / K) * P + e % K]);
  for (int i = warp; i < n; i += kThreads / 32) {
    const float acc = warp_sum(0, K, [=](int r) { return q_at(i, r) * BA[i * P + r]; });
    if (lane == 0) dgam[i] += acc;
  }
  // (4) dk = Dm^T Q + diag(e^{gam_C - gam}) U dS^T (+ the terms below); dgam_j -= k_j . (those two)
  block_gemm<4, 4, kChunkPasses, true, true>(
      kChunk, K, kChunk + V,
      [=](int j, int x) { return x < kChunk ? M1[x * kPad + j] : kd[j] * Uc[size_t(j) * V + x - kChunk]; },
      [=](int x, int r) { return x < kChunk ? q_at(x, r) : dS[size_t(r) * V + x - kChunk]; },
      [=](int j, int r, float acc) { BB[j * P + r] = acc; }, gs);
  for (int i = warp; i < n; i += kThreads / 32) {
    const float acc = warp_sum(0, K, [=](int r) { return kk_at(i, r) * BB[i * P + r]; });
    if (lane == 0) dgam[i] -= acc;
  }
  // (5) KK = K K^T
  block_gemm<4, 4, kChunkPasses, true, true>(
      kChunk, kChunk, K, kk_at, [=](int x, int j) { return kk_at(j, x); },
      [=](int i, int j, float acc) { KK[i * kPad + j] = acc; }, gs);
  // (6) Y^U = T^T dU (the back substitution with (I + L)^T); dv = beta Y^U, dbeta_i = v_i . Y^U_i + ...
  // T is copied into M1 (free until (8)) by coalesced loads: the tiles read it transposed.
  for (int e = tid; e < kChunk * kChunk; e += kThreads) M1[(e / kChunk) * kPad + e % kChunk] = Tc[e];
  block_gemm<4, 4, kChunkPasses, true>(
      kChunk, V, kChunk, [=](int i, int j) { return M1[j * kPad + i]; },
      [=](int j, int x) { return dUc[size_t(j) * V + x]; }, [=](int i, int x, float acc) { BC[i * P + x] = acc; }, gs);
  for (int e = tid; e < n * V; e += kThreads)
    dv[act_at(d, b, h, t0 + e / V, V) + e % V] = __float2bfloat16(bet[e / V] * BC[(e / V) * P + e % V]);
  for (int i = warp; i < n; i += kThreads / 32) {
    const float acc = warp_sum(0, V, [=](int x) { return bf(vs[i * vp + x]) * BC[i * P + x]; });
    if (lane == 0) dbet[i] += acc;
  }
  // (7) Y^W = T^T dW = -Y^U S0^T (dW = -dU S0^T); dk_i += beta_i e^{gam_i} Y^W_i and its beta and gate terms
  block_gemm<4, 4, kChunkPasses, true, true>(
      kChunk, K, V, [=](int i, int x) { return BC[i * P + x]; }, [=](int x, int r) { return S0[size_t(r) * V + x]; },
      [=](int i, int r, float acc) { BA[i * P + r] = -acc; }, gs);
  for (int i = warp; i < n; i += kThreads / 32) {
    const float acc = warp_sum(0, K, [=](int r) { return kk_at(i, r) * BA[i * P + r]; });
    if (lane == 0) dbet[i] += eg[i] * acc, dgam[i] += bet[i] * eg[i] * acc;
  }
  for (int e = tid; e < kChunk * K; e += kThreads) {
    const int i = e / K, r = e % K;
    BB[i * P + r] += bet[i] * eg[i] * BA[i * P + r];
  }
  // (8) dL = -[Y^U | Y^W] [U0 | W]^T, strictly lower; L_ij = beta_i e^{gam_i - gam_j} k_i . k_j
  block_gemm<4, 4, kChunkPasses, true, true>(
      kChunk, kChunk, V + K, [=](int i, int x) { return x < V ? BC[i * P + x] : BA[i * P + x - V]; },
      [=](int x, int j) { return x < V ? U0c[size_t(j) * V + x] : Wc[size_t(j) * K + x - V]; },
      [=](int i, int j, float acc) { M1[i * kPad + j] = (j < i && i < n) ? -acc : 0.0f; }, gs);
  // Row i, a warp (lanes over j; each lane rescales only the j it read): dbeta_i, and M1 becomes dLt = dL beta_i
  // e^{gam_i - gam_j}.
  for (int i = warp; i < n; i += kThreads / 32) {
    const float e = lane < i ? expf(gam[i] - gam[lane]) : 0.0f;
    const float e2 = lane + 32 < i ? expf(gam[i] - gam[lane + 32]) : 0.0f;
    const float rb = warp_sum(0, i, [=](int j) { return M1[i * kPad + j] * (j < 32 ? e : e2) * KK[i * kPad + j]; });
    for (int j = lane; j < i; j += 32) M1[i * kPad + j] = M1[i * kPad + j] * bet[i] * (j < 32 ? e : e2);
    const float rr = warp_sum(0, i, [=](int j) { return M1[i * kPad + j] * KK[i * kPad + j]; });
    if (lane == 0) dbet[i] += rb, rowR[i] = rr;
  }
  __syncthreads();
  for (int j = warp; j < n; j += kThreads / 32) {  // column j, a warp: dgam_j += sum_i dLt_ji kk_ji - dLt_ij kk_ij
    const float cr = warp_sum(j + 1, n, [=](int i) { return M1[i * kPad + j] * KK[i * kPad + j]; });
    if (lane == 0) dgam[j] += rowR[j] - cr;
  }
  // (9) dk += (dLt + dLt^T) K
  block_gemm<4, 4, kChunkPasses, true>(
      kChunk, K, kChunk, [=](int i, int j) { return M1[i * kPad + j] + M1[j * kPad + i]; }, kk_at,
      [=](int i, int r, float acc) { BB[i * P + r] += acc; }, gs);
  for (int e = tid; e < n * K; e += kThreads) dk[act_at(d, b, h, t0 + e / K, K) + e % K] = __float2bfloat16(BB[(e / K) * P + e % K]);
  // (10) gamma is the in-chunk cumsum of g: dg_t = the sum of dgamma from t on
  if (tid == 0) {
    float acc = 0.0f;
    for (int i = n - 1; i >= 0; --i) dg[gate_at(d, b, h, t0 + i)] = acc += dgam[i];
  }
  if (tid < n) dbeta[gate_at(d, b, h, t0 + tid)] = dbet[tid];
}

}  // namespace

void launch_dUo(const Dims& d, const bf16* q, const bf16* k, const bf16* d_o, const Scratch& s, cudaStream_t st) {
  const size_t smem = size_t(kDUoSmem) * 4;
  allow_smem(dUo_kernel, smem);
  dUo_kernel<<<dim3(d.NC, d.H, d.B), kThreads, smem, st>>>(d, q, k, d_o, s);
  SPB_CUDA_LAUNCH();
}

void launch_states_bwd(const Dims& d, const bf16* q, const bf16* k, const bf16* d_o, const Scratch& s,
                       const float* dht, float* dHs, float* dU, float* dh0, cudaStream_t st) {
  const size_t smem = size_t(states_bwd_smem(d.K)) * 4;
  allow_smem(states_bwd_kernel, smem);
  states_bwd_kernel<<<dim3(d.V / kStateCols, d.H, d.B), kThreads, smem, st>>>(d, q, k, d_o, s, dht, dHs, dU, dh0);
  SPB_CUDA_LAUNCH();
}

void launch_chunk_grads(const Dims& d, const bf16* q, const bf16* k, const bf16* v, const float* beta, const bf16* d_o,
                        const Scratch& s, bf16* dq, bf16* dk, bf16* dv, float* dg, float* dbeta, cudaStream_t st) {
  const size_t smem = size_t(grads_smem(d.K, d.V));  // bytes (the other kernels count floats)
  allow_smem(chunk_grads_kernel, smem);
  chunk_grads_kernel<<<dim3(d.NC, d.H, d.B), kThreads, smem, st>>>(d, q, k, v, beta, d_o, s, dq, dk, dv, dg, dbeta);
  SPB_CUDA_LAUNCH();
}

}  // namespace gdn_cuda
}  // namespace spb
