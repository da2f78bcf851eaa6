// Naming the peer behind a failed collective.
//
// Gloo says "Read error [10.0.0.3]:41873: Connection reset by peer" when a peer dies, and only
// "Timed out waiting 3000ms for recv operation to complete" when one stops or never calls
// (gloo_failure.h reads the address out of that). Two things turn it into a rank:
// - a directory: at connect time every rank writes the local address of each of its pairs to
//   the group's store (`peers/<rank>`); the address Gloo gives on rank r for its peer p is the
//   one p wrote for r, so a failure that names an address names a rank;
// - a roll call: after a failure, every rank that notices writes `failures/<rank>` and waits a
//   short window for the others; the ranks that never report are the ones that died, stopped,
//   or are not in this collective.
// Store trouble must not turn a failure into a hang: the lookup runs on a helper thread and is
// abandoned (with "peer unknown") when it does not answer within its window.
//
// Thread-safety: free functions; the store must tolerate use from the helper thread.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "base/error.h"

namespace ringtorch {

// Writes this rank's pair addresses to `store` (the group's own prefix) under peers/<rank>.
void publish_peer_addresses(c10d::Store& store, gloo::Context& context);

struct FailedPeer {
  int rank = -1;       // the one rank to blame, when there is one; else -1
  std::string clause;  // "peer rank 1 ([127.0.0.1]:4312)", "peer rank 2 (at [10.0.0.3]:5512) did not
                       // report ...", or "peer unknown: ..." when the store cannot tell
};

// `peer_address` is the address Gloo's failure named (read_gloo_failure), or empty. Reports
// this rank's own failure (`what`, the operation's description) as it goes. Takes at most about
// `window` plus one second (kReportSlack).
FailedPeer name_failed_peer(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                            const std::string& peer_address, const std::string& what, std::chrono::milliseconds window);

constexpr std::chrono::milliseconds kReportSlack{1000};

// The error a failed operation hands its caller: `description` (the Work's), what happened
// (`kind`: kTimeout or kPeerLost; `cause`: the lower layer's words), who is to blame
// (`peer_clause`, may be empty), and what to do. The group is broken after it.
std::exception_ptr operation_failure(ErrorKind kind, const std::string& description, const std::string& cause,
                                     const std::string& peer_clause, std::chrono::milliseconds timeout,
                                     FailureSite site);

}  // namespace ringtorch
