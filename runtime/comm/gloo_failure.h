// The one place where the text of Gloo's exceptions is read.
//
// Gloo throws gloo::IoException both when a peer closes its connection and when an operation
// runs past its timeout, and tells them apart only in words; it names the peer, when it knows
// it, only as an address inside those words. Everything else in ringtorch reads the result of
// this function (an ErrorKind and an address), never the text. tests/runtime/comm_tables_test.cc
// (GlooFailure) holds one case per message shape of the Gloo that ringtorch links.
//
// Thread-safety: pure functions (wait_for_receive blocks on its own buffer only).
#pragma once

#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <string>

#include <ringtorch/error.h>

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

// Waits until `buffer`'s receive from `peer` completes or `deadline` passes (at least 1 ms). A
// Gloo failure becomes a TimeoutError or PeerLostError with FailureSite{rank, peer}, its text
// followed by " (waiting for <what>)", e.g. what = "peer rank 1's data".
void wait_for_receive(gloo::transport::UnboundBuffer& buffer, int rank, int peer,
                      std::chrono::steady_clock::time_point deadline, const std::string& what);

// The time left until `deadline`, at least 1 ms (Gloo treats 0 as "no timeout").
std::chrono::milliseconds time_left(std::chrono::steady_clock::time_point deadline);

}  // namespace ringtorch
