#include "runtime/comm/group_setup.h"

#include <ATen/ATen.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/address.h>
#include <netdb.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ringtorch/error.h>

#include "base/log.h"
#include "base/parse.h"
#include "rendezvous/gloo_store.h"
#include "rendezvous/store_wait.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/piece_plan.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/socket_device.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {
namespace {

const char* environment(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

// Runs `connect` (a Gloo full mesh over the store) as `step`: the store's own error (a rank
// that never arrived; its message names the keys) becomes a TimeoutError, anything Gloo throws a
// PeerLostError that says `what_to_check` and how to raise the timeout.
template <typename Connect>
void connecting(int rank, const std::string& step, const std::string& prefix, const char* what_to_check,
                Connect&& connect) {
  const FailureSite site{rank, -1, step};
  try {
    connect();
  } catch (const Error& e) {
    throw TimeoutError(str_cat(prefix, step, ": ", e.what()), site);
  } catch (const std::exception& e) {
    throw PeerLostError(str_cat(prefix, step, " failed: ", e.what(), "; ", what_to_check, ", or ", kRaiseTimeoutHint),
                        site);
  }
}

// The numeric host of a Gloo TCP address, with an IPv6 scope ("fe80::1%eth0") where it has one;
// empty when it cannot be written (the lane is then declined).
std::string numeric_host(const gloo::transport::Address& address) {
  const auto* tcp = dynamic_cast<const gloo::transport::tcp::Address*>(&address);
  if (tcp == nullptr) return "";
  const sockaddr_storage& ss = tcp->getSockaddr();
  char host[NI_MAXHOST] = {};
  const socklen_t length = ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), length, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) !=
      0) {
    return "";
  }
  return host;
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
  if (options.sync_lane) {
    s.sync_lane = *options.sync_lane;
  } else if (const char* lane = environment("RINGTORCH_SYNC_LANE")) {
    s.sync_lane = parse_int_in_range(lane, 0, 1, "environment variable RINGTORCH_SYNC_LANE (0 or 1)") == 1;
  } else if (const char* old = environment("RINGTORCH_SYNC_PAIRS")) {
    static const bool said = (log_warning("RINGTORCH_SYNC_PAIRS is now RINGTORCH_SYNC_LANE; set that"), true);
    (void)said;
    s.sync_lane = parse_int_in_range(old, 0, 1, "environment variable RINGTORCH_SYNC_PAIRS (0 or 1)") == 1;
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
  connecting(rank, str_cat("connecting group '", settings.name, "' over ", choice.why), prefix,
             "check that every rank can reach this address (firewall, RINGTORCH_SOCKET_IFNAME)", [&] {
               GlooStore gloo_store(mesh.store);
               context->connectFullMesh(gloo_store, choice.device);
               publish_peer_addresses(*mesh.store, *context);
             });
  // The lane binds where the group's pairs listen (Gloo's TCP transport only: others have no
  // socket addresses).
  if (size > 1 && is_tcp_device(*choice.device)) {
    mesh.address = numeric_host(context->getPair(rank == 0 ? 1 : 0)->address());
  }
  mesh.context = std::move(context);
  mesh.device = std::move(choice.device);
  return mesh;
}

namespace {

// One all-reduce over the group's context during creation, with its failure in the words of
// `what` ("agreeing whether any rank has a GPU").
void creation_allreduce(const GroupMesh& mesh, int32_t* values, size_t count, ReduceOp op,
                        const GroupSettings& settings, const std::string& prefix, const std::string& what) {
  const std::string step = str_cat(prefix, "creating group '", settings.name, "' (", what, ")");
  const FailureSite site{mesh.context->rank, -1, step};
  ScratchBuffer scratch;
  try {
    allreduce_buffer(mesh.context, values, count, sizeof(int32_t), reduce_function(op, at::kInt),
                     AllreduceAlgorithm::kDirect, kCreationTag, settings.timeout, scratch);
  } catch (const std::exception& e) {
    // Gloo's words, or ringtorch's own all-reduce passing them on. Where the error does not name
    // the peer, the store does, as for a failed collective (process_group.cc): a peer that
    // stopped creation early (a setting its kernel refused) closes its sockets, and this rank
    // learns it here.
    const auto* typed = dynamic_cast<const Error*>(&e);
    const GlooFailure failure = read_gloo_failure(e.what());
    FailedPeer peer{typed ? typed->site().peer : -1, ""};
    if (peer.rank < 0) {
      peer = name_failed_peer(mesh.store, site.rank, mesh.context->size, failure.peer_address, step,
                              std::min(settings.timeout, kRollCallWindow));
    }
    std::rethrow_exception(operation_failure(typed ? typed->kind() : failure.kind, step, e.what(), peer.clause,
                                             settings.timeout, {site.rank, peer.rank, step}));
  }
}

}  // namespace

GroupAgreement agree_on_group(const GroupMesh& mesh, const GroupSettings& settings, const std::string& prefix) {
  GroupAgreement agreement;
  const std::optional<size_t> forced_pieces =
      settings.allreduce_piece_bytes ? std::optional<size_t>(std::max<size_t>(1, *settings.allreduce_piece_bytes))
                                     : std::nullopt;
  if (mesh.context->size == 1) {
    agreement.allreduce_piece_bytes = forced_pieces.value_or(SIZE_MAX);
    return agreement;
  }
  // Pieces (piece_plan.h) exist so that a rank staging CUDA tensors can overlap its copies, and
  // every rank must cut alike; a group where no rank sees a GPU keeps whole buffers, which are
  // faster over TCP (sizes.h). A lane must exist on every rank or on none.
  // Asked once per process: LibTorch's lazy set-up of its CUDA hooks synchronises in code TSan
  // cannot see, so groups created on several threads at once (the tests) were reported as a race
  // in at::Context::hasCUDA(); a function-local static is initialised under a guard TSan knows.
  static const bool this_process_has_cuda = at::hasCUDA();
  const bool declines_lane = !settings.sync_lane || mesh.address.empty();
  int32_t any[2] = {this_process_has_cuda ? 1 : 0, declines_lane ? 1 : 0};
  creation_allreduce(mesh, any, 2, ReduceOp::kMax, settings, prefix,
                     "agreeing whether any rank has a GPU or declines a synchronous lane");
  agreement.allreduce_piece_bytes = forced_pieces.value_or(any[0] ? kAllreducePieceBytes : SIZE_MAX);
  agreement.sync_lane = any[1] == 0;
  return agreement;
}

std::unique_ptr<SyncLane> connect_lane(const GroupMesh& mesh, const GroupSettings& settings,
                                       const std::string& prefix) {
  const int rank = mesh.context->rank, size = mesh.context->size;
  const std::string step = str_cat("connecting the synchronous lane of group '", settings.name, "'");
  try {
    return SyncLane::connect(c10::make_intrusive<c10d::PrefixStore>("sync", mesh.store), rank, size, mesh.address,
                             settings.timeout);
  } catch (const Error& e) {
    // The lane's own kind (a peer that never connected, a socket that cannot be made), with
    // the way around it.
    std::rethrow_exception(make_error(e.kind(),
                                      str_cat(prefix, step, ": ", e.what(), "; RINGTORCH_SYNC_LANE=0 goes without it"),
                                      FailureSite{rank, e.site().peer, step}));
  }
}

HostPlan plan_paths(const GroupMesh& mesh, int rank, int size, const GroupSettings& settings, GroupRole role,
                    const std::string& prefix) {
  if (role == GroupRole::kCrossHostPart) {
    HostPlan plan;
    plan.why = "the cross-host part of a hierarchical group";
    return plan;
  }
  if (size == 1) {
    HostPlan plan;
    plan.why = "a group of one rank";
    return plan;
  }
  const std::string step = str_cat("planning group '", settings.name, "' (which ranks share a host)");
  try {
    return plan_hosts(*mesh.store, rank, size, settings.segment_tag, settings.shared_memory, settings.host_identity);
  } catch (const Error& e) {
    // A store error alone names the key, not the rank or the step it belongs to.
    std::rethrow_exception(
        make_error(e.kind(), str_cat(prefix, step, ": ", e.what(), "; RINGTORCH_SHM=0 goes without shared memory"),
                   FailureSite{rank, e.site().peer, step}));
  }
}

}  // namespace ringtorch
