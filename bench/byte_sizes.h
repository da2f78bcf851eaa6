// The --sizes list of the standalone pair benches (tcp_exchange_bench, gloo_pair_modes_bench):
// "4,32768,1048576", byte counts separated by commas. Header-only: those benches link no
// ringtorch code.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace ringtorch {

// The byte counts in `text`, each from 1 to `max_bytes`; empty when an item is empty, not a
// number, 0 or larger than `max_bytes` (the caller names the flag in its error).
inline std::vector<size_t> parse_byte_sizes(const std::string& text, size_t max_bytes) {
  std::vector<size_t> sizes;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v == 0 || v > max_bytes) return {};
    sizes.push_back(static_cast<size_t>(v));
    start = comma + 1;
  }
  return sizes;
}

}  // namespace ringtorch
