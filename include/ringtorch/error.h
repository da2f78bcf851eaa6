// Error kinds shared by every ringtorch layer (base/ is below all of them).
//
// Each kind comes with a rule for the caller (README.md, "Errors"):
//   TimeoutError          something did not answer in time: raise the timeout, or look at the
//                         rank it names. A store wait may be retried; a collective that timed
//                         out leaves its group broken (recreate it).
//   PeerLostError         a peer died or its connection broke: recreate the group / restart the job
//   MismatchError         ranks disagree (shapes, dtypes, operations): fix the program; the group
//                         stays usable
//   InvalidArgumentError  bad input from the user (URL, flag, variable, tensor): fix the input
//   IoError               the environment failed (file, socket, server): fix the environment
//   MembershipChangedError the job's nodes changed under this process (one joined or left, or
//                         the job it waited to join ended): nothing is wrong; join the next
//                         generation (or stop) and create a new group
//
// Messages start with context, then the cause, then the knob to turn:
//   "[rank 1/2] rendezvous via redis://127.0.0.1:6379 timed out after 5 s waiting for ...;
//    raise RINGTORCH_TIMEOUT"
// Code that reacts to a failure reads kind() and site(), never the message: the text is for
// people and may be reworded.
//
// Thread-safety: immutable once thrown.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include <ringtorch/str_cat.h>

namespace ringtorch {

enum class ErrorKind { kTimeout, kPeerLost, kMismatch, kInvalidArgument, kIo, kMembershipChanged };

const char* error_kind_name(ErrorKind kind);   // "timeout", "peer lost", ...
const char* error_class_name(ErrorKind kind);  // "TimeoutError", "PeerLostError", ...

// Where a failure of a distributed operation happened, as fields (the message says the same
// in words). Errors outside a group leave the defaults.
struct FailureSite {
  int rank = -1;          // this process's rank in the group; -1: not a group operation
  int peer = -1;          // the rank blamed (died, stopped, disagreed, did not answer); -1: unknown
  std::string operation;  // "allreduce #17 (group default, 4.0 MiB float32 sum, direct)"; empty: none
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, FailureSite site = {})
      : std::runtime_error(message), kind_(kind), site_(std::move(site)) {}
  ErrorKind kind() const noexcept { return kind_; }
  const FailureSite& site() const noexcept { return site_; }

 private:
  ErrorKind kind_;
  FailureSite site_;
};

class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& m, FailureSite site = {}) : Error(ErrorKind::kTimeout, m, std::move(site)) {}
};
class PeerLostError : public Error {
 public:
  explicit PeerLostError(const std::string& m, FailureSite site = {})
      : Error(ErrorKind::kPeerLost, m, std::move(site)) {}
};
class MismatchError : public Error {
 public:
  explicit MismatchError(const std::string& m, FailureSite site = {})
      : Error(ErrorKind::kMismatch, m, std::move(site)) {}
};
class InvalidArgumentError : public Error {
 public:
  explicit InvalidArgumentError(const std::string& m, FailureSite site = {})
      : Error(ErrorKind::kInvalidArgument, m, std::move(site)) {}
};
class IoError : public Error {
 public:
  explicit IoError(const std::string& m, FailureSite site = {}) : Error(ErrorKind::kIo, m, std::move(site)) {}
};
class MembershipChangedError : public Error {
 public:
  explicit MembershipChangedError(const std::string& m, FailureSite site = {})
      : Error(ErrorKind::kMembershipChanged, m, std::move(site)) {}
};

// An exception of the class that belongs to `kind` (TimeoutError for kTimeout, ...), for code
// that re-raises a failure with more context without losing its type.
std::exception_ptr make_error(ErrorKind kind, const std::string& message, FailureSite site = {});

// strerror(error), but thread-safe (strerror may share one buffer between threads).
std::string errno_text(int error);

// Formats a duration in milliseconds the way people read it: "250 ms", "5 s", "1.5 s".
std::string format_duration_ms(long long ms);

}  // namespace ringtorch
