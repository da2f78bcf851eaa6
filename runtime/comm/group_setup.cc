#include "runtime/comm/group_setup.h"

#include <ATen/ATen.h>
#include <gloo/rendezvous/context.h>

#include <algorithm>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "base/error.h"
#include "base/parse.h"
#include "rendezvous/gloo_store.h"
#include "rendezvous/store_wait.h"
#include "runtime/comm/chunk_plan.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/socket_device.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {
namespace {

const char* environment(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

}  // namespace

GroupSettings resolve_settings(const ProcessGroupOptions& options, std::chrono::milliseconds default_timeout) {
  GroupSettings s;
  s.name = options.name;
  if (options.timeout) {
    s.timeout = *options.timeout;
  } else if (const char* env = environment("RINGTORCH_TIMEOUT")) {
    s.timeout = parse_seconds(env, "environment variable RINGTORCH_TIMEOUT");
  } else {
    s.timeout = default_timeout;
  }
  s.iface = options.iface;
  s.transport = options.transport;
  if (options.allreduce_algorithm) {
    s.allreduce_algorithm = *options.allreduce_algorithm;
  } else if (const char* algorithm = std::getenv("RINGTORCH_ALLREDUCE_ALGORITHM")) {
    s.allreduce_algorithm = parse_allreduce_algorithm(algorithm, "RINGTORCH_ALLREDUCE_ALGORITHM");
  }
  s.allreduce_piece_bytes = options.allreduce_piece_bytes;
  if (options.shared_memory) {
    s.shared_memory = *options.shared_memory;
  } else if (const char* shm = std::getenv("RINGTORCH_SHM")) {
    s.shared_memory = std::string(shm) != "0";
  }
  s.segment_tag = (options.segment_tag.empty() ? std::string("group") : options.segment_tag) + "-" + options.name;
  s.host_identity = options.host_identity;
  if (s.host_identity.empty()) {
    const char* env = environment("RINGTORCH_HOST_ID");
    s.host_identity = env ? env : host_identity();
  }
  return s;
}

GroupMesh connect_mesh(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& store_host,
                       const GroupSettings& settings, const std::string& prefix) {
  DeviceChoice choice = make_device(settings.transport, settings.iface, store_host);
  GroupMesh mesh;
  mesh.network = choice.why;
  mesh.store = c10::make_intrusive<c10d::PrefixStore>("gloo/" + settings.name, store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(settings.timeout);
  const std::string step = str_cat("connecting group '", settings.name, "' over ", choice.why);
  const FailureSite site{rank, -1, step};
  try {
    GlooStore gloo_store(mesh.store);
    context->connectFullMesh(gloo_store, choice.device);
    publish_peer_addresses(*mesh.store, *context);
  } catch (const Error& e) {
    // The store's own error: a rank that never arrived (the message names the keys).
    throw TimeoutError(str_cat(prefix, step, ": ", e.what()), site);
  } catch (const std::exception& e) {
    throw PeerLostError(
        str_cat(prefix, step, " failed: ", e.what(), "; check that every rank can reach this address (firewall, ",
                "RINGTORCH_SOCKET_IFNAME), or ", kRaiseTimeoutHint),
        site);
  }
  mesh.context = std::move(context);
  return mesh;
}

size_t agree_pieces(const GroupMesh& mesh, const GroupSettings& settings, const std::string& prefix) {
  // Pieces (chunk_plan.h) exist so that a rank staging CUDA tensors can overlap its copies, and
  // every rank must cut alike; a group where no rank sees a GPU keeps whole buffers, which
  // measured 10-20% faster over TCP at 64 MiB. So the ranks agree once, here.
  if (settings.allreduce_piece_bytes) return std::max<size_t>(1, *settings.allreduce_piece_bytes);
  if (mesh.context->size == 1) return SIZE_MAX;
  // Asked once per process: LibTorch's lazy set-up of its CUDA hooks synchronises in code TSan
  // cannot see, so groups created on several threads at once (the tests) were reported as a race
  // in at::Context::hasCUDA(); a function-local static is initialised under a guard TSan knows.
  static const bool this_process_has_cuda = at::hasCUDA();
  int32_t any_cuda = this_process_has_cuda ? 1 : 0;
  const std::string step =
      str_cat(prefix, "creating group '", settings.name, "' (agreeing whether any rank has a GPU)");
  const FailureSite site{mesh.context->rank, -1, step};
  ScratchBuffer scratch;
  try {
    allreduce_buffer(mesh.context, &any_cuda, 1, sizeof(any_cuda), reduce_function(ReduceOp::kMax, at::kInt),
                     AllreduceAlgorithm::kDirect, kCreationTag, settings.timeout, scratch);
  } catch (const Error& e) {
    std::rethrow_exception(
        operation_failure(e.kind(), step, e.what(), "", settings.timeout, {site.rank, e.site().peer, step}));
  } catch (const std::exception& e) {
    std::rethrow_exception(
        operation_failure(read_gloo_failure(e.what()).kind, step, e.what(), "", settings.timeout, site));
  }
  return any_cuda ? kAllreduceChunkBytes : SIZE_MAX;
}

HostPlan plan_paths(const GroupMesh& mesh, int rank, int size, const GroupSettings& settings, GroupRole role) {
  if (role == GroupRole::kCrossHostPart) {
    HostPlan plan;
    plan.why = "Gloo over TCP (the cross-host part of a hierarchical group)";
    return plan;
  }
  if (size == 1) {
    HostPlan plan;
    plan.why = "a group of one rank: nothing to exchange";
    return plan;
  }
  return plan_hosts(*mesh.store, rank, size, settings.segment_tag, settings.shared_memory, settings.host_identity);
}

}  // namespace ringtorch
