// SyncLane: a mesh of plain TCP connections beside a group's Gloo context, read by the thread
// that waits for a message instead of by an event-loop thread. It carries the call fingerprints,
// and with them the small collectives that travel inside them (Note [Call fingerprint] in
// call_fingerprint.h), when the whole group goes over Gloo's TCP transport.
//
// Why: on Gloo's pairs a message is read by Gloo's event-loop thread, which then wakes the
// thread waiting for it; for a small message that hand-over is most of the time between two
// hosts (docs/benchmarks.md, "The synchronous lane"). Here the waiting thread polls the sockets
// itself, sleeping in poll(2) (no busy polling: CPU-only training needs that core).
//
// Why its own sockets: Gloo hides a pair's socket (its header is not even installable from
// Debian's package), and a lane needs one to wait with the call's own deadline. The lane's
// sockets are ringtorch's: bound to the address the group's Gloo pairs use, connected through
// the group's store, non-blocking, with TCP_NODELAY.
//
// An exchange sends this rank's message to every peer and receives every peer's in one poll
// loop that writes what the sockets take and reads what has arrived, so it never waits on a full
// buffer whatever the message size and the kernel's buffer limits.
//
// Failures: a peer whose message has not arrived by the call's deadline is a TimeoutError; one
// that closed its connection, or a socket error, a PeerLostError; both name the peer (as text,
// through what_of, and as FailureSite::peer) and leave the lane unusable.
//
// Thread-safety: one exchange at a time (the process group runs one operation at a time).
// Ownership: owns its sockets; destroying the lane closes them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "runtime/comm/sizes.h"

namespace ringtorch {

class SyncLane {
 public:
  // Connects a lane among the `size` ranks over `store` (scoped for the lane alone), every
  // socket bound to `address` (this rank's address on the group's network, "10.0.0.3"). Lower
  // ranks accept, higher ranks connect. Collective: every rank of the group calls it. Throws
  // TimeoutError when a peer does not connect by `timeout`, IoError for a socket that cannot be
  // made, and what the store throws.
  static std::unique_ptr<SyncLane> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                           const std::string& address, std::chrono::milliseconds timeout);
  ~SyncLane();
  SyncLane(const SyncLane&) = delete;
  SyncLane& operator=(const SyncLane&) = delete;

  // Where the next message is written (kSyncLaneMessageBytes bytes), before exchange().
  char* outgoing() { return outgoing_.data(); }

  // Sends the first `bytes` (<= kSyncLaneMessageBytes) of outgoing() to every peer and receives every
  // peer's message (of its own length, at most kSyncLaneMessageBytes) into incoming(peer), by `deadline`.
  using WhatOf = std::function<std::string(int peer)>;  // called only to word a failure
  void exchange(size_t bytes, std::chrono::steady_clock::time_point deadline, const WhatOf& what_of);

  // The last message received from `peer` (writable; valid until the next exchange).
  char* incoming(int peer);

 private:
  // One peer's side of an exchange: bytes sent (the 4-byte length first) and received.
  struct Progress {
    size_t sent = 0, received = 0;
    uint32_t length = 0;  // the peer's message length, once its first 4 bytes are in
    bool sent_all(uint32_t mine) const { return sent >= sizeof(uint32_t) + mine; }
    bool received_all() const { return received >= sizeof(uint32_t) && received >= sizeof(uint32_t) + length; }
  };

  SyncLane(int rank, int size);
  // Writes (reads) what the peer's non-blocking socket takes (holds) now.
  void send_some(int peer, uint32_t length, Progress& p);
  void receive_some(int peer, Progress& p, const WhatOf& what_of);
  [[noreturn]] void fail(bool timed_out, int peer, const std::string& what);

  const int rank_, size_;
  std::vector<int> sockets_;    // per peer (-1 at this rank's index)
  std::vector<char> outgoing_;  // kSyncLaneMessageBytes
  std::vector<char> incoming_;  // kSyncLaneMessageBytes per peer, peer p's at p (p - 1 past this rank)
  bool failed_ = false;         // a peer was lost or late: the streams are out of step
};

}  // namespace ringtorch
