// What a caller may choose when creating a ProcessGroup. Every field left unset falls back to
// an environment variable, then to a default (docs/process_group.md, "Settings").
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace ringtorch {

// How an all-reduce over Gloo moves its data (docs/process_group.md, "Algorithm").
//   auto    (default) chosen per call by size and group size
//   direct  every rank sends its buffer to every peer: one round trip
//   ring    Gloo's ring: 2(n-1) steps, each rank sends 2(n-1)/n x the message
//   bcube   Gloo's bcube (recursive halving and doubling)
enum class AllreduceAlgorithm { kAuto, kDirect, kRing, kBcube };

struct ProcessGroupOptions {
  // Every operation's timeout. Unset: the rendezvous' (create(rdzv)), else RINGTORCH_TIMEOUT,
  // else 300 s.
  std::optional<std::chrono::milliseconds> timeout;
  std::string iface;  // network interface name or comma list; else RINGTORCH_SOCKET_IFNAME
  // "tcp" or "ibverbs" (InfiniBand/RoCE, when Gloo has it and the machine has a device; `iface`
  // then names the IB device). Default: RINGTORCH_TRANSPORT, else tcp.
  std::string transport;
  std::string name = "default";  // for messages and the key prefix of the group's context
  // All-reduce (and reduce_scatter) algorithm; default: RINGTORCH_ALLREDUCE_ALGORITHM, else auto.
  std::optional<AllreduceAlgorithm> allreduce_algorithm;
  // All-reduce buffers above this many bytes run as pieces of this size, one after another.
  // Unset: 16 MiB pieces when any rank of the group sees a CUDA device (agreed when the group is
  // created), else whole buffers. When set, it must be the same on every rank.
  std::optional<size_t> allreduce_piece_bytes;
  // Ranks that share a host reduce through shared memory (docs/process_group.md, "Shared
  // memory"); default: RINGTORCH_SHM (0: off), else on. Falls back to TCP by itself. An
  // explicitly chosen all-reduce algorithm (not auto) keeps all-reduce and reduce_scatter on Gloo.
  std::optional<bool> shared_memory;
  // Call fingerprints, and the collectives small enough to travel inside them (all-reduce,
  // broadcast, allgather up to 256 KiB), go over the group's synchronous lane when the whole
  // group goes over Gloo's TCP transport: TCP connections read by the waiting thread itself
  // (docs/process_group.md, "The synchronous lane"). Default: RINGTORCH_SYNC_LANE (0: off), else
  // on. Any rank that declines it turns it off for the whole group.
  std::optional<bool> sync_lane;
  // Names the shared-memory segment ("<run id>-<restart>-<round>"; create(rdzv) sets it), so
  // the launcher can remove what a crashed run left.
  std::string segment_tag;
  // Which host this rank is on, for grouping ranks by host; default: RINGTORCH_HOST_ID, else
  // hostname + boot id. Tests and network-namespace clusters use it to act as several hosts.
  std::string host_identity;
};

}  // namespace ringtorch
