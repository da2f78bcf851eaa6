// ProcessGroup's front end: creation, subgroups, the synchronous and asynchronous entry points,
// argument checks, and the executor that runs each operation for the queue. The collectives
// themselves are prepared in collectives.cc and collectives_rooted.cc; send/recv in
// point_to_point.cc; the description in group_description.cc.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>
#include <ringtorch/timeline.h>

#include "base/log.h"
#include "runtime/comm/direct_allreduce.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/process_group_impl.h"
#include "runtime/comm/shm/host_plan.h"
#include "runtime/comm/shm/local_collectives.h"
#include "runtime/comm/shm/same_host_path.h"
#include "runtime/comm/tag_space.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

// The cross-host part of a hierarchical group, as the same-host path sees it. Its failures name
// the peer by its rank in the subgroup ("group default.hosts1 ... peer rank 1"); they are
// rethrown with that peer's rank in the parent group as well, in the text and in the site, so
// that a user can find the process (the fault matrix's cross-node cases showed only the former).
class ProcessGroup::Impl::CrossHostSubgroup : public CrossHostLink {
 public:
  CrossHostSubgroup(ProcessGroup* group, std::vector<int> parent_ranks, std::string parent_name, int parent_rank)
      : group_(group),
        parent_ranks_(std::move(parent_ranks)),
        parent_name_(std::move(parent_name)),
        parent_rank_(parent_rank) {}
  void allreduce(const at::Tensor& tensor, ReduceOp op, std::chrono::milliseconds timeout) override {
    translating_peers([&] { group_->allreduce(tensor, op, timeout); });
  }
  void broadcast(const at::Tensor& tensor, int root_host, std::chrono::milliseconds timeout) override {
    translating_peers([&] { group_->broadcast(tensor, root_host, timeout); });
  }
  void allgather(const at::Tensor& input, const at::Tensor& output, std::chrono::milliseconds timeout) override {
    translating_peers([&] { group_->allgather(input, output, timeout); });
  }
  void barrier(std::chrono::milliseconds timeout) override {
    translating_peers([&] { group_->barrier(timeout); });
  }

 private:
  template <typename Call>
  void translating_peers(const Call& call) {
    try {
      call();
    } catch (const Error& e) {
      const int peer = e.site().peer;
      if (peer < 0 || peer >= static_cast<int>(parent_ranks_.size())) throw;
      const int parent_peer = parent_ranks_[static_cast<size_t>(peer)];
      std::rethrow_exception(make_error(e.kind(),
                                        str_cat(e.what(), " (its peer rank ", peer, " of group ", group_->name(),
                                                " is rank ", parent_peer, " of group ", parent_name_, ")"),
                                        FailureSite{parent_rank_, parent_peer, e.site().operation}));
    }
  }

  ProcessGroup* const group_;            // the parent's cross_host_, which outlives this link
  const std::vector<int> parent_ranks_;  // subgroup rank -> parent rank
  const std::string parent_name_;
  const int parent_rank_;
};

ProcessGroup::Impl::Impl(int rank, int size, std::string name, std::chrono::milliseconds timeout)
    : rank_(rank),
      size_(size),
      context_prefix_(str_cat("[rank ", rank, "/", size, "] ")),
      name_(std::move(name)),
      timeout_(timeout) {}

ProcessGroup::Impl::~Impl() { shutdown(); }

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return impl_->rank_; }
int ProcessGroup::size() const { return impl_->size_; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->timeout_; }
const std::string& ProcessGroup::name() const { return impl_->name_; }
const GroupDescription& ProcessGroup::description() const { return impl_->description_; }
bool ProcessGroup::is_member() const { return impl_->member_; }
c10::intrusive_ptr<c10d::Store> ProcessGroup::store() const { return impl_->shared_store(); }

c10::intrusive_ptr<c10d::Store> ProcessGroup::Impl::shared_store() const {
  if (!member_) {
    throw InvalidArgumentError(
        str_cat(context_prefix_, "store(): this rank is not a member of group ", name_, " (ranks ", members_, ")"));
  }
  return c10::make_intrusive<c10d::PrefixStore>("shared", store_);
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(const Rendezvous& rdzv, ProcessGroupOptions options) {
  if (!options.timeout) options.timeout = rdzv.timeout;
  if (options.segment_tag.empty()) options.segment_tag = str_cat(rdzv.run_id, "-", rdzv.restart, "-", rdzv.round);
  return create(rdzv.store, rdzv.rank, rdzv.world_size, rdzv.master_addr, std::move(options));
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                   const std::string& store_host, const ProcessGroupOptions& options) {
  auto group = Impl::create_group(store, rank, size, store_host, options, GroupRole::kWhole, rank);
  Timeline::set_rank(rank);  // the timeline's pid: this process' rank in its whole group
  set_log_rank(rank, size);
  return group;
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::create_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                               int size, const std::string& store_host,
                                                               const ProcessGroupOptions& options, GroupRole role,
                                                               int process_rank) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw InvalidArgumentError(str_cat("ProcessGroup: rank ", rank, " is outside [0, ", size, ")"));
  }
  const GroupSettings settings = resolve_settings(options, kDefaultTimeout);
  std::shared_ptr<ProcessGroup> whole(
      new ProcessGroup(std::make_unique<Impl>(rank, size, settings.name, settings.timeout)));
  Impl* group = whole->impl_.get();
  const std::string prefix = group->context_prefix();
  if (const size_t capacity = FlightRecorder::capacity_from_environment(); capacity > 0) {
    group->recorder_ = FlightRecorder::create(settings.name, rank, size, process_rank, capacity);
  }
  GroupMesh mesh = connect_mesh(store, rank, size, store_host, settings, prefix);
  const GroupAgreement agreement = agree_on_group(mesh, settings, prefix);
  group->allreduce_piece_bytes_ = agreement.allreduce_piece_bytes;
  HostPlan plan = plan_paths(mesh, rank, size, settings, role, prefix);
  // Only a group that sends everything over Gloo: where shared memory carries the collectives,
  // the lane would only hold sockets open (a hierarchical group's cross-host part has its own).
  std::unique_ptr<SyncLane> lane = agreement.sync_lane && !plan.local ? connect_lane(mesh, settings, prefix) : nullptr;
  group->allreduce_algorithm_ = settings.allreduce_algorithm;
  group->store_ = store;
  group->group_store_ = mesh.store;
  group->store_host_ = store_host;
  group->scratch_ = std::make_shared<ScratchBuffer>();
  group->fingerprint_ = std::make_shared<FingerprintExchange>(std::move(lane));
  group->describe_routes(settings, plan, mesh);
  group->context_ = std::move(mesh.context);
  group->adopt_host_plan(std::move(plan), options);
  if (role == GroupRole::kWhole && size > 1 && rank == 0) {
    log_info(str_cat("group '", settings.name, "': ", group->description_.describe()));
  }
  group->queue_ = std::make_unique<OperationQueue>(
      prefix, settings.name,
      [group](Operation& op, uint32_t tag, const Work& work) { return group->execute(op, tag, work); },
      group->recorder_,
      /*dump_on_failure=*/role == GroupRole::kWhole);
  return whole;
}

void ProcessGroup::Impl::adopt_host_plan(HostPlan plan, const ProcessGroupOptions& options) {
  local_ = std::move(plan.local);
  if (!local_) return;
  // Subgroups 0 .. k-1 of this group are its cross-host parts, one per local index (every rank
  // creates them in the same order, so the user's new_group calls number on from k).
  std::vector<int> cross_host_ranks;
  for (size_t i = 0; i < plan.cross_host_groups.size(); ++i) {
    ProcessGroupOptions cross = options;
    cross.name = str_cat(name_, ".hosts", i);
    auto subgroup = new_group_in_role(plan.cross_host_groups[i], cross, GroupRole::kCrossHostPart);
    if (subgroup->is_member()) {
      cross_host_ = subgroup;
      cross_host_ranks = plan.cross_host_groups[i];
    }
  }
  if (cross_host_) {
    cross_host_link_ = std::make_unique<CrossHostSubgroup>(cross_host_.get(), cross_host_ranks, name_, rank_);
  }
  auto path = std::make_shared<SameHostPath>();
  path->local = local_.get();
  path->cross_host = cross_host_link_.get();
  path->rank = rank_;
  path->host_of_rank = std::move(plan.host_of_rank);
  path->local_index_of_rank = std::move(plan.local_index_of_rank);
  same_host_ = path;
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, ProcessGroupOptions options) {
  return impl_->new_group_in_role(ranks, std::move(options), GroupRole::kWhole);
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::new_group_in_role(const std::vector<int>& ranks,
                                                                    ProcessGroupOptions options, GroupRole role) {
  check_member(OpType::kBarrier);  // any operation: an outsider cannot create subgroups either
  std::string list;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size_ || (i > 0 && ranks[i] <= ranks[i - 1])) {
      throw InvalidArgumentError(str_cat(context_prefix(), "new_group: ranks must be increasing and in [0, ", size_,
                                         "); got rank ", ranks[i], " at position ", i));
    }
    list += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.empty()) throw InvalidArgumentError(context_prefix() + "new_group: no ranks given");
  // Every rank counts its new_group calls the same way: the count names the subgroup's keys.
  const int index = subgroups_created_++;
  if (options.name == "default") options.name = str_cat(name_, ".sub", index);
  if (!options.timeout) options.timeout = timeout_;
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) {
    std::shared_ptr<ProcessGroup> outsider(
        new ProcessGroup(std::make_unique<Impl>(rank_, size_, options.name, *options.timeout)));
    outsider->impl_->member_ = false;
    outsider->impl_->members_ = list;
    outsider->impl_->description_.name = options.name;
    outsider->impl_->description_.rank = rank_;
    outsider->impl_->description_.size = size_;
    return outsider;
  }
  auto scoped = c10::make_intrusive<c10d::PrefixStore>(str_cat("subgroup", index), store_);
  auto group = create_group(scoped, static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()), store_host_,
                            options, role, recorder_ ? recorder_->process_rank() : rank_);
  group->impl_->members_ = list;
  return group;
}

void ProcessGroup::shutdown() { impl_->shutdown(); }

void ProcessGroup::Impl::shutdown() {
  if (queue_) queue_->stop();
  if (fingerprint_) fingerprint_->release();  // its posted receives hold the sockets open
  context_.reset();
  same_host_.reset();
  local_.reset();
  if (cross_host_) cross_host_->shutdown();
}

// ---- entry points: prepare (which checks membership first), then submit (async) or run (sync) ----

std::shared_ptr<Work> ProcessGroup::allreduce_async(at::Tensor tensor, ReduceOp op, Timeout timeout) {
  Operation operation = impl_->prepare_allreduce(std::move(tensor), op, timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::broadcast_async(at::Tensor tensor, int root, Timeout timeout) {
  Operation operation = impl_->prepare_broadcast(std::move(tensor), root, timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::allgather_async(at::Tensor input, at::Tensor output, Timeout timeout) {
  Operation operation = impl_->prepare_allgather(std::move(input), std::move(output), timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::allgatherv_async(at::Tensor input, at::Tensor output, std::vector<int64_t> counts,
                                                     Timeout timeout) {
  Operation operation = impl_->prepare_allgatherv(std::move(input), std::move(output), std::move(counts), timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::barrier_async(Timeout timeout) {
  Operation operation = impl_->prepare_barrier(timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::reduce_async(at::Tensor tensor, int root, ReduceOp op, Timeout timeout) {
  Operation operation = impl_->prepare_reduce(std::move(tensor), root, op, timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::gather_async(at::Tensor input, at::Tensor output, int root, Timeout timeout) {
  Operation operation = impl_->prepare_gather(std::move(input), std::move(output), root, timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::scatter_async(at::Tensor input, at::Tensor output, int root, Timeout timeout) {
  Operation operation = impl_->prepare_scatter(std::move(input), std::move(output), root, timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(at::Tensor input, at::Tensor output, ReduceOp op,
                                                         Timeout timeout) {
  Operation operation = impl_->prepare_reduce_scatter(std::move(input), std::move(output), op, timeout);
  return impl_->queue().submit(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::alltoall_async(at::Tensor input, at::Tensor output, Timeout timeout) {
  Operation operation = impl_->prepare_alltoall(std::move(input), std::move(output), timeout);
  return impl_->queue().submit(std::move(operation));
}

void ProcessGroup::allreduce(at::Tensor tensor, ReduceOp op, Timeout timeout) {
  Operation operation = impl_->prepare_allreduce(std::move(tensor), op, timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::broadcast(at::Tensor tensor, int root, Timeout timeout) {
  Operation operation = impl_->prepare_broadcast(std::move(tensor), root, timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::allgather(at::Tensor input, at::Tensor output, Timeout timeout) {
  Operation operation = impl_->prepare_allgather(std::move(input), std::move(output), timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::allgatherv(at::Tensor input, at::Tensor output, std::vector<int64_t> counts, Timeout timeout) {
  Operation operation = impl_->prepare_allgatherv(std::move(input), std::move(output), std::move(counts), timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::barrier(Timeout timeout) {
  Operation operation = impl_->prepare_barrier(timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::reduce(at::Tensor tensor, int root, ReduceOp op, Timeout timeout) {
  Operation operation = impl_->prepare_reduce(std::move(tensor), root, op, timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::gather(at::Tensor input, at::Tensor output, int root, Timeout timeout) {
  Operation operation = impl_->prepare_gather(std::move(input), std::move(output), root, timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::scatter(at::Tensor input, at::Tensor output, int root, Timeout timeout) {
  Operation operation = impl_->prepare_scatter(std::move(input), std::move(output), root, timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, Timeout timeout) {
  Operation operation = impl_->prepare_reduce_scatter(std::move(input), std::move(output), op, timeout);
  impl_->queue().run(std::move(operation));
}
void ProcessGroup::alltoall(at::Tensor input, at::Tensor output, Timeout timeout) {
  Operation operation = impl_->prepare_alltoall(std::move(input), std::move(output), timeout);
  impl_->queue().run(std::move(operation));
}
std::shared_ptr<Work> ProcessGroup::send_async(at::Tensor tensor, int dst, uint32_t tag, Timeout timeout) {
  return impl_->send_async(std::move(tensor), dst, tag, timeout);
}
std::shared_ptr<Work> ProcessGroup::recv_async(at::Tensor tensor, int src, uint32_t tag, Timeout timeout) {
  return impl_->recv_async(std::move(tensor), src, tag, timeout);
}
void ProcessGroup::send(at::Tensor tensor, int dst, uint32_t tag, Timeout timeout) {
  send_async(std::move(tensor), dst, tag, timeout)->wait();
}
void ProcessGroup::recv(at::Tensor tensor, int src, uint32_t tag, Timeout timeout) {
  recv_async(std::move(tensor), src, tag, timeout)->wait();
}

void ProcessGroup::allreduce(void* data, int64_t count, c10::ScalarType dtype, ReduceOp op) {
  allreduce(as_tensor(data, count, dtype), op);
}
void ProcessGroup::broadcast(void* data, int64_t count, c10::ScalarType dtype, int root) {
  broadcast(as_tensor(data, count, dtype), root);
}
void ProcessGroup::allgather(void* input, void* output, int64_t count, c10::ScalarType dtype) {
  allgather(as_tensor(input, count, dtype), as_tensor(output, count * size(), dtype));
}

at::Tensor ProcessGroup::as_tensor(void* data, int64_t count, c10::ScalarType dtype) {
  if (count < 0 || (data == nullptr && count > 0)) {
    throw InvalidArgumentError(str_cat("raw buffer: ", count, " elements at ", data, " is not a buffer"));
  }
  return at::from_blob(data, {count}, at::TensorOptions().dtype(dtype));
}

// ---- checks ----

Operation ProcessGroup::Impl::begin(OpType op, Timeout timeout) const {
  check_member(op);
  queue_->check_open(op_type_name(op));
  Operation operation;
  operation.call.op = op;
  operation.timeout = timeout.value_or(timeout_);
  operation.label = ScopedOperationLabel::current();
  return operation;
}

void ProcessGroup::Impl::check_member(OpType op) const {
  if (!member_) {
    throw InvalidArgumentError(str_cat("[rank ", rank_, "] ", op_type_name(op),
                                       ": this rank is not a member of group '", name_, "' (ranks ", members_,
                                       "); only they may call into it"));
  }
}

void ProcessGroup::Impl::check_root(OpType op, int root) const {
  if (root < 0 || root >= size_) {
    throw InvalidArgumentError(
        str_cat(context_prefix(), op_type_name(op), ": root rank ", root, " is outside [0, ", size_, ")"));
  }
}

void ProcessGroup::Impl::check_reduce_op(OpType op, ReduceOp reduce, const at::Tensor& t) const {
  if (reduce == ReduceOp::kAvg && !at::isFloatingType(t.scalar_type())) {
    throw InvalidArgumentError(
        str_cat(context_prefix(), op_type_name(op), ": avg of ", dtype_name(t), " is not defined; use sum and divide"));
  }
}

void ProcessGroup::Impl::check_peer(OpType op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw InvalidArgumentError(str_cat(context_prefix(), op_type_name(op), ": peer rank ", peer, " must be in [0, ",
                                       size_, ") and not this rank (", rank_, ")"));
  }
}

// ---- execution ----

OperationQueue::Outcome ProcessGroup::Impl::execute(Operation& op, uint32_t tag, const Work& work) {
  const std::string& description = work.description();
  try {
    if (!op.run_checks_call && size_ > 1) {
      fingerprint_->exchange(*context_, CallFingerprint{tag, op.call}, nullptr, 0,
                             std::chrono::steady_clock::now() + op.timeout);
    }
    op.run(tag);
    op.staging.copy_back();
    return {};
  } catch (const Error& e) {
    // ringtorch's own failures (shared memory, the direct all-reduce, CUDA staging, a cross-host
    // subgroup) arrive typed; their kind decides whether the group is still usable.
    const bool breaks = e.kind() == ErrorKind::kTimeout || e.kind() == ErrorKind::kPeerLost;
    if (!e.site().operation.empty()) return {std::current_exception(), breaks};  // already in context
    const FailureSite site{rank_, e.site().peer, description};
    if (breaks) return {operation_failure(e.kind(), description, e.what(), "", op.timeout, site), true};
    return {make_error(e.kind(), description + ": " + e.what(), site), false};
  } catch (const std::exception& e) {
    // Gloo's own algorithms and pairs: read what Gloo says, then ask the store who is to blame.
    const GlooFailure failure = read_gloo_failure(e.what());
    const FailedPeer peer = name_failed_peer(group_store_, rank_, size_, failure.peer_address, description,
                                             std::min(op.timeout, kRollCallWindow));
    return {operation_failure(failure.kind, description, e.what(), peer.clause, op.timeout,
                              FailureSite{rank_, peer.rank, description}),
            true};
  }
}

}  // namespace ringtorch
