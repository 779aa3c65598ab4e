// Gated DeltaNet's chunked forward on the CPU, fp32 (DESIGN §12): the WY form, chunks of kGdnChunk tokens. Inside a
// chunk that starts from the state S_0, with gamma_t the in-chunk cumsum of the log gates and the written values
// u_t = beta_t (v_t - exp(g_t) S_{t-1}^T k_t), the recurrence unrolls to
//
//     (I + L) U = diag(beta) V - diag(beta exp(gamma)) K S_0,     L_ts = beta_t exp(gamma_t - gamma_s) k_t . k_s  (s < t)
//     o_t = s (exp(gamma_t) S_0^T q_t + sum_{s <= t} exp(gamma_t - gamma_s) (q_t . k_s) u_s)
//     S_C = exp(gamma_C) S_0 + sum_s exp(gamma_C - gamma_s) k_s u_s^T
//
// so that with T = (I + L)^-1 (a forward substitution), U = T (beta V) - W S_0 and W = T (beta exp(gamma) K): each
// chunk is products and one triangular solve, and only S moves from chunk to chunk. Every exponent is "later minus
// earlier" of a cumsum of non-positive gates. Checked against the fp64 token loop (kernels/gdn/cpu/gdn_reference.h).
#pragma once

#include <vector>

#include "kernels/gdn/cpu/gdn_reference.h"

namespace spb {

constexpr int kGdnChunk = 64;

struct GdnForward {
  std::vector<float> o, ht;
};

// The layout of gdn_reference.h, fp32; h0 empty: a zero state. A last chunk shorter than kGdnChunk is allowed.
GdnForward gdn_chunked_forward(const GdnShape& s, const std::vector<float>& q, const std::vector<float>& k,
                               const std::vector<float>& v, const std::vector<float>& g,
                               const std::vector<float>& beta, const std::vector<float>& h0);

struct GdnBackward {
  std::vector<float> dq, dk, dv, dg, dbeta, dh0;
};
// The backward of gdn_chunked_forward (d_o the output's gradient, dht the final state's; either may be empty: zero):
// the chunk states again from h0, then the chunks in reverse, each back through its output, its state handed on, the
// written values U = T (beta V) - W S_0 and the solve T = (I + L)^-1 (its adjoint a back substitution with
// (I + L)^T), and the in-chunk cumsum of the gates.
GdnBackward gdn_chunked_backward(const GdnShape& s, const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, const std::vector<float>& g,
                                 const std::vector<float>& beta, const std::vector<float>& h0,
                                 const std::vector<float>& d_o, const std::vector<float>& dht);

// A rank's tokens as one map of its initial state, S_T = A S_0 + M (DESIGN §12), chunk by chunk: each chunk's
// transition is exp(gamma_C) I - (K * exp(gamma_C - gamma))^T W (dk x dk, W as above from the chunk's keys alone), the
// rank's A their product in order, and M the forward's final state from a zero start (fp32 [B, H, dk, dk] and
// [B, H, dk, dv]; M left empty where v is).
struct GdnMap {
  std::vector<float> A, M;
};
GdnMap gdn_chunked_rank_map(const GdnShape& s, const std::vector<float>& k, const std::vector<float>& v,
                            const std::vector<float>& g, const std::vector<float>& beta);

}  // namespace spb
