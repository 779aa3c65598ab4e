// The inputs of one GLA problem on the host, in fp32, for the whole sequence: generated from a seed (every rank draws
// the same numbers, element by element, so any slice can be drawn alone) or read from .npy files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gla/gla_kernels.h"

namespace spb {

struct HostTensors {
  std::vector<float> q, k, v, g, d_o;  // [B, T, H, D]
  std::vector<float> h0, dht;          // [B, H, dk, dv]; empty: zero state / zero gradient
  bool do_generated = false;           // no do.npy was given, so do was drawn from the seed
};

enum class GateKind { model, strong };  // logsigmoid(randn) / 16 (GLA's), or logsigmoid(randn)

// A 64-bit mixing function (splitmix64's finaliser): the counter-based random numbers of the inputs and test data.
uint64_t splitmix64(uint64_t x);

HostTensors generate_inputs(const GlaShape& s, uint64_t seed, GateKind gates, bool with_h0, bool with_dht);

// The shape of a problem stored in `dir` (q.npy and v.npy); throws UsageError naming the file.
GlaShape npy_problem_shape(const std::string& dir);
// q, k, v, g (required), do, h0, dht (optional) from `dir`, checked against `s`. do is drawn from the seed if absent.
HostTensors read_inputs(const std::string& dir, const GlaShape& s, uint64_t seed);

// Tokens [t0, t1) of a [B, T, H, D] tensor (row = H*D elements per token).
std::vector<float> slice_tokens(const std::vector<float>& x, int B, int T, size_t row, int t0, int t1);

}  // namespace spb
