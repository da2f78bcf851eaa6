// str_cat: builds a message from streamable parts, str_cat("rank ", r, " of ", n).
//
// Strings, characters and integers are appended directly; anything else goes through an
// std::ostringstream, so every part prints as `std::ostream << part` would. Why not one stream
// for all: constructing an ostringstream (its locale and ios state) costs more than the rest of
// a small all-reduce, which formats a description of every call (docs/benchmarks.md, "What a
// small call spent formatting its own description").
//
// Example:
//   const std::string text = ringtorch::str_cat("rank ", 3, " of ", 8, ": ", 0.5, " done");
//   // "rank 3 of 8: 0.5 done"
//
// Thread-safety: a pure function.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace ringtorch {
namespace str_cat_internal {

template <typename T>
void append(std::string& out, const T& part) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, std::string> || std::is_same_v<D, std::string_view> ||
                (std::is_array_v<T> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>)) {
    out.append(part);  // an array of char, as a literal: up to its '\0', as a stream prints it
  } else if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
    if (part != nullptr) out.append(part);  // a stream prints nothing for a null char pointer
  } else if constexpr (std::is_same_v<D, char>) {
    out.push_back(part);
  } else if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool> && !std::is_same_v<D, signed char> &&
                       !std::is_same_v<D, unsigned char>) {
    out.append(std::to_string(part));  // the signed and unsigned chars print as characters on a stream
  } else {
    std::ostringstream stream;
    stream << part;
    out.append(stream.str());
  }
}

}  // namespace str_cat_internal

template <typename... Parts>
std::string str_cat(const Parts&... parts) {
  std::string out;
  (str_cat_internal::append(out, parts), ...);
  return out;
}

}  // namespace ringtorch
