// The one place where the text of Gloo's exceptions is read.
//
// Gloo throws gloo::IoException both when a peer closes its connection and when an operation
// runs past its timeout, and tells them apart only in words; it names the peer, when it knows
// it, only as an address inside those words. Everything else in ringtorch reads the result of
// this function (an ErrorKind and an address), never the text. tests/runtime/gloo_failure_test.cc
// holds one case per message shape of the Gloo that ringtorch links.
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "base/error.h"

namespace ringtorch {

struct GlooFailure {
  ErrorKind kind = ErrorKind::kPeerLost;  // kTimeout or kPeerLost
  std::string peer_address;               // "[10.0.0.3]:41873" when the text names one, else empty
};

// Gloo's shapes (after its "[file:line] " prefix):
//   "Timed out waiting 3000ms for recv operation to complete"         timeout
//   "Read timeout [ADDR]", "Write timeout [ADDR]", "Connect timeout [ADDR]",
//   "Application timeout caused pair closure"                          timeout
//   "Read error [ADDR]: Connection reset by peer", "Connection closed by peer [ADDR]",
//   "Socket closed [ADDR]", "writev [ADDR]: Broken pipe", anything else  peer lost
// where ADDR is "[host]:port" (IPv4 or IPv6 in the brackets).
GlooFailure read_gloo_failure(const std::string& text);

}  // namespace ringtorch
