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
// tensors travel through pinned host memory. description() says which, per operation.
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
// Thread-safety: submit from any thread. Ownership: the group owns its connections (Gloo's and,
// over TCP alone, its synchronous lane), its shared-memory segment, its cross-host subgroup and
// its worker thread; shutdown() (or the destructor) finishes queued work, joins the thread and
// releases the sockets.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include <ringtorch/process_group_options.h>
#include <ringtorch/reduce_op.h>
#include <ringtorch/work.h>

namespace ringtorch {

struct Rendezvous;

// How a group moves data, decided once when it was created (ProcessGroup::description()).
struct GroupDescription {
  // Where an operation's data goes.
  enum class Route {
    kNone,          // a group of one rank: nothing to exchange
    kSharedMemory,  // every rank on one host, through one shared-memory segment
    kHierarchical,  // shared memory within each host, Gloo between the hosts
    kGloo,          // Gloo's connections (TCP or ibverbs)
  };
  std::string name;  // the group's ("default", "default.sub0", ...)
  int rank = 0, size = 1;
  int hosts = 1;  // hosts the ranks are on
  // Per operation, by torch.distributed's name: allreduce, broadcast, allgather, allgatherv,
  // barrier, reduce, gather, scatter, reduce_scatter, alltoall, send, recv.
  std::map<std::string, Route> routes;
  // Why the collectives take their route, in words: "all 2 ranks on host h1", "shared memory is
  // off (RINGTORCH_SHM=0)", "shared memory failed at rank 1: ...", ...
  std::string reason;
  std::string transport;   // "tcp" or "ibverbs"
  std::string network;     // which interface, and why
  bool sync_lane = false;  // fingerprints and small collectives on the synchronous lane
  AllreduceAlgorithm allreduce_algorithm = AllreduceAlgorithm::kAuto;  // kAuto: chosen per call
  size_t allreduce_piece_bytes = SIZE_MAX;                             // SIZE_MAX: whole buffers

  // routes.at(operation); InvalidArgumentError for a name that is no operation.
  Route route(const std::string& operation) const;
  // One line for people, as rank 0 prints it at creation: "shared memory: all 2 ranks on host
  // h1 (...)", "Gloo over TCP: no two ranks share a host (2 hosts); ...".
  std::string describe() const;
};

const char* route_name(GroupDescription::Route route);  // "none", "shared memory", "hierarchical", "Gloo"

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

  int rank() const;
  int size() const;
  std::chrono::milliseconds timeout() const;
  const std::string& name() const;
  // How the group moves data (routes per operation, hosts, network, algorithms); rank 0 logs
  // description().describe() once at creation.
  const GroupDescription& description() const;

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
  bool is_member() const;

  // The store the group was made over, under the prefix "shared/": for small coordination
  // between its ranks beside the collectives (BatchClaims' counters), with keys of the caller's
  // choosing; the group's own keys live elsewhere in it. Its calls block on the store's host,
  // with the store's own timeout. Thread-safe as the store is (c10d's and ringtorch's are). Each
  // subgroup has its own; on a rank that is not a member it throws InvalidArgumentError.
  c10::intrusive_ptr<c10d::Store> store() const;

 private:
  class Impl;  // runtime/comm/process_group_impl.h

  explicit ProcessGroup(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtorch
