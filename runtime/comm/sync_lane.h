// SyncLane: a second Gloo full mesh beside a group's context, whose pairs run in Gloo's
// synchronous mode. It carries the call fingerprints, and with them the small collectives that
// travel inside them (Note [Call fingerprint] in call_fingerprint.h), when the whole group goes
// over Gloo's TCP transport.
//
// Why: on an ordinary pair, Gloo's event-loop thread reads every message and then wakes the
// thread that waits for it. A 4-byte exchange between two processes measured 60-65 us that way
// on loopback, against 10-22 us when the waiting thread reads the socket itself
// (bench/gloo_pair_modes_bench; docs/benchmarks.md, "Gloo's synchronous pairs"). A pair in
// synchronous mode leaves the event loop and carries bound buffers only, so the lane is a mesh
// of its own, with one receive buffer per peer and one send memory, all on kSyncLaneSlot.
//
// No busy polling: a waiting rank sleeps in poll(2), because a CPU-only training needs the core
// a spinning rank would take. Deadlines: Gloo's blocking reads give up only after the group's
// timeout (SO_RCVTIMEO, set when a pair connects), so the lane first waits with poll(2) until
// the call's own deadline and lets Gloo read only once the message has started to arrive. Gloo
// does not hand out a pair's socket, so the lane finds it among the process' descriptors by its
// two addresses; where it cannot, the group goes without the lane. A call's own deadline bounds
// the wait for a peer's message to start; a message that has started, and a write, are bounded
// by the group's timeout (Gloo's socket timeouts), which they reach only when a peer stops
// mid-message.
//
// Why a message must fit the sockets' buffers: every rank writes its message to every peer
// before it reads theirs, with blocking writes, so one message has to fit where a peer that is
// itself still writing leaves it: this rank's send buffer (Gloo sizes SO_SNDBUF to the largest
// message a pair has sent, up to net.core.wmem_max) and the peer's receive buffer (which the
// lane sets, up to net.core.rmem_max). connect() measures both; where the group's smallest cannot
// hold a message of kCapacity with room for the kernel's per-packet overhead (machines whose
// net.core.wmem_max / rmem_max are below Linux's defaults), the group goes without the lane. Sending a message in
// several steps instead measured 1.4-1.6x slower at 256 KiB than one write.
//
// Thread-safety: one exchange at a time (the process group runs one operation at a time).
// Ownership: owns its Gloo context, and so its sockets; destroying the lane closes them.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace ringtorch {

class SyncLane {
 public:
  // The largest message one rank sends each peer per exchange.
  static constexpr size_t kCapacity = (size_t{256} << 10) + 128;

  // Whether `device` can carry a lane (Gloo's TCP transport; not ibverbs).
  static bool supports(const gloo::transport::Device& device);

  // Connects the lane's mesh over `store` (scoped for the lane alone), switches every pair to
  // synchronous mode, registers the receive buffers and finds each pair's socket (the ranks
  // publish their pairs' addresses in `store`). Collective: every rank of the group must call
  // it, and no rank may send on the lane before every rank has returned (the caller's next step
  // is a barrier). Throws what Gloo's connectFullMesh and the store throw.
  static std::unique_ptr<SyncLane> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                           std::shared_ptr<gloo::transport::Device> device,
                                           std::chrono::milliseconds timeout);
  ~SyncLane();
  SyncLane(const SyncLane&) = delete;
  SyncLane& operator=(const SyncLane&) = delete;

  // This rank's smallest send and receive buffer among its lane's sockets, as they will be for a
  // full message (0 where a pair's socket was not found), and whether buffers of those sizes at
  // both ends of a pair hold a message of kCapacity that no one reads yet (the class comment).
  // The ranks agree on the group's smallest before using the lane.
  size_t send_buffer_bytes() const { return send_buffer_bytes_; }
  size_t receive_buffer_bytes() const { return receive_buffer_bytes_; }
  static bool holds_a_message(size_t send_buffer_bytes, size_t receive_buffer_bytes);

  // Where the next message is written (kCapacity bytes), before exchange().
  char* outgoing() { return outgoing_.data(); }

  // Sends the first `bytes` (<= kCapacity) of outgoing() to every peer and receives every
  // peer's message (of its own length, at most kCapacity) into incoming(peer), by `deadline`. Throws TimeoutError
  // or PeerLostError with FailureSite{rank, peer} naming the first peer it could not write to or
  // hear from, its text naming what_of(peer). The lane is unusable after a failure.
  using WhatOf = std::function<std::string(int peer)>;  // called only to word a failure
  void exchange(size_t bytes, std::chrono::steady_clock::time_point deadline, const WhatOf& what_of);

  // The last message received from `peer` (writable; valid until the next exchange).
  char* incoming(int peer);

 private:
  SyncLane(int rank, int size) : rank_(rank), size_(size) {}
  // Waits with poll(2) until `peer`'s message starts to arrive, then lets Gloo read it.
  void receive(int peer, std::chrono::steady_clock::time_point deadline, const WhatOf& what_of);

  // Gloo's exception `failure`, its text followed by " (<doing>)", or the lane's own Error, as
  // ringtorch's Error naming `peer`; the lane is unusable afterwards (Gloo may have closed that
  // pair).
  [[noreturn]] void fail(const std::exception& failure, int peer, const std::string& doing);

  const int rank_, size_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::vector<char> outgoing_;  // kCapacity
  std::vector<char> incoming_;  // kCapacity per peer, peer p's at p (p - 1 past this rank)
  // Per peer (null at this rank's index). Declared after context_: destroyed before it.
  std::vector<std::unique_ptr<gloo::transport::Buffer>> send_, receive_;
  std::vector<int> sockets_;  // per peer: its pair's socket, for poll(2)
  size_t send_buffer_bytes_ = 0, receive_buffer_bytes_ = 0;
  bool failed_ = false;  // a send or receive failed: Gloo may have closed that pair
};

}  // namespace ringtorch
