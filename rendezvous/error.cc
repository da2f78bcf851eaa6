#include "rendezvous/error.h"

#include <cstdio>

namespace ringtorch {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kPeerLost:
      return "peer lost";
    case ErrorKind::kMismatch:
      return "mismatch";
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kIo:
      return "I/O";
  }
  return "unknown";
}

std::string format_duration_ms(long long ms) {
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace ringtorch
