#include "harness/collective.h"

#include <cmath>
#include <map>

#include "harness/error.h"

namespace spb {

namespace {
std::map<std::string, PatternInfo>& patterns() {
  static std::map<std::string, PatternInfo> r;
  return r;
}
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

bool register_pattern(PatternInfo info) {
  SPB_CHECK(!patterns().count(info.name), "pattern registered twice: " + info.name);
  patterns()[info.name] = std::move(info);
  return true;
}
const PatternInfo* find_pattern(const std::string& name) {
  auto it = patterns().find(name);
  return it == patterns().end() ? nullptr : &it->second;
}
std::vector<std::string> pattern_names() {
  std::vector<std::string> n;
  for (auto& [k, _] : patterns()) n.push_back(k);
  return n;
}

std::vector<float> pattern_data(int rank, int salt, size_t n) {
  std::vector<float> x(n);
  const uint64_t base = mix(uint64_t(rank) * 1000003u + uint64_t(salt));
  for (size_t i = 0; i < n; ++i) x[i] = float(int64_t(mix(base ^ i) % 2001) - 1000) / 256.f;  // exact in fp32
  return x;
}

std::vector<float> pattern_decay(int rank, int salt, size_t rows) {
  std::vector<float> d = pattern_data(rank, salt + 7919, rows);
  for (float& x : d) x = -std::fabs(x) / 64.f;
  return d;
}

}  // namespace spb
