// Creating a process group, one job per step. ProcessGroup::create runs them in this order;
// what each returns is constant for the group's life.
//
//   resolve_settings  the options, with environment variables and defaults filled in
//   connect_mesh      the network interface, the Gloo full mesh over the store, the
//                     peer-address directory (failure_report.h)
//   agree_on_group    whether all-reduce is cut into pieces (only where some rank sees a GPU),
//                     and whether the group may use a synchronous lane (no rank declines it)
//   plan_paths        which ranks share a host: shared memory, hierarchical, or Gloo alone
//   connect_lane      the synchronous lane (sync_lane.h), where the group goes over Gloo's TCP
//                     transport alone and the ranks agreed on it
//
// Every step either succeeds on every rank or fails on every rank within the timeout, with an
// error that names the rank, the group and the step. A rank that stops creation early closes
// its sockets: its peers then fail at the next step, naming it as the peer they lost (up to
// kRollCallWindow more to find out which, where Gloo's message does not say).
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <ringtorch/process_group_options.h>

#include "runtime/comm/allreduce_algorithm.h"
#include "runtime/comm/shm/host_plan.h"
#include "runtime/comm/sync_lane.h"

namespace ringtorch {

// The options with every default resolved.
struct GroupSettings {
  std::string name;
  std::chrono::milliseconds timeout{0};
  std::string iface, transport;
  AllreduceAlgorithm allreduce_algorithm = AllreduceAlgorithm::kAuto;
  std::optional<size_t> allreduce_piece_bytes;  // forced by the caller, else decided by agree_on_group
  bool shared_memory = true;
  bool sync_lane = true;    // this rank accepts a synchronous lane
  std::string segment_tag;  // never empty
  std::string host_identity;
};

// Reads RINGTORCH_TIMEOUT, RINGTORCH_ALLREDUCE_ALGORITHM, RINGTORCH_SHM, RINGTORCH_SYNC_LANE and
// RINGTORCH_HOST_ID where the options leave a field unset. Throws InvalidArgumentError for a
// malformed variable.
GroupSettings resolve_settings(const ProcessGroupOptions& options, std::chrono::milliseconds default_timeout);

struct GroupMesh {
  std::shared_ptr<gloo::Context> context;
  std::shared_ptr<gloo::transport::Device> device;  // the context's (a lane connects over it too)
  c10::intrusive_ptr<c10d::Store> store;            // the group's own keys: the caller's store under "gloo/<name>/"
  std::string network;                              // which interface, and why
  std::string address;  // this rank's address on that network ("10.0.0.3"); empty: not TCP, or one rank
};

// `store` is namespaced for this group's members; `store_host` is where the store lives (for
// choosing the interface; empty: loopback). `prefix` ("[rank 0/2] ") starts every message.
GroupMesh connect_mesh(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& store_host,
                       const GroupSettings& settings, const std::string& prefix);

// What every rank must decide alike, agreed in one all-reduce of two integers (kCreationTag).
struct GroupAgreement {
  // The forced piece size, else kAllreducePieceBytes when any rank sees a CUDA device, else
  // SIZE_MAX (whole buffers).
  size_t allreduce_piece_bytes = SIZE_MAX;
  // No rank declines a synchronous lane (RINGTORCH_SYNC_LANE=0, or a transport other than
  // Gloo's TCP); false for a group of one rank.
  bool sync_lane = false;
};
GroupAgreement agree_on_group(const GroupMesh& mesh, const GroupSettings& settings, const std::string& prefix);

// Who a group is: a group the user asked for, or the cross-host part of a hierarchical group
// (one rank per host, which neither plans shared memory nor announces its path).
enum class GroupRole { kWhole, kCrossHostPart };

// The host plan (shm/host_plan.h) for a kWhole group of more than one rank; for the others, a
// plan without shared memory whose `why` says so. Its errors start with `prefix` and name the step.
HostPlan plan_paths(const GroupMesh& mesh, int rank, int size, const GroupSettings& settings, GroupRole role,
                    const std::string& prefix);

// Connects the group's synchronous lane. Collective; called only where agree_on_group agreed and
// the plan sends everything over Gloo. Fails on every rank within the timeout, as connect_mesh
// does.
std::unique_ptr<SyncLane> connect_lane(const GroupMesh& mesh, const GroupSettings& settings, const std::string& prefix);

}  // namespace ringtorch
