// Note [Call fingerprint]
//
// Every collective over Gloo starts with each rank sending every peer a fixed-size header, its
// *fingerprint*: the operation's sequence number in the group and its CallSignature (op, count,
// dtype, root, reduce op, layout), plus the all-reduce algorithm it will run. Each rank compares
// every peer's with its own before any data moves; if one differs, every rank throws a
// MismatchError that names both calls, instead of what Gloo does with mismatched calls (abort
// the process from its event loop when a message is longer than the receive, "op.preamble.length
// <= op.nbytes"; silently wrong sums when the byte counts happen to agree; a timeout otherwise).
//
// Why it cannot itself trip Gloo's length check: every rank receives fingerprints into the
// same fixed capacity (header + kFingerprintInlineBytes), whatever the call, and nothing else is ever
// sent on the fingerprint slot (tag_space.h) or the synchronous lane; a message only has to
// fit, not to match.
//
// Why it is cheap: small all-reduces, broadcasts and allgathers carry their data inside the
// fingerprint message (up to kFingerprintInlineBytes), so the exchange *is* the collective and the
// check adds no round trip (a barrier over Gloo is the exchange alone); larger ones, and the
// other collectives, pay one round trip of 80 bytes before their data. Measured costs:
// docs/benchmarks.md, "Call fingerprint".
//
// Two carriers, chosen alike on every rank when the group is created: the synchronous lane
// (sync_lane.h: ringtorch's own TCP connections, read by the waiting thread itself) when the
// whole group goes over Gloo's TCP transport and no rank declines it (RINGTORCH_SYNC_LANE=0),
// else unbound buffers on the group's own context.
//
// After a mismatch every rank has received exactly one fingerprint from each peer and no data
// was sent, so the group stays usable (as on the shared-memory path, which compares signatures
// in its segment instead: shm/local_collectives.h).
//
// Thread-safety: one exchange at a time (the process group runs one operation at a time).
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/call_signature.h"
#include "runtime/comm/scratch_buffer.h"
#include "runtime/comm/sizes.h"

namespace ringtorch {

class SyncLane;

struct CallFingerprint {
  uint32_t sequence = 0;  // the operation's number in its group (its tag)
  CallSignature call;
  int algorithm = -1;            // all-reduce: the AllreduceAlgorithm it will run; else -1
  std::string describe() const;  // "allreduce of 10 float32 sum (operation #3, direct)"
};

class FingerprintExchange {
 public:
  // Over the context each exchange names, or over `lane` (every rank of the group must give
  // one, or none).
  FingerprintExchange();
  explicit FingerprintExchange(std::unique_ptr<SyncLane> lane);
  ~FingerprintExchange();  // drops the posted receives (each keeps Gloo's transport context alive)

  bool uses_lane() const { return uses_lane_; }

  // Sends `mine` and `inline_bytes` (<= kFingerprintInlineBytes) of `inline_data` to every peer and
  // receives theirs, by `deadline`. Throws MismatchError (FailureSite::peer: the first rank that differs)
  // when a peer's fingerprint is not `mine`; TimeoutError or PeerLostError naming the peer whose
  // fingerprint did not arrive.
  void exchange(gloo::Context& context, const CallFingerprint& mine, const void* inline_data, size_t inline_bytes,
                std::chrono::steady_clock::time_point deadline);

  // After exchange(): where the inline data `peer` sent is (writable). Its size follows from the
  // call, which the exchange has just found equal on every rank.
  char* inline_data_of(int peer);

  // Drops the receives posted for the next exchange (Note [Pre-posted fingerprint receives] in
  // call_fingerprint.cc) and closes the lane: the group's shutdown calls it, so that its
  // sockets close then. Without a lane, the next exchange, if any, posts afresh; with one, it
  // throws InvalidArgumentError.
  void release();

 private:
  // Without a lane: posts the next exchange's receives and sends the first `bytes` of send_
  // to every peer on the fingerprint slot.
  void send_on_context(gloo::Context& context, size_t bytes);

  void post_receives(gloo::Context& context, int set);  // one per peer, into receive_[set]
  char* block(int set, int peer);                       // peer's block in receive_[set]
  char* message_from(int peer);                         // its block in the last exchange's set

  std::unique_ptr<SyncLane> lane_;  // null: the group's context carries the fingerprints
  const bool uses_lane_;
  ScratchBuffer send_, receive_[2];
  // Per set, per peer: the receive posted into receive_[set] (null at this rank's index).
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> posted_[2];
  std::unique_ptr<gloo::transport::UnboundBuffer> outbound_;  // over send_, for every exchange
  const gloo::Context* posted_for_ = nullptr;                 // the context they were posted on
  int current_ = 0;                                           // the set the next exchange receives into
  int rank_ = 0;                                              // the context's, at the last exchange
};

// What a collective's data path needs to check its call first: the group's exchange and this
// call's fingerprint.
struct FingerprintCheck {
  FingerprintExchange* exchange;
  CallFingerprint fingerprint;
};

}  // namespace ringtorch
