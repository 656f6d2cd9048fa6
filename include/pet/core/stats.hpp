// Small statistics over timings.
#pragma once

#include <algorithm>
#include <vector>

namespace pet {

/// The median of sorted values (0 when there are none).
inline double median_of_sorted(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

/// The median of values in any order.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return median_of_sorted(v);
}

}  // namespace pet
