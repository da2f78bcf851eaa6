// c10d stores keep values as bytes; ringtorch's keys hold text. The two conversions, in one
// place for the stores and their users (RedisStore, the elastic rendezvous, ringrun).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

inline std::string store_text(const std::vector<uint8_t>& value) { return std::string(value.begin(), value.end()); }
inline std::vector<uint8_t> store_value(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

}  // namespace ringtorch
