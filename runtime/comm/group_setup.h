// Creating a process group, one job per step. ProcessGroup::create runs them in this order;
// what each returns is constant for the group's life.
//
//   resolve_settings  the options, with environment variables and defaults filled in
//   connect_mesh      the network interface, the Gloo full mesh over the store, the
//                     peer-address directory (failure_report.h)
//   agree_pieces      whether all-reduce is cut into pieces: only where some rank sees a GPU
//   plan_paths        which ranks share a host: shared memory, hierarchical, or Gloo alone
//
// Every step either succeeds on every rank or fails on every rank within the timeout, with an
// error that names the rank, the group and the step.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/comm/allreduce_algorithm.h"
#include "runtime/comm/process_group_options.h"
#include "runtime/comm/shm/host_plan.h"

namespace ringtorch {

// The options with every default resolved.
struct GroupSettings {
  std::string name;
  std::chrono::milliseconds timeout{0};
  std::string iface, transport;
  AllreduceAlgorithm allreduce_algorithm = AllreduceAlgorithm::kAuto;
  std::optional<size_t> allreduce_piece_bytes;  // forced by the caller, else decided by agree_pieces
  bool shared_memory = true;
  std::string segment_tag;  // never empty
  std::string host_identity;
};

// Reads RINGTORCH_TIMEOUT, RINGTORCH_ALLREDUCE_ALGORITHM, RINGTORCH_SHM and
// RINGTORCH_HOST_ID where the options leave a field unset. Throws InvalidArgumentError for a
// malformed variable.
GroupSettings resolve_settings(const ProcessGroupOptions& options, std::chrono::milliseconds default_timeout);

struct GroupMesh {
  std::shared_ptr<gloo::Context> context;
  c10::intrusive_ptr<c10d::Store> store;  // the group's own keys: the caller's store under "gloo/<name>/"
  std::string network;                    // which interface, and why
};

// `store` is namespaced for this group's members; `store_host` is where the store lives (for
// choosing the interface; empty: loopback). `prefix` ("[rank 0/2] ") starts every message.
GroupMesh connect_mesh(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& store_host,
                       const GroupSettings& settings, const std::string& prefix);

// The all-reduce piece size: the forced one, else kAllreduceChunkBytes when any rank sees a
// CUDA device (one 4-byte all-reduce with kCreationTag), else SIZE_MAX (whole buffers).
size_t agree_pieces(const GroupMesh& mesh, const GroupSettings& settings, const std::string& prefix);

// Who a group is: a group the user asked for, or the cross-host part of a hierarchical group
// (one rank per host, which neither plans shared memory nor announces its path).
enum class GroupRole { kWhole, kCrossHostPart };

// The host plan (shm/host_plan.h) for a kWhole group of more than one rank; for the others, a
// plan without shared memory whose `why` says so.
HostPlan plan_paths(const GroupMesh& mesh, int rank, int size, const GroupSettings& settings, GroupRole role);

}  // namespace ringtorch
