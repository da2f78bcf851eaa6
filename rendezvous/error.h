// Error kinds shared by every ringtorch layer (this is the bottom layer, so they live here).
//
// Each kind comes with a rule for the caller (see docs/ARCHITECTURE.md, "Errors"):
//   TimeoutError          the operation may be retried, or the timeout raised
//   PeerLostError         a peer died or stopped: recreate the group / restart the job
//   MismatchError         ranks disagree (shapes, dtypes, operations): fix the program
//   InvalidArgumentError  bad input from the user (URL, flag, variable): fix the input
//   IoError               the environment failed (file, socket, server): fix the environment
//
// Messages start with context, then the cause, then the knob to turn:
//   "[rank 1/2] rendezvous via redis://127.0.0.1:6379 timed out after 5 s waiting for ...;
//    raise RINGTORCH_TIMEOUT"
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ringtorch {

enum class ErrorKind { kTimeout, kPeerLost, kMismatch, kInvalidArgument, kIo };

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& m) : Error(ErrorKind::kTimeout, m) {}
};
class PeerLostError : public Error {
 public:
  explicit PeerLostError(const std::string& m) : Error(ErrorKind::kPeerLost, m) {}
};
class MismatchError : public Error {
 public:
  explicit MismatchError(const std::string& m) : Error(ErrorKind::kMismatch, m) {}
};
class InvalidArgumentError : public Error {
 public:
  explicit InvalidArgumentError(const std::string& m) : Error(ErrorKind::kInvalidArgument, m) {}
};
class IoError : public Error {
 public:
  explicit IoError(const std::string& m) : Error(ErrorKind::kIo, m) {}
};

// Builds a message from streamable parts: str_cat("rank ", r, " of ", n).
template <typename... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Formats a duration in milliseconds the way people read it: "250 ms", "5 s", "1.5 s".
std::string format_duration_ms(long long ms);

}  // namespace ringtorch
