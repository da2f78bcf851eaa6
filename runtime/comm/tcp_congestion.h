// Which TCP congestion control a group's data sockets run (RINGTORCH_TCP_CONGESTION).
//
//   auto     (default) cubic (else reno, which every kernel lets any process choose) on the
//            sockets to peers on this machine's kernel (peer_kernels.h) where the kernel chose
//            BBR; every other socket keeps the kernel's choice
//   kernel   the kernel's choice (net.ipv4.tcp_congestion_control) on every socket
//   <name>   this algorithm on every socket ("reno", "cubic", "bbr"); the group fails to start
//            when the kernel refuses it
//
// Why: between processes of one machine (loopback, network namespaces, docker-compose
// containers on one bridge) there is no link for BBR to model, and it held large transfers back:
// on a VM whose kernel defaults to BBR, 2-rank all-reduces of 2-64 MiB between two network
// namespaces took 0.84-0.95x the time with these sockets switched to cubic (12 alternating
// rounds; docs/benchmarks.md, "Congestion control between processes of one machine"). Across a
// real link BBR is the administrator's choice for that link, so auto leaves it there. The switch
// comes after Gloo has connected, and a socket may keep state BBR set up (its pacing), so the
// figures above are for sockets as switched, not born with cubic.
//
// Only a group's own mesh, like socket_send_buffer.h: the synchronous lane carries messages of
// at most 256 KiB, which a congestion window does not hold back.
//
// Thread-safety: apply_congestion_control runs while the group is being created, on the
// creating thread; the kernel serialises its setsockopt with Gloo's event loop. The rest are
// pure functions.
#pragma once

#include <string>
#include <vector>

namespace ringtorch {

struct TcpCongestion {
  enum class Mode { kAuto, kKernel, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // the algorithm for kNamed
};

// "auto", "kernel" or an algorithm's name (lower-case letters, digits, '_' and '-', at most 15
// characters). Throws InvalidArgumentError naming `what` ("environment variable
// RINGTORCH_TCP_CONGESTION") otherwise; whether the kernel has the algorithm is learnt when the
// group applies it.
TcpCongestion parse_tcp_congestion(const std::string& text, const std::string& what);

// Applies `choice` to `sockets` (find_pair_sockets: one per peer rank, -1 where there is none),
// `on_this_kernel` saying which peers share this machine's kernel (peers_on_this_kernel; at
// least as long as `sockets`). `setting` is where the choice came from, for the messages
// ("RINGTORCH_TCP_CONGESTION" or "ProcessGroupOptions::tcp_congestion"). Returns what it changed
// for the group's path line ("TCP congestion control cubic instead of bbr for 1 peer on this
// machine (...)"); empty when nothing changed. Under auto a socket that refuses both cubic and
// reno keeps the kernel's choice; a named algorithm that the kernel refuses throws
// InvalidArgumentError naming the setting, the peer, the kernel's reason and the sysctls that say
// what is available and allowed.
std::string apply_congestion_control(const std::vector<int>& sockets, const std::vector<bool>& on_this_kernel,
                                     const TcpCongestion& choice, const std::string& setting);

// The congestion control of TCP socket `fd`; empty when the kernel does not say.
std::string congestion_control_of(int fd);

}  // namespace ringtorch
