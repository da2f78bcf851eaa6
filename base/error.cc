#include <cstdio>
#include <cstring>

#include <ringtorch/error.h>

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
    case ErrorKind::kMembershipChanged:
      return "membership changed";
  }
  return "unknown";
}

const char* error_class_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTimeout:
      return "TimeoutError";
    case ErrorKind::kPeerLost:
      return "PeerLostError";
    case ErrorKind::kMismatch:
      return "MismatchError";
    case ErrorKind::kInvalidArgument:
      return "InvalidArgumentError";
    case ErrorKind::kIo:
      return "IoError";
    case ErrorKind::kMembershipChanged:
      return "MembershipChangedError";
  }
  return "Error";
}

std::exception_ptr make_error(ErrorKind kind, const std::string& message, FailureSite site) {
  switch (kind) {
    case ErrorKind::kTimeout:
      return std::make_exception_ptr(TimeoutError(message, std::move(site)));
    case ErrorKind::kPeerLost:
      return std::make_exception_ptr(PeerLostError(message, std::move(site)));
    case ErrorKind::kMismatch:
      return std::make_exception_ptr(MismatchError(message, std::move(site)));
    case ErrorKind::kInvalidArgument:
      return std::make_exception_ptr(InvalidArgumentError(message, std::move(site)));
    case ErrorKind::kMembershipChanged:
      return std::make_exception_ptr(MembershipChangedError(message, std::move(site)));
    case ErrorKind::kIo:
      break;
  }
  return std::make_exception_ptr(IoError(message, std::move(site)));
}

namespace {

// strerror_r has two signatures: GNU's returns the message (which may not be in the buffer),
// POSIX's returns 0 and fills the buffer. One overload for each.
[[maybe_unused]] std::string strerror_result(const char* message, const char*) { return message; }
[[maybe_unused]] std::string strerror_result(int rc, const char* buffer) { return rc == 0 ? buffer : "unknown error"; }

}  // namespace

std::string errno_text(int error) {
  char buffer[256] = {};
  return strerror_result(strerror_r(error, buffer, sizeof(buffer)), buffer);
}

std::string format_duration_ms(long long ms) {
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace ringtorch
