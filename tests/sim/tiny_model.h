// The tiny GLA language model the simulation's model-level tests record and replay on CPU ranks.
#pragma once

#include "model/gla_model.h"

namespace spb::test {

// hidden 96, key dim 48, value dim 96, 12 heads of dk 4, dv 8; MLP 64, gate rank 16 (the default)
inline GlaModelConfig tiny_model() {
  GlaModelConfig c;
  c.vocab = 64, c.hidden = 96, c.layers = 2, c.heads = 12, c.mlp = 64;
  return c;
}
// Its batch and whole sequence (split evenly over 1 or 2 ranks).
constexpr int kTinyBatch = 2, kTinySeq = 240;

}  // namespace spb::test
