// Which of a group's peers run on this process' own kernel: loopback peers, and peers in other
// network namespaces or containers of this machine, whose "network" is the kernel copying
// between two sockets. The group tunes the sockets to those peers differently from the sockets
// that cross a real link (socket_send_buffer.h, tcp_congestion.h).
//
// Thread-safety: pure functions, apart from the store, which is thread-safe.
#pragma once

#include <string>
#include <vector>

namespace c10d {
class Store;
}  // namespace c10d

namespace ringtorch {

// This process' running kernel: its boot id, the same in every network namespace and container
// of one machine; empty where /proc does not say (then no peer counts as on this kernel).
std::string kernel_identity();

// For each of `size` ranks, whether it runs on the kernel `identity` names (false for `rank`
// itself). Collective over the group's ranks: each publishes its identity in `store` (the
// group's own keys) and reads every peer's, waiting as Store::get waits (the store's timeout).
std::vector<bool> peers_on_this_kernel(int rank, int size, c10d::Store& store,
                                       const std::string& identity = kernel_identity());

}  // namespace ringtorch
