#include "sp/collective.h"

#include <cmath>

#include "runtime/error.h"
#include "sp/inputs.h"
#include "runtime/registry.h"

namespace spb {

bool register_pattern(PatternInfo info) { return Registry<PatternInfo>::add(std::move(info)); }
const PatternInfo* find_pattern(const std::string& name) { return Registry<PatternInfo>::find(name); }
const PatternInfo& require_pattern(const std::string& name) { return Registry<PatternInfo>::require(name, "--pattern"); }
std::vector<std::string> pattern_names() { return Registry<PatternInfo>::names(); }

std::vector<float> pattern_data(int rank, int salt, size_t n) {
  std::vector<float> x(n);
  const uint64_t base = splitmix64(uint64_t(rank) * 1000003u + uint64_t(salt));
  for (size_t i = 0; i < n; ++i) x[i] = float(int64_t(splitmix64(base ^ i) % 2001) - 1000) / 256.f;  // exact in fp32
  return x;
}

std::vector<float> pattern_decay(int rank, int salt, size_t rows) {
  std::vector<float> d = pattern_data(rank, salt + 7919, rows);
  for (float& x : d) x = -std::fabs(x) / 64.f;
  return d;
}

std::vector<float> pattern_dense_transition(int rank, int salt, size_t heads, size_t dk) {
  std::vector<float> a = pattern_data(rank, salt + 104729, heads * dk * dk);  // in [-1000/256, 1000/256]
  // Scaled by a power of two past 4 dk: each row's magnitudes sum to below 1.
  float scale = 1.f;
  while (scale < 4.f * float(dk)) scale *= 2.f;
  for (float& x : a) x /= scale;
  return a;
}

size_t pattern_transition_elems(const CollectiveConfig& c) { return c.map.transition_elems(c.elems / c.cols, c.cols); }

}  // namespace spb
