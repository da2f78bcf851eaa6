// Naming the peer behind a failed collective.
//
// Gloo says "Read error [10.0.0.3]:41873: Connection reset by peer" when a peer dies, and only
// "Timed out waiting 3000ms for recv operation to complete" when one stops or never calls
// (gloo_failure.h reads the address out of that). Two things turn it into a rank:
// - a directory: at connect time every rank writes the local address of each of its pairs to
//   the group's store (`peers/<rank>`). Gloo names a pair's far end mostly as the peer wrote it,
//   but a side that accepted the connection before its own connect() reached that pair keeps
//   the address the peer listened on during set-up (a race in Gloo's pair set-up, as its code
//   reads). So an address names a rank exactly, or else by its
//   host when every peer's entry is known and no other peer is on that host
//   (peer_named_by_address);
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
#include <vector>

#include <ringtorch/error.h>

namespace ringtorch {

// Writes this rank's pair addresses to `store` (the group's own prefix) under peers/<rank>.
void publish_peer_addresses(c10d::Store& store, gloo::Context& context);

// What `peer` published for its pair with `rank` ("[host]:port"). Waits for the key as the
// store's get() does.
std::string published_peer_address(c10d::Store& store, int peer, int rank);

// The index in `published` (each peer's "[host]:port" for its pair with this rank `rank`;
// empty at `rank` and for peers that published nothing) of the peer that Gloo's `named`
// address ("[host]:port") means: the exact address, else the one peer on that host, provided
// every peer's entry is known (a peer missing from the directory may be the one on that host);
// -1 otherwise.
int peer_named_by_address(const std::vector<std::string>& published, int rank, const std::string& named);

struct FailedPeer {
  int rank = -1;       // the one rank to blame, when there is one; else -1
  std::string clause;  // "peer rank 1 ([127.0.0.1]:4312)", "peer rank 2 (at [10.0.0.3]:5512) did not
                       // report ...", or "peer unknown: ..." when the store cannot tell
};

// `peer_address` is the address Gloo's failure named (read_gloo_failure), or empty. Reports
// this rank's own failure (`what`, the operation's description) as it goes. Takes at most about
// `window` plus one second (kReportSlack); a failed operation gives it kRollCallWindow, or its
// timeout when that is shorter.
FailedPeer name_failed_peer(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                            const std::string& peer_address, const std::string& what, std::chrono::milliseconds window);

constexpr std::chrono::milliseconds kReportSlack{1000};
constexpr std::chrono::milliseconds kRollCallWindow{2000};

// The error a failed operation hands its caller: `description` (the Work's), what happened
// (`kind`: kTimeout or kPeerLost; `cause`: the lower layer's words), who is to blame
// (`peer_clause`, may be empty), and what to do. The group is broken after it.
std::exception_ptr operation_failure(ErrorKind kind, const std::string& description, const std::string& cause,
                                     const std::string& peer_clause, std::chrono::milliseconds timeout,
                                     FailureSite site);

}  // namespace ringtorch
