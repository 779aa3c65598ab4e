// The fp64 token-loop GLA (DESIGN §2): the recurrence itself, one token at a time, the reference every chunked
// stage, every GPU kernel and every SP method is checked against. Slow on purpose: it is plain enough to trust.
#pragma once

#include <vector>

#include "kernels/gla/gla_kernels.h"

namespace spb {

struct GlaReferenceResult {
  std::vector<double> o, ht;                // forward
  std::vector<double> dq, dk, dv, dg, dh0;  // backward (empty when no do was given)
};

// Tensors in the layout of gla_kernels.h, fp32 in; h0 and dht may be empty (zero state / zero gradient);
// d_o empty skips the backward.
GlaReferenceResult gla_reference(const GlaShape& s, const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, const std::vector<float>& g,
                                 const std::vector<float>& h0, const std::vector<float>& d_o,
                                 const std::vector<float>& dht);

}  // namespace spb
