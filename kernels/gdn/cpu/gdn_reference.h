// The fp64 token-loop Gated DeltaNet (DESIGN §12): the gated delta rule itself, one token at a time, in fla's
// convention, the reference GDN's chunked stages, its GPU kernels and its SP methods are to be checked against.
// Per (b, h), with S the dk x dv state, g_t a scalar log gate, beta_t in (0, 1) and scale s = dk^-1/2:
//
//     S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,      o_t = s S_t^T q_t
//
// k is taken as given (the model L2-normalises it before). Slow on purpose: plain enough to trust.
#pragma once

#include <cstddef>
#include <vector>

namespace spb {

// The tensors, row-major as GLA's (kernels/gla/gla_kernels.h): q, k [B, T, H, dk]; v, o [B, T, H, dv]; g, beta
// [B, T, H] (one gate and one beta per token and head); states h0, ht, dht, dh0 [B, H, dk, dv].
struct GdnShape {
  int B = 1, T = 1, H = 1, dk = 1, dv = 1;
  size_t qk_elems() const { return size_t(B) * T * H * dk; }
  size_t v_elems() const { return size_t(B) * T * H * dv; }
  size_t gate_elems() const { return size_t(B) * T * H; }
  size_t state_elems() const { return size_t(B) * H * dk * dv; }
  size_t transition_elems() const { return size_t(B) * H * dk * dk; }
};

struct GdnReferenceResult {
  std::vector<double> o, ht;                          // forward
  std::vector<double> dq, dk, dv, dg, dbeta, dh0;     // backward (empty when no do was given)
};

// h0 and dht may be empty (a zero state / a zero final gradient); d_o empty skips the backward.
GdnReferenceResult gdn_reference(const GdnShape& s, const std::vector<double>& q, const std::vector<double>& k,
                                 const std::vector<double>& v, const std::vector<double>& g,
                                 const std::vector<double>& beta, const std::vector<double>& h0,
                                 const std::vector<double>& d_o, const std::vector<double>& dht);

// A rank's tokens as one affine map of the state they start from (DESIGN §12): S_T = A S_0 + M, with
// A = F_T ... F_1, F_t = exp(g_t) (I - beta_t k_t k_t^T) (dk x dk per head: [B, H, dk, dk]) and M the final state
// from a zero start ([B, H, dk, dv]). A's columns mix a state's rows, never its columns.
struct GdnRankMap {
  std::vector<double> A, M;
};
GdnRankMap gdn_reference_rank_map(const GdnShape& s, const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<double>& g, const std::vector<double>& beta);

}  // namespace spb
