#include "runtime/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace spb {

Summary summarize(std::vector<double> x) {
  Summary s;
  if (x.empty()) return s;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  s.min = x.front(), s.max = x.back();
  s.median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  s.mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double var = 0;
  for (double v : x) var += (v - s.mean) * (v - s.mean);
  s.cv = n > 1 && s.mean > 0 ? std::sqrt(var / (n - 1)) / s.mean : 0;
  return s;
}

}  // namespace spb
