// ProcessGroup's implementation (process_group.h holds the API users see; this header stays in
// the source tree). Three parts, one job each: the front end (process_group.cc, collectives*.cc,
// point_to_point.cc: argument checks, staging, and one prepare_* per collective that returns an
// Operation), the operation queue (operation_queue.h) and the set-up (group_setup.h).
//
// Thread-safety and ownership: as ProcessGroup's (process_group.h). Members are constant after
// create() unless marked otherwise.
#pragma once

#include <gloo/context.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ringtorch/process_group.h>

#include "runtime/comm/group_setup.h"
#include "runtime/comm/operation_queue.h"

namespace ringtorch {

class LocalCollectives;
class ScratchBuffer;
class FingerprintExchange;
struct SameHostPath;

class ProcessGroup::Impl {
 public:
  using Timeout = ProcessGroup::Timeout;

  Impl(int rank, int size, std::string name, std::chrono::milliseconds timeout);
  ~Impl();

  // `process_rank`: this process' rank in its whole group (names its flight-recorder file).
  static std::shared_ptr<ProcessGroup> create_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    const std::string& store_host, const ProcessGroupOptions& options,
                                                    GroupRole role, int process_rank);
  std::shared_ptr<ProcessGroup> new_group_in_role(const std::vector<int>& ranks, ProcessGroupOptions options,
                                                  GroupRole role);
  void shutdown();

  // Each collective, prepared on the caller's thread: checks, staging of CUDA tensors, the
  // call signature, and the closure the queue runs (collectives.cc, collectives_rooted.cc).
  // The _async and synchronous forms differ only in how they hand it to the queue.
  Operation prepare_allreduce(at::Tensor tensor, ReduceOp op, Timeout timeout);
  Operation prepare_broadcast(at::Tensor tensor, int root, Timeout timeout);
  Operation prepare_allgather(at::Tensor input, at::Tensor output, Timeout timeout);
  Operation prepare_allgatherv(at::Tensor input, at::Tensor output, std::vector<int64_t> counts, Timeout timeout);
  Operation prepare_barrier(Timeout timeout);
  Operation prepare_reduce(at::Tensor tensor, int root, ReduceOp op, Timeout timeout);
  Operation prepare_gather(at::Tensor input, at::Tensor output, int root, Timeout timeout);
  Operation prepare_scatter(at::Tensor input, at::Tensor output, int root, Timeout timeout);
  Operation prepare_reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, Timeout timeout);
  Operation prepare_alltoall(at::Tensor input, at::Tensor output, Timeout timeout);

  // Point to point (point_to_point.cc), outside the queue.
  std::shared_ptr<Work> send_async(at::Tensor tensor, int dst, uint32_t tag, Timeout timeout);
  std::shared_ptr<Work> recv_async(at::Tensor tensor, int src, uint32_t tag, Timeout timeout);

  OperationQueue& queue() { return *queue_; }
  // ProcessGroup::store(): the store under "shared/" (members only).
  c10::intrusive_ptr<c10d::Store> shared_store() const;

  // Constant after construction.
  const int rank_;
  const int size_;
  const std::string context_prefix_;  // "[rank 0/2] ", made once: every call passes it to its checks
  const std::string name_;
  const std::chrono::milliseconds timeout_;
  // Constant after create().
  bool member_ = true;   // false: this rank is outside the subgroup
  std::string members_;  // "0, 2" for messages
  GroupDescription description_;

 private:
  class CrossHostSubgroup;

  // Builds the same-host path (and its cross-host subgroups) from the plan.
  void adopt_host_plan(HostPlan plan, const ProcessGroupOptions& options);
  // What description() says, from the settings and what creation decided.
  void describe_routes(const GroupSettings& settings, const HostPlan& plan, const GroupMesh& mesh);

  // The steps every collective starts with: membership, an open queue, the call's timeout.
  Operation begin(OpType op, Timeout timeout) const;
  // The queue's executor: the call fingerprint (unless the operation checks its call itself),
  // the operation, the copy back; turns failures into TimeoutError / PeerLostError /
  // MismatchError with this operation's context.
  OperationQueue::Outcome execute(Operation& op, uint32_t tag, const Work& work);

  std::shared_ptr<Work> post_point_to_point(bool sending, const at::Tensor& tensor, int peer, uint32_t tag,
                                            Timeout timeout);
  // k of Note [Point-to-point header]: this rank's sends (or recvs) to (from) `peer` on `tag` so far.
  uint32_t next_point_to_point_number(bool sending, int peer, uint32_t tag);

  const std::string& context_prefix() const { return context_prefix_; }
  // The flight recorder's name for the same-host path: "hierarchical" or "shared memory".
  const char* same_host_path_name() const { return cross_host_ ? "hierarchical" : "shared memory"; }
  void check_member(OpType op) const;
  void check_root(OpType op, int root) const;
  void check_peer(OpType op, int peer) const;
  // avg is sum-then-divide: defined for floating dtypes only.
  void check_reduce_op(OpType op, ReduceOp reduce, const at::Tensor& t) const;

  AllreduceAlgorithm allreduce_algorithm_ = AllreduceAlgorithm::kAuto;  // auto: by size (allreduce_algorithm.h)
  size_t allreduce_piece_bytes_ = SIZE_MAX;                             // SIZE_MAX: whole buffers
  c10::intrusive_ptr<c10d::Store> store_;                               // subgroups prefix it
  c10::intrusive_ptr<c10d::Store> group_store_;                         // store_ under "gloo/<name>/"
  std::string store_host_;
  std::shared_ptr<gloo::Context> context_;  // used by the executing thread (and send/recv)
  // The same-host segment (null: TCP only), (several hosts) the group of ranks with this rank's
  // local index on the other hosts, and the collectives over both (null: TCP only).
  std::unique_ptr<LocalCollectives> local_;
  std::shared_ptr<ProcessGroup> cross_host_;
  std::unique_ptr<CrossHostSubgroup> cross_host_link_;
  std::shared_ptr<const SameHostPath> same_host_;
  // Receive memory of the direct all-reduce, and the call fingerprints' exchange; used by
  // whichever thread runs the current operation.
  std::shared_ptr<ScratchBuffer> scratch_;
  std::shared_ptr<FingerprintExchange> fingerprint_;
  std::shared_ptr<FlightRecorder> recorder_;  // null for a non-member or with RINGTORCH_FLIGHT_RECORDER_SIZE=0
  std::unique_ptr<OperationQueue> queue_;     // null for a non-member

  std::atomic<int> subgroups_created_{0};  // new_group calls so far: names each subgroup's keys
  // Messages posted per (peer, tag), each direction (point_to_point.cc); guarded by the mutex.
  std::mutex point_to_point_mutex_;
  std::map<std::pair<int, uint32_t>, uint32_t> sends_posted_, recvs_posted_;
};

}  // namespace ringtorch
