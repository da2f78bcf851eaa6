// str_cat: builds a message from streamable parts, str_cat("rank ", r, " of ", n).
#pragma once

#include <sstream>
#include <string>

namespace ringtorch {

template <typename... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace ringtorch
