// The TCP socket under each pair of a Gloo context.
//
// Gloo's TCP pair keeps its socket to itself (and Debian's Gloo does not ship the header that
// declares the pair), yet ringtorch needs it: the synchronous lane polls it before it lets Gloo
// read (sync_lane.h), and a group tunes its data sockets (socket_send_buffer.h,
// tcp_congestion.h). A connected socket is named by its two addresses, so the pair's own
// address and the address the peer published in the store (failure_report.h,
// publish_peer_addresses) pick it out of this process' descriptors.
//
// Thread-safety: reads /proc/self/fd and every descriptor there, other threads' included
// (tests/tsan_suppressions.txt says why that is safe); no state of its own.
#pragma once

#include <gloo/context.h>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace ringtorch {

// The socket of each peer's pair in `context`, indexed by peer rank: -1 for this rank and for a
// pair whose socket was not found (a transport other than TCP, or an address Gloo printed in
// another form). `store` holds the peers' published addresses; a peer that has not published
// yet is waited for as Store::get waits (its timeout). The descriptors stay owned by Gloo.
std::vector<int> find_pair_sockets(gloo::Context& context, c10d::Store& store);

}  // namespace ringtorch
