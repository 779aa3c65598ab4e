// The model's dense products on cuBLASLt, each shape's algorithm chosen by timing: the first call of a shape asks
// cuBLASLt's heuristic for its best few algorithms, runs each on the call's own operands and keeps the fastest for
// every later call of that shape (a training step repeats the same few shapes, so the choice is made in the first
// warm-up step). cublasGemmEx takes the heuristic's first choice, which at some of GLA-1B's shapes is not the fastest.
// SPB_GEMM_TUNE=0 keeps the heuristic's first choice (to compare).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <tuple>

namespace spb {

class TunedGemm {
 public:
  TunedGemm();
  ~TunedGemm();
  TunedGemm(const TunedGemm&) = delete;
  TunedGemm& operator=(const TunedGemm&) = delete;

  // Row-major C [M, N] = alpha op(A) op(B) + beta C: A, B bf16 (A stored [K, M] where trans_a, B stored [N, K] where
  // trans_b), C bf16 or fp32 (c_fp32), fp32 accumulation; on `stream`, with `workspace` of `workspace_bytes`.
  // Calls with beta != 0 are not timed (a timing run would add into C again): they take the heuristic's first choice.
  void run(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B, float beta,
           void* C, bool c_fp32, cudaStream_t stream, void* workspace, size_t workspace_bytes);

 private:
  struct Plan;
  // trans_a, trans_b, M, N, K, c_fp32, beta != 0, and the alignments (bytes, at most 256) of A, B and C
  using Key = std::tuple<bool, bool, int, int, int, bool, bool, int, int, int>;
  Plan& plan(const Key& k, const void* A, const void* B, void* C, cudaStream_t stream, void* workspace,
             size_t workspace_bytes);

  cublasLtHandle_t lt_ = nullptr;
  bool tune_;
  std::map<Key, Plan*> plans_;
};

}  // namespace spb
