// How big the send buffers of a group's TCP data sockets are (RINGTORCH_SOCKET_SNDBUF).
//
//   kernel   (default) the kernel's own tuning for every peer (what Gloo alone does)
//   auto     212992 bytes (Linux's usual net.core.wmem_default on 64-bit machines; the kernel
//            doubles the request) for peers on this machine's kernel (peer_kernels.h), the
//            kernel's own tuning for every other peer
//   <bytes>  this SO_SNDBUF request for every peer ("256K", "1M"; the kernel doubles it and
//            caps it at net.core.wmem_max)
//
// Why auto exists and is not the default: between processes of one kernel TCP is two kernel
// copies, and with the kernel's autotuned buffer (up to 4 MiB) a writer runs megabytes ahead of
// its reader. On a VM whose kernel runs BBR, capping it for same-machine peers made 16 and 64 MiB
// all-reduces 2-16% faster, but 2-4 MiB ones (a 2-rank direct exchange of the whole buffer)
// 1.04-1.33x slower (1 MiB, bimodal here, anywhere from 0.3x to 2.3x). Most of the gain was
// BBR's to give: switching those sockets to cubic (tcp_congestion.h, the default) keeps it
// between network namespaces without the loss; with cubic the cap changed nothing measurable
// on loopback, and on loopback under BBR it is still 8-9% faster at 16-32 MiB
// (docs/benchmarks.md, "The send buffer of the data sockets" and "Congestion control between
// processes of one machine").
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
#include <vector>

namespace ringtorch {

struct SocketSendBuffer {
  enum class Mode { kAuto, kKernel, kBytes };
  Mode mode = Mode::kKernel;
  int bytes = 0;  // the SO_SNDBUF request for kBytes
};

// The request kAuto makes for peers on this machine.
constexpr int kSameMachineSendBuffer = 212992;

// "auto", "kernel" or a byte count with an optional K/M/G suffix (4K to 1G). Throws
// InvalidArgumentError naming `what` ("environment variable RINGTORCH_SOCKET_SNDBUF") otherwise.
SocketSendBuffer parse_socket_send_buffer(const std::string& text, const std::string& what);

// Applies `choice` to `sockets` (find_pair_sockets: one per peer rank, -1 where there is none),
// `on_this_kernel` saying which peers share this machine's kernel (peers_on_this_kernel; at
// least as long as `sockets`). `setting` is where the choice came from, for the path line
// ("RINGTORCH_SOCKET_SNDBUF" or "ProcessGroupOptions::socket_send_buffer").
// Returns what it did for the group's path line: "TCP send buffers of 416.0 KiB for 1 peer on
// this machine (...)", the size as the kernel granted it; empty when it changed nothing. A socket
// that refuses the size keeps the kernel's tuning.
std::string apply_send_buffers(const std::vector<int>& sockets, const std::vector<bool>& on_this_kernel,
                               const SocketSendBuffer& choice, const std::string& setting);

}  // namespace ringtorch
