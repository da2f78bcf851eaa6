// GroupDescription (process_group.h): what a group decided at creation, as data and as the one
// line rank 0 logs.
#include <algorithm>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

#include "runtime/comm/call_fingerprint.h"
#include "runtime/comm/op_type.h"
#include "runtime/comm/process_group_impl.h"
#include "runtime/comm/socket_device.h"

namespace ringtorch {
namespace {

// The operations the same-host path carries (shm/same_host_path.h); the rest always go over Gloo.
bool same_host_path_carries(OpType op, AllreduceAlgorithm algorithm) {
  switch (op) {
    case OpType::kAllreduce:
    case OpType::kReduceScatter:
      // A forced algorithm keeps these on Gloo, so its tests and benchmarks measure Gloo.
      return algorithm == AllreduceAlgorithm::kAuto;
    case OpType::kBroadcast:
    case OpType::kAllgather:
    case OpType::kBarrier:
      return true;
    default:
      return false;
  }
}

}  // namespace

const char* route_name(GroupDescription::Route route) {
  switch (route) {
    case GroupDescription::Route::kNone:
      return "none";
    case GroupDescription::Route::kSharedMemory:
      return "shared memory";
    case GroupDescription::Route::kHierarchical:
      return "hierarchical";
    case GroupDescription::Route::kGloo:
      return "Gloo";
  }
  return "?";
}

GroupDescription::Route GroupDescription::route(const std::string& operation) const {
  if (routes.empty()) throw InvalidArgumentError(str_cat("this rank is not a member of group '", name, "'"));
  const auto found = routes.find(operation);
  if (found == routes.end()) throw InvalidArgumentError(str_cat("'", operation, "' is not an operation of a group"));
  return found->second;
}

std::string GroupDescription::describe() const {
  if (routes.empty()) return str_cat("this rank is not a member of group '", name, "'");
  std::vector<std::string> on_the_same_host_path;
  bool any_gloo = false;
  for (int i = 0; i < kOpTypeCount; ++i) {
    const char* name = op_type_name(static_cast<OpType>(i));
    const Route r = route(name);
    if (r == Route::kSharedMemory || r == Route::kHierarchical) on_the_same_host_path.push_back(name);
    any_gloo = any_gloo || r == Route::kGloo;
  }
  std::string ops;
  for (size_t i = 0; i < on_the_same_host_path.size(); ++i) {
    ops += (i == 0 ? "" : i + 1 == on_the_same_host_path.size() ? " and " : ", ") + on_the_same_host_path[i];
  }
  const std::string gloo = "Gloo over " + std::string(transport == "ibverbs" ? "ibverbs" : "TCP");
  std::string line;
  if (!any_gloo && on_the_same_host_path.empty()) {
    line = str_cat("a group of one rank: nothing to exchange");
  } else if (on_the_same_host_path.empty()) {
    line = str_cat(gloo, ": ", reason);
  } else if (hosts == 1) {
    line = str_cat("shared memory: ", reason, " (", ops, "; the other operations: ", gloo, ")");
  } else {
    line = str_cat("hierarchical: ", reason, "; ", ops, " through shared memory within each host and ", gloo,
                   " between hosts");
  }
  if (sync_lane) {
    line += str_cat("; call fingerprints and collectives up to ", kFingerprintInlineBytes >> 10,
                    " KiB on the synchronous lane (RINGTORCH_SYNC_LANE=0: off)");
  }
  return line;
}

void ProcessGroup::Impl::describe_routes(const GroupSettings& settings, const HostPlan& plan, const GroupMesh& mesh) {
  GroupDescription& d = description_;
  d.name = name_;
  d.rank = rank_;
  d.size = size_;
  d.hosts = plan.hosts;
  d.reason = plan.why;
  d.transport = mesh.device && !is_tcp_device(*mesh.device) ? "ibverbs" : "tcp";
  d.network = mesh.network;
  d.sync_lane = fingerprint_ && fingerprint_->uses_lane();
  d.allreduce_algorithm = settings.allreduce_algorithm;
  d.allreduce_piece_bytes = allreduce_piece_bytes_;
  const GroupDescription::Route same_host =
      plan.hosts > 1 ? GroupDescription::Route::kHierarchical : GroupDescription::Route::kSharedMemory;
  for (int i = 0; i < kOpTypeCount; ++i) {
    const OpType op = static_cast<OpType>(i);
    GroupDescription::Route route = GroupDescription::Route::kGloo;
    if (size_ == 1) {
      route = GroupDescription::Route::kNone;
    } else if (plan.local && same_host_path_carries(op, settings.allreduce_algorithm)) {
      route = same_host;
    }
    d.routes[op_type_name(op)] = route;
  }
}

}  // namespace ringtorch
