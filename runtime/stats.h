// Summary statistics of repeated timings, and the error measure every check uses.
#pragma once

#include <cstddef>
#include <vector>

namespace spb {

struct Summary {
  double mean = 0, median = 0, min = 0, max = 0, cv = 0;  // cv = stddev / mean
};
Summary summarize(std::vector<double> x);

// RMS(ref - x) / RMS(ref); NaN anywhere in x gives +inf (a NaN never passes); ref all zero gives RMS(x).
template <class A, class B>
double rel_rms_error(const A& ref, const B& x, size_t n);

}  // namespace spb

#include <cmath>
#include <limits>

namespace spb {
template <class A, class B>
double rel_rms_error(const A& ref, const B& x, size_t n) {
  double num = 0, den = 0;
  long long non_finite = 0;
#pragma omp parallel for reduction(+ : num, den, non_finite) schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const double r = double(ref[i]), v = double(x[i]);
    non_finite += !std::isfinite(v);
    num += (r - v) * (r - v);
    den += r * r;
  }
  if (non_finite) return std::numeric_limits<double>::infinity();
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num / double(std::max<size_t>(n, 1)));
}
}  // namespace spb
