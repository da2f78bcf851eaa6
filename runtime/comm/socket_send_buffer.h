// How big the send buffers of a group's TCP data sockets are (RINGTORCH_SOCKET_SNDBUF).
//
// Why: between two processes on one machine (loopback, network namespaces, docker-compose
// containers on one bridge) every byte is copied by the kernel from the sender's buffer into the
// receiver's. With the send buffer the kernel tunes by itself (up to 4 MiB here), a sender runs
// megabytes ahead of its reader and the reader copies them back from beyond the caches; capped
// at 212992 bytes (Linux's usual net.core.wmem_default on 64-bit machines; the kernel doubles
// the request) the data is still in cache when it is read, and a 16 or 64 MiB all-reduce
// measured 2-16% faster (docs/benchmarks.md, "The send buffer of the data sockets"; 2-4 MiB,
// a direct exchange of the whole buffer, measured 2-45% slower: a trade, not yet resolved). Between
// machines a NIC reads the buffer and a small one would only cap the bytes in flight on a long
// link, so:
//
//   auto     (default) the cap for peers on this machine's kernel (the same boot id: namespaces
//            and containers share it), the kernel's own tuning for every other peer
//   kernel   the kernel's own tuning for every peer (what Gloo alone does)
//   <bytes>  this SO_SNDBUF request for every peer ("256K", "1M"; the kernel doubles it and
//            caps it at net.core.wmem_max)
//
// Only a group's own mesh: the synchronous lane sizes its sockets for its messages itself
// (sync_lane.h). The request holds because the mesh sends from unbound buffers only: Gloo
// raises SO_SNDBUF to the message size when it sends from a bound buffer, which only the lane
// does.
//
// Thread-safety: apply_send_buffers runs while the group is being created, on the creating
// thread; it calls setsockopt on sockets Gloo's event loop may be polling, which the kernel
// serialises. The rest are pure functions.
#pragma once

#include <string>

namespace c10d {
class Store;
}  // namespace c10d
namespace gloo {
class Context;
}  // namespace gloo

namespace ringtorch {

struct SocketSendBuffer {
  enum class Mode { kAuto, kKernel, kBytes };
  Mode mode = Mode::kAuto;
  int bytes = 0;  // the SO_SNDBUF request for kBytes
};

// The request kAuto makes for peers on this machine.
constexpr int kSameMachineSendBuffer = 212992;

// "auto", "kernel" or a byte count with an optional K/M/G suffix (4K to 1G). Throws
// InvalidArgumentError naming `what` ("environment variable RINGTORCH_SOCKET_SNDBUF") otherwise.
SocketSendBuffer parse_socket_send_buffer(const std::string& text, const std::string& what);

// Which running kernel this process is on: its boot id, the same in every network namespace
// and container of one machine; empty where /proc does not say (then no peer counts as on this
// machine).
std::string kernel_identity();

// Applies `choice` to the sockets of `context`'s pairs (pair_sockets.h). Collective over the
// context's ranks, whatever each rank's choice (the setting is not agreed, so ranks may differ):
// every rank publishes `identity` in `store` first, and a kAuto rank reads its peers' (waiting
// as Store::get waits). Returns what it did for the group's path line: "TCP send buffers of
// 416.0 KiB for 1 peer on this machine (...)", the size as the kernel granted it; empty when it
// changed nothing. Throws only what the store throws; a socket that refuses the size keeps the
// kernel's tuning.
std::string apply_send_buffers(gloo::Context& context, c10d::Store& store, const SocketSendBuffer& choice,
                               const std::string& identity = kernel_identity());

}  // namespace ringtorch
