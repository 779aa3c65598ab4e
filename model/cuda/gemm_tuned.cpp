#include "model/cuda/gemm_tuned.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/error.h"

#define SPB_CUBLAS(call)                                                                      \
  do {                                                                                        \
    cublasStatus_t s_ = (call);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::spb::fail(__FILE__, __LINE__, std::string(#call) + ": " + cublasGetStatusString(s_)); \
  } while (0)

namespace spb {

namespace {
constexpr int kCandidates = 8;  // the heuristic's best algorithms that the first call of a shape times
constexpr int kTimedRuns = 3;   // per candidate, after one untimed run

// The largest power of two up to 256 that divides the address: cuBLASLt's heuristic assumes 256 unless told.
int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int b = 1;
  while (b < 256 && a % (2 * b) == 0) b *= 2;
  return b;
}
}  // namespace

// Row-major C [M, N] is column-major C^T [N, M] (ld N), and C^T = op(B)^T op(A)^T: cuBLASLt multiplies B first. B
// stored row-major [K, N] (trans_b false) is column-major [N, K] = op(B)^T itself (OP_N, ld N); stored [N, K] it is
// column-major [K, N], transposed by cuBLASLt (OP_T, ld K). Likewise A: [M, K] is op(A)^T (OP_N, ld K), [K, M] is
// op(A) (OP_T, ld M).
struct TunedGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

TunedGemm::TunedGemm() {
  SPB_CUBLAS(cublasLtCreate(&lt_));
  const char* t = std::getenv("SPB_GEMM_TUNE");
  tune_ = !(t && std::string(t) == "0");
}

TunedGemm::~TunedGemm() {
  for (auto& kp : plans_) delete kp.second;
  cublasLtDestroy(lt_);
}

TunedGemm::Plan& TunedGemm::plan(const Key& key, const void* A, const void* B, void* C, cudaStream_t stream,
                                 void* workspace, size_t workspace_bytes) {
  Plan*& slot = plans_[key];
  if (slot) return *slot;
  const auto [trans_a, trans_b, M, N, K, c_fp32, accumulate, align_a, align_b, align_c] = key;
  auto p = std::make_unique<Plan>();
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  SPB_CUBLAS(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  SPB_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b));
  SPB_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a));
  // cuBLASLt's A is our B: stored [N, K] (ld N) or [K, N] (ld K) column-major; its B is our A.
  SPB_CUBLAS(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, trans_b ? K : N, trans_b ? N : K, trans_b ? K : N));
  SPB_CUBLAS(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, trans_a ? M : K, trans_a ? K : M, trans_a ? M : K));
  SPB_CUBLAS(cublasLtMatrixLayoutCreate(&p->c, c_fp32 ? CUDA_R_32F : CUDA_R_16BF, N, M, N));

  cublasLtMatmulPreference_t pref = nullptr;
  SPB_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  SPB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                  sizeof workspace_bytes));
  const uint32_t align[4] = {uint32_t(align_b), uint32_t(align_a), uint32_t(align_c), uint32_t(align_c)};  // its A, B
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    SPB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof align[i]));
  std::vector<cublasLtMatmulHeuristicResult_t> found(kCandidates);
  int n = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt_, p->op, p->a, p->b, p->c, p->c, pref, kCandidates,
                                                           found.data(), &n);
  cublasLtMatmulPreferenceDestroy(pref);
  SPB_CHECK(hs == CUBLAS_STATUS_SUCCESS && n > 0,
            "cuBLASLt has no algorithm for a bf16 product of M " + std::to_string(M) + ", N " + std::to_string(N) +
                ", K " + std::to_string(K) + ": " + cublasGetStatusString(hs));
  p->algo = found[0].algo;

  if (tune_ && !accumulate && n > 1) {
    // Every candidate on the call's own operands (C is overwritten: beta is 0), the fastest median kept.
    cudaEvent_t t0, t1;
    SPB_CUDA(cudaEventCreate(&t0));
    SPB_CUDA(cudaEventCreate(&t1));
    const float one = 1.f, zero = 0.f;
    float best = 0.f;
    for (int i = 0; i < n; ++i) {
      if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
      auto launch = [&] {
        return cublasLtMatmul(lt_, p->op, &one, B, p->a, A, p->b, &zero, C, p->c, C, p->c, &found[i].algo, workspace,
                              workspace_bytes, stream);
      };
      if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // an algorithm the heuristic offers but cannot run here
      std::vector<float> ms(kTimedRuns);
      for (float& m : ms) {
        SPB_CUDA(cudaEventRecord(t0, stream));
        SPB_CUBLAS(launch());
        SPB_CUDA(cudaEventRecord(t1, stream));
        SPB_CUDA(cudaEventSynchronize(t1));
        SPB_CUDA(cudaEventElapsedTime(&m, t0, t1));
      }
      std::sort(ms.begin(), ms.end());
      if (best == 0.f || ms[kTimedRuns / 2] < best) best = ms[kTimedRuns / 2], p->algo = found[i].algo;
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
  }
  slot = p.release();
  return *slot;
}

void TunedGemm::run(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B,
                    float beta, void* C, bool c_fp32, cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  const Key key{trans_a, trans_b, M, N, K, c_fp32, beta != 0.f, alignment(A), alignment(B), alignment(C)};
  const Plan& p = plan(key, A, B, C, stream, workspace, workspace_bytes);
  SPB_CUBLAS(cublasLtMatmul(lt_, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace,
                            workspace_bytes, stream));
}

}  // namespace spb
