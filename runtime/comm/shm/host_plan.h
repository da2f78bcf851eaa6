// Which ranks of a group share a host, and whether they can use one shared-memory segment:
// decided identically on every rank at group creation, through the group's store.
//
// Each rank publishes its host identity (hostname + the kernel's boot id). Ranks with the same
// identity form a local group; its first rank creates the segment and the others map it and
// check a nonce written into it (two containers with the same hostname but separate IPC
// namespaces fail here). Shared memory is used only when every rank succeeded (so every rank
// decides the same), when enabled (RINGTORCH_SHM, default on), and, across several hosts, when
// every host has the same number of ranks (the hierarchical collectives pair them by local
// index). Otherwise the group falls back to Gloo, and `why` says why.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "runtime/comm/shm/local_collectives.h"

namespace ringtorch {

struct HostPlan {
  std::unique_ptr<LocalCollectives> local;  // null: Gloo over TCP for everything
  int hosts = 1;
  // Across several hosts: for each local index i, the group ranks that hold it (one per host,
  // in host order). Every rank creates these subgroups in this order.
  std::vector<std::vector<int>> cross_host_groups;
  // For every group rank: its host's index (in order of each host's first rank) and its
  // index among its host's ranks.
  std::vector<int> host_of_rank, local_index_of_rank;
  std::string why;  // the reason for the route, in words (GroupDescription::reason)
};

// "<hostname>|<boot id>"
std::string host_identity();

// Collective over `store` (already scoped to this group). `segment_tag` names the segment
// (run id, restart, round, group), `enabled` false skips straight to TCP, `identity` is this
// rank's host (host_identity() unless overridden).
HostPlan plan_hosts(c10d::Store& store, int rank, int size, const std::string& segment_tag, bool enabled,
                    const std::string& identity, size_t area_bytes = kSharedMemoryAreaBytes);

}  // namespace ringtorch
