// The inputs of one problem on the host, in fp32, for the whole sequence: generated from a seed (every rank draws the
// same numbers, element by element, so any slice can be drawn alone) or read from .npy files. GLA's gates are
// [B, T, H, dk]; Gated DeltaNet's are [B, T, H], beside its betas [B, T, H] and keys L2-normalised per token and head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gla/gla_kernels.h"
#include "sp/method.h"

namespace spb {

struct HostTensors {
  Attention attention = Attention::gla;
  std::vector<float> q, k, v, g, d_o;  // [B, T, H, D] (Gated DeltaNet's g: [B, T, H])
  std::vector<float> beta;             // Gated DeltaNet: [B, T, H]; empty for GLA
  std::vector<float> h0, dht;          // [B, H, dk, dv]; empty: zero state / zero gradient
  bool do_generated = false;           // no do.npy was given, so do was drawn from the seed
};

// The elements of one token's gates: H * dk (GLA), H (Gated DeltaNet).
size_t gate_row(const GlaShape& s, Attention a);

enum class GateKind { model, strong };  // logsigmoid(randn) / 16 (GLA's), or logsigmoid(randn)

// A 64-bit mixing function (splitmix64's finaliser): the counter-based random numbers of the inputs and test data.
uint64_t splitmix64(uint64_t x);

// Gated DeltaNet (a): the same q, v, do and states; k L2-normalised, one gate per token and head, beta =
// sigmoid(randn).
HostTensors generate_inputs(const GlaShape& s, uint64_t seed, GateKind gates, bool with_h0, bool with_dht,
                            Attention a = Attention::gla);

// The shape of a problem stored in `dir` (q.npy and v.npy); throws UsageError naming the file.
GlaShape npy_problem_shape(const std::string& dir);
// q, k, v, g (and beta for Gated DeltaNet; required), do, h0, dht (optional) from `dir`, checked against `s`. do is
// drawn from the seed if absent.
HostTensors read_inputs(const std::string& dir, const GlaShape& s, uint64_t seed, Attention a = Attention::gla);

// Tokens [t0, t1) of a [B, T, H, D] tensor (row = H*D elements per token).
std::vector<float> slice_tokens(const std::vector<float>& x, int B, int T, size_t row, int t0, int t1);

}  // namespace spb
