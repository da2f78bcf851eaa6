// The median the benches report: the upper middle element (v[n/2]) of a non-empty sample.
// Header-only: the standalone pair benches link no ringtorch code.
#pragma once

#include <algorithm>
#include <vector>

namespace ringtorch {

inline double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + static_cast<long>(values.size() / 2), values.end());
  return values[values.size() / 2];
}

}  // namespace ringtorch
