// ProcessGroup: collectives among the ranks of one rendezvous (ARCHITECTURE decision 3), as
// torch.distributed's ProcessGroup. It carries allreduce (sum, avg, min, max, product),
// broadcast, allgather, allgatherv, reduce, gather, scatter, reduce_scatter, alltoall, barrier
// and send/recv, on contiguous CPU or CUDA tensors of float32, float64, float16, bfloat16,
// int32, int64 and uint8, and subgroups (new_group).
//
// Example (given: at::Tensor grad, at::Tensor weights):
//   auto rdzv = ringtorch::rendezvous();
//   auto group = ringtorch::ProcessGroup::create(rdzv);
//   group->allreduce(grad, ringtorch::ReduceOp::kAvg);          // blocks
//   auto work = group->broadcast_async(weights, /*root=*/0);    // returns at once
//   work->wait();
//
// Paths: ranks on one host exchange through shared memory (runtime/comm/shm); ranks on
// different hosts through Gloo (TCP or ibverbs); both at once is the hierarchical path. CUDA
// tensors travel through pinned host memory (device_staging.h, runtime/cuda). path() says which.
//
// Ordering: operations run one at a time in submission order (operation_queue.h); every rank
// must submit the same collectives in the same order (as with torch.distributed). send/recv
// are outside that order. Checks (contiguity, dtype, root, sizes) run on the caller's thread
// and throw InvalidArgumentError before anything is queued.
//
// Failure: every operation has a timeout (ProcessGroupOptions::timeout). A peer that died,
// stopped or never called makes the operation fail with TimeoutError or PeerLostError (rank,
// peer and operation in the error's FailureSite) and breaks the group: every later call
// throws that first failure; recreate the group. A MismatchError (ranks called different
// collectives, or in a different order: every collective is checked first, see Note [Call
// fingerprint] in call_fingerprint.h) and argument errors fail their own operation only. A failed send/recv fails its
// own Work only.
//
// Memory: CPU tensors are used in place; reduce_scatter works on a temporary copy of its input
// (except within one host's shared memory), the hierarchical allgather on host-sized scratch,
// and CUDA tensors on pinned host copies.
//
// Thread-safety: submit from any thread. Ownership: the group owns its Gloo context (and, over
// TCP alone, a second one of synchronous pairs: runtime/comm/sync_lane.h), its shared-memory
// segment, its cross-host subgroup and its worker thread; shutdown() (or the destructor)
// finishes queued work, joins the thread and releases the sockets.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>
#include <vector>

#include "runtime/comm/group_setup.h"
#include "runtime/comm/operation_queue.h"
#include "runtime/comm/process_group_options.h"
#include "runtime/comm/reduce_op.h"
#include "runtime/comm/work.h"

namespace gloo {
class Context;
}

namespace ringtorch {

class LocalCollectives;
class ScratchBuffer;
class FingerprintExchange;
struct SameHostPath;
struct Rendezvous;

class ProcessGroup {
 public:
  using Timeout = std::optional<std::chrono::milliseconds>;  // a call's own timeout; unset: the group's

  // Connects the full mesh over the rendezvous' store (blocks until every rank has connected,
  // or the timeout).
  static std::shared_ptr<ProcessGroup> create(const Rendezvous& rdzv, ProcessGroupOptions options = {});
  // The same from parts: `store` is already namespaced for this group's members; `store_host`
  // is where the store lives (for choosing the network interface; empty: loopback).
  static std::shared_ptr<ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              const std::string& store_host, const ProcessGroupOptions& options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& network() const { return network_; }  // which interface, and why
  // Which path the collectives take, and why ("shared memory: all 2 ranks on host ...",
  // "Gloo over TCP: no two ranks share a host ..."); rank 0 prints it once at creation.
  const std::string& path() const { return path_; }

  // Asynchronous forms: return at once; Work::wait() completes them.
  std::shared_ptr<Work> allreduce_async(at::Tensor tensor, ReduceOp op = ReduceOp::kSum, Timeout timeout = {});
  std::shared_ptr<Work> broadcast_async(at::Tensor tensor, int root, Timeout timeout = {});
  // `output` holds size() * input.numel() elements of input's dtype, rank r's block at r.
  std::shared_ptr<Work> allgather_async(at::Tensor input, at::Tensor output, Timeout timeout = {});
  // Unequal sizes: rank r contributes counts[r] elements (input.numel() == counts[rank()]);
  // `output` holds their sum, rank r's block after those of ranks 0..r-1.
  std::shared_ptr<Work> allgatherv_async(at::Tensor input, at::Tensor output, std::vector<int64_t> counts,
                                         Timeout timeout = {});
  std::shared_ptr<Work> barrier_async(Timeout timeout = {});
  // The result lands in `tensor` on `root`; other ranks' tensors are scratch afterwards.
  std::shared_ptr<Work> reduce_async(at::Tensor tensor, int root, ReduceOp op = ReduceOp::kSum, Timeout timeout = {});
  // `output` (root only; ignored elsewhere, may be undefined) holds size() * input.numel() elements.
  std::shared_ptr<Work> gather_async(at::Tensor input, at::Tensor output, int root, Timeout timeout = {});
  // `input` (root only) holds size() * output.numel() elements; rank r receives block r.
  std::shared_ptr<Work> scatter_async(at::Tensor input, at::Tensor output, int root, Timeout timeout = {});
  // `input` holds size() * output.numel() elements; rank r receives the reduction of block r.
  std::shared_ptr<Work> reduce_scatter_async(at::Tensor input, at::Tensor output, ReduceOp op = ReduceOp::kSum,
                                             Timeout timeout = {});
  // Both hold size() * n elements; block j of rank r's input lands in block r of rank j's output.
  std::shared_ptr<Work> alltoall_async(at::Tensor input, at::Tensor output, Timeout timeout = {});
  // Point to point, outside the collective order: posted at once on the caller's thread (so a
  // send and a recv may be outstanding in both directions), completed by Work::wait(). The
  // receiver names the sender and the same tag.
  std::shared_ptr<Work> send_async(at::Tensor tensor, int dst, uint32_t tag = 0, Timeout timeout = {});
  std::shared_ptr<Work> recv_async(at::Tensor tensor, int src, uint32_t tag = 0, Timeout timeout = {});

  // Synchronous forms. `timeout` overrides the group's for this call. When nothing is queued
  // ahead, the operation runs on the caller's thread (operation_queue.h); otherwise it waits
  // its turn.
  void allreduce(at::Tensor tensor, ReduceOp op = ReduceOp::kSum, Timeout timeout = {});
  void broadcast(at::Tensor tensor, int root, Timeout timeout = {});
  void allgather(at::Tensor input, at::Tensor output, Timeout timeout = {});
  void allgatherv(at::Tensor input, at::Tensor output, std::vector<int64_t> counts, Timeout timeout = {});
  void barrier(Timeout timeout = {});
  void reduce(at::Tensor tensor, int root, ReduceOp op = ReduceOp::kSum, Timeout timeout = {});
  void gather(at::Tensor input, at::Tensor output, int root, Timeout timeout = {});
  void scatter(at::Tensor input, at::Tensor output, int root, Timeout timeout = {});
  void reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op = ReduceOp::kSum, Timeout timeout = {});
  void alltoall(at::Tensor input, at::Tensor output, Timeout timeout = {});
  void send(at::Tensor tensor, int dst, uint32_t tag = 0, Timeout timeout = {});
  void recv(at::Tensor tensor, int src, uint32_t tag = 0, Timeout timeout = {});

  // Raw buffers: `count` elements of `dtype` at `data`, used in place (no copy). The caller
  // keeps the memory alive until the call returns.
  void allreduce(void* data, int64_t count, c10::ScalarType dtype, ReduceOp op = ReduceOp::kSum);
  void broadcast(void* data, int64_t count, c10::ScalarType dtype, int root);
  void allgather(void* input, void* output, int64_t count, c10::ScalarType dtype);
  // A 1-d tensor over caller-owned memory (at::from_blob: no copy, no ownership).
  static at::Tensor as_tensor(void* data, int64_t count, c10::ScalarType dtype);

  // Runs what is queued, then stops the worker and releases the sockets and the shared memory.
  // Idempotent; every later call throws InvalidArgumentError. It does not wait for the other
  // ranks: a program that hosts the store (rank 0 with tcp:// or env://) calls
  // ringtorch::leave_barrier() (rendezvous/join.h) before exiting.
  void shutdown();

  // A subgroup of `ranks` (ranks of this group, strictly increasing), as
  // torch.distributed.new_group: every rank of this group must call it, in the same order
  // relative to other new_group calls, with the same list. Members get a connected group (their
  // rank is their index in `ranks`); the others get a group whose every operation throws
  // InvalidArgumentError naming the group and its ranks.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, ProcessGroupOptions options = {});
  bool is_member() const { return member_; }

 private:
  class CrossHostSubgroup;

  ProcessGroup(int rank, int size, std::string name, std::chrono::milliseconds timeout);
  // `process_rank`: this process' rank in its whole group (names its flight-recorder file).
  static std::shared_ptr<ProcessGroup> create_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    const std::string& store_host, const ProcessGroupOptions& options,
                                                    GroupRole role, int process_rank);
  std::shared_ptr<ProcessGroup> new_group_in_role(const std::vector<int>& ranks, ProcessGroupOptions options,
                                                  GroupRole role);
  // Builds the same-host path (and its cross-host subgroups) from the plan.
  void adopt_host_plan(HostPlan plan, const ProcessGroupOptions& options);

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

  // "[rank 0/2] ", made once: every call passes it to its checks.
  const std::string& context_prefix() const { return context_prefix_; }
  // The flight recorder's name for the same-host path: "hierarchical" or "shared memory".
  const char* same_host_path_name() const { return cross_host_ ? "hierarchical" : "shared memory"; }
  void check_member(OpType op) const;
  void check_root(OpType op, int root) const;
  void check_peer(OpType op, int peer) const;
  // avg is sum-then-divide: defined for floating dtypes only.
  void check_reduce_op(OpType op, ReduceOp reduce, const at::Tensor& t) const;

  // Constant after construction.
  const int rank_;
  const int size_;
  const std::string context_prefix_;
  const std::string name_;
  const std::chrono::milliseconds timeout_;
  // Constant after create().
  bool member_ = true;   // false: this rank is outside the subgroup
  std::string members_;  // "0, 2" for messages
  std::string network_;
  std::string path_;
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
