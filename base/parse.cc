#include "base/parse.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <ringtorch/error.h>

namespace ringtorch {

int parse_int_in_range(const std::string& text, long long min, long long max, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    throw InvalidArgumentError(str_cat(what, ": '", text, "' is not an integer"));
  }
  if (v < min || v > max) {
    throw InvalidArgumentError(str_cat(what, ": ", v, " is outside [", min, ", ", max, "]"));
  }
  return static_cast<int>(v);
}

double parse_number(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) {
    throw InvalidArgumentError(str_cat(what, ": '", text, "' is not a number"));
  }
  return v;
}

double parse_number_in_range(const std::string& text, double min, double max, const std::string& what) {
  const double v = parse_number(text, what);
  if (v < min || v > max) throw InvalidArgumentError(str_cat(what, ": ", text, " is outside [", min, ", ", max, "]"));
  return v;
}

std::chrono::milliseconds parse_seconds(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(seconds)) {
    throw InvalidArgumentError(str_cat(what, ": '", text, "' is not a number of seconds"));
  }
  if (seconds <= 0) throw InvalidArgumentError(str_cat(what, ": ", text, " must be positive (seconds)"));
  // Bounded so that every deadline (now + timeout, in nanoseconds) stays far from overflowing.
  if (seconds > kMaxTimeoutSeconds) {
    throw InvalidArgumentError(str_cat(what, ": ", text, " seconds is more than the longest timeout, ",
                                       static_cast<long long>(kMaxTimeoutSeconds), " (30 days)"));
  }
  if (seconds < 0.001) throw InvalidArgumentError(str_cat(what, ": ", text, " seconds is below 1 ms"));
  return std::chrono::milliseconds(static_cast<long long>(std::llround(seconds * 1000.0)));
}

int64_t parse_byte_size(const std::string& text, const std::string& what) {
  if (text.empty()) throw InvalidArgumentError(what + ": empty");
  int64_t scale = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      scale = int64_t{1} << 10;
      digits.pop_back();
      break;
    case 'M':
    case 'm':
      scale = int64_t{1} << 20;
      digits.pop_back();
      break;
    case 'G':
    case 'g':
      scale = int64_t{1} << 30;
      digits.pop_back();
      break;
  }
  return static_cast<int64_t>(parse_int_in_range(digits, 0, 1 << 30, what)) * scale;
}

}  // namespace ringtorch
