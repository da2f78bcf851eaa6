// ProcessGroup: collectives over Gloo among the ranks of one rendezvous (ARCHITECTURE
// decision 3). This first slice carries allreduce (sum, avg, min, max, product), broadcast,
// allgather (equal sizes) and barrier on contiguous CPU tensors of float32, float64, float16,
// bfloat16, int32, int64 and uint8.
//
//   auto rdzv = ringtorch::rendezvous();
//   auto group = ringtorch::ProcessGroup::create(rdzv);
//   group->allreduce(grad, ringtorch::ReduceOp::kAvg);          // blocks
//   auto work = group->broadcast_async(weights, /*root=*/0);    // returns at once
//   work->wait();
//
// Ordering: one worker thread runs operations in submission order; every rank must submit the
// same collectives in the same order (as with torch.distributed). Checks (contiguity, dtype,
// root) run on the caller's thread and throw InvalidArgumentError before anything is queued.
//
// Failure: every operation has a timeout (ProcessGroupOptions::timeout, default
// RINGTORCH_TIMEOUT or 300 s). A failed operation (a peer that died, stopped or never called)
// marks the group broken: its Work and every later call throw, naming the first failure. The
// tensors are in place: no copies of contiguous tensors.
//
// Thread-safety: submit from any thread. Ownership: the group owns its Gloo context, device
// and worker thread; shutdown() (or the destructor) finishes queued work and joins the thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/comm/allreduce_algorithm.h"
#include "runtime/comm/device_staging.h"
#include "runtime/comm/reduce_op.h"
#include "runtime/comm/work.h"

namespace gloo {
class Context;
}

namespace ringtorch {

class LocalCollectives;
struct SameHostPath;

struct Rendezvous;

struct ProcessGroupOptions {
  std::optional<std::chrono::milliseconds> timeout;  // else RINGTORCH_TIMEOUT, else 300 s
  std::string iface;  // network interface name or comma list; else RINGTORCH_SOCKET_IFNAME
  // "tcp" or "ibverbs" (InfiniBand/RoCE, when Gloo has it and the machine has a device; `iface`
  // then names the IB device). Default: RINGTORCH_TRANSPORT, else tcp.
  std::string transport;
  std::string name = "default";  // for messages and the key prefix of the group's context
  // Before each collective, check that every rank calls the same operation with the same count,
  // dtype, root and reduce op (one extra small allgather each). Default: RINGTORCH_DEBUG=DETAIL.
  std::optional<bool> debug_detail;
  // All-reduce (and reduce_scatter) algorithm; default: RINGTORCH_ALLREDUCE_ALGORITHM, else auto.
  std::optional<AllreduceAlgorithm> allreduce_algorithm;
  // All-reduce buffers above this many bytes run as pieces of this size (runtime/comm/chunk_plan.h).
  // Unset: 16 MiB pieces when any rank of the group sees a CUDA device (agreed when the group is
  // created), else whole buffers. When set, it must be the same on every rank.
  std::optional<size_t> allreduce_piece_bytes;
  // Ranks that share a host reduce through shared memory (docs/process_group.md, "Shared
  // memory"); default: RINGTORCH_SHM (0: off), else on. Falls back to TCP by itself. An
  // explicitly chosen all-reduce algorithm (not auto) keeps all-reduce on Gloo.
  std::optional<bool> shared_memory;
  // Names the shared-memory segment ("<run id>-<restart>-<round>"; create(rdzv) sets it), so
  // the launcher can remove what a crashed run left.
  std::string segment_tag;
  // Which host this rank is on, for grouping ranks by host; default: RINGTORCH_HOST_ID, else
  // hostname + boot id. Tests and network-namespace clusters use it to act as several hosts.
  std::string host_identity;
};

class ProcessGroup {
 public:
  // Connects the full mesh over the rendezvous' store (blocks until every rank has connected,
  // or the timeout).
  static std::shared_ptr<ProcessGroup> create(const Rendezvous& rdzv, ProcessGroupOptions options = {});
  // The same from parts: `store` is already namespaced for this group's members; `store_host`
  // is where the store lives (for choosing the network interface; empty: loopback).
  static std::shared_ptr<ProcessGroup> create(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                              const std::string& store_host, ProcessGroupOptions options = {});
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

  std::shared_ptr<Work> allreduce_async(at::Tensor tensor, ReduceOp op = ReduceOp::kSum,
                                        std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  std::shared_ptr<Work> broadcast_async(at::Tensor tensor, int root,
                                        std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // `output` holds size() * input.numel() elements of input's dtype, rank r's block at r.
  std::shared_ptr<Work> allgather_async(at::Tensor input, at::Tensor output,
                                        std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Unequal sizes: rank r contributes counts[r] elements (input.numel() == counts[rank()]);
  // `output` holds their sum, rank r's block after those of ranks 0..r-1.
  std::shared_ptr<Work> allgatherv_async(at::Tensor input, at::Tensor output, std::vector<int64_t> counts,
                                         std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  std::shared_ptr<Work> barrier_async(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // The result lands in `tensor` on `root`; other ranks' tensors are scratch afterwards.
  std::shared_ptr<Work> reduce_async(at::Tensor tensor, int root, ReduceOp op = ReduceOp::kSum,
                                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // `output` (root only; ignored elsewhere, may be undefined) holds size() * input.numel() elements.
  std::shared_ptr<Work> gather_async(at::Tensor input, at::Tensor output, int root,
                                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // `input` (root only) holds size() * output.numel() elements; rank r receives block r.
  std::shared_ptr<Work> scatter_async(at::Tensor input, at::Tensor output, int root,
                                      std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // `input` holds size() * output.numel() elements; rank r receives the reduction of block r.
  // Costs one temporary copy of `input` (Gloo reduces the whole buffer, then r's block is kept).
  std::shared_ptr<Work> reduce_scatter_async(at::Tensor input, at::Tensor output, ReduceOp op = ReduceOp::kSum,
                                             std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Both hold size() * n elements; block j of rank r's input lands in block r of rank j's output.
  std::shared_ptr<Work> alltoall_async(at::Tensor input, at::Tensor output,
                                       std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Point to point, outside the collective order: posted at once on the caller's thread (so a
  // send and a recv may be outstanding in both directions), completed by Work::wait(). The
  // receiver names the sender and the same tag.
  std::shared_ptr<Work> send_async(at::Tensor tensor, int dst, uint32_t tag = 0,
                                   std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  std::shared_ptr<Work> recv_async(at::Tensor tensor, int src, uint32_t tag = 0,
                                   std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // Synchronous forms. `timeout` overrides the group's for this call. When nothing is queued
  // ahead, the operation runs on the caller's thread: no hand-off to the worker and back, which
  // is most of the cost of a small collective on a busy machine. Otherwise it waits its turn.
  void allreduce(at::Tensor tensor, ReduceOp op = ReduceOp::kSum,
                 std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return allreduce_async(tensor, op, timeout); });
  }
  void broadcast(at::Tensor tensor, int root, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return broadcast_async(tensor, root, timeout); });
  }
  void allgather(at::Tensor input, at::Tensor output, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return allgather_async(input, output, timeout); });
  }
  void allgatherv(at::Tensor input, at::Tensor output, std::vector<int64_t> counts,
                  std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return allgatherv_async(input, output, std::move(counts), timeout); });
  }
  void barrier(std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return barrier_async(timeout); });
  }

  // Raw buffers: `count` elements of `dtype` at `data`, used in place (no copy). The caller
  // keeps the memory alive until the call returns.
  void allreduce(void* data, int64_t count, c10::ScalarType dtype, ReduceOp op = ReduceOp::kSum) {
    allreduce(as_tensor(data, count, dtype), op);
  }
  void broadcast(void* data, int64_t count, c10::ScalarType dtype, int root) {
    broadcast(as_tensor(data, count, dtype), root);
  }
  void allgather(void* input, void* output, int64_t count, c10::ScalarType dtype) {
    allgather(as_tensor(input, count, dtype), as_tensor(output, count * size_, dtype));
  }
  // A 1-d tensor over caller-owned memory (at::from_blob: no copy, no ownership).
  static at::Tensor as_tensor(void* data, int64_t count, c10::ScalarType dtype);
  void reduce(at::Tensor tensor, int root, ReduceOp op = ReduceOp::kSum,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return reduce_async(tensor, root, op, timeout); });
  }
  void gather(at::Tensor input, at::Tensor output, int root,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return gather_async(input, output, root, timeout); });
  }
  void scatter(at::Tensor input, at::Tensor output, int root,
               std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return scatter_async(input, output, root, timeout); });
  }
  void reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op = ReduceOp::kSum,
                      std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return reduce_scatter_async(input, output, op, timeout); });
  }
  void alltoall(at::Tensor input, at::Tensor output, std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    run_sync([&] { return alltoall_async(input, output, timeout); });
  }
  void send(at::Tensor tensor, int dst, uint32_t tag = 0,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    send_async(tensor, dst, tag, timeout)->wait();
  }
  void recv(at::Tensor tensor, int src, uint32_t tag = 0,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
    recv_async(tensor, src, tag, timeout)->wait();
  }

  // Runs what is queued, then stops the worker and releases the sockets. Idempotent.
  void shutdown();

  // A subgroup of `ranks` (ranks of this group), as torch.distributed.new_group: every rank of
  // this group must call it, in the same order relative to other new_group calls, with the same
  // list. Members get a connected group (their rank is their index in `ranks`); the others get
  // a group whose every operation throws InvalidArgumentError naming the group and its ranks.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, ProcessGroupOptions options = {});
  bool is_member() const { return member_; }

 private:
  ProcessGroup(int rank, int size, std::string name, std::chrono::milliseconds timeout);
  void check_member(const char* op) const;
  // What every rank must agree on for one collective; compared across ranks in DETAIL mode.
  struct CallSignature {
    std::string op;
    int64_t count = 0;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    int root = -1;
    ReduceOp reduce = ReduceOp::kSum;
  };
  // Submits through `submit_async` (one of the *_async calls) with the worker's wake-up
  // deferred, then runs the operation here if it is first in line and nothing is running.
  void run_sync(const std::function<std::shared_ptr<Work>()>& submit_async);
  // Queues `run` (executed with the operation's tag, on the worker thread or by run_sync) under a new Work.
  // `staging` holds the host copies of CUDA tensors (device_staging.h); its copy back runs
  // after `run`, before the Work completes.
  std::shared_ptr<Work> submit(const CallSignature& call, const std::string& detail, std::vector<at::Tensor> tensors,
                               std::chrono::milliseconds timeout, std::function<void(uint32_t tag)> run,
                               DeviceStaging staging = {});
  // DETAIL mode: all ranks exchange their call signatures; throws MismatchError naming the ranks
  // that differ. Runs on the worker thread, before the collective itself.
  void check_signatures_agree(const CallSignature& call, const std::string& description, uint32_t tag);
  void worker_loop();
  std::string context_prefix() const;  // "[rank 0/2] "
  void check_root(const char* op, int root) const;
  // avg is sum-then-divide: defined for floating dtypes only.
  void check_reduce_op(const char* op, ReduceOp reduce, const at::Tensor& t) const;
  std::shared_ptr<Work> post_point_to_point(bool sending, at::Tensor tensor, int peer, uint32_t tag,
                                            std::optional<std::chrono::milliseconds> call_timeout);
  void check_peer(const char* op, int peer) const;
  // Turns a Gloo exception into TimeoutError / PeerLostError with the operation's context and
  // `peer` (which rank is to blame, when known: failure_report.h).
  static std::exception_ptr classify_failure(const std::string& description, const std::exception& e,
                                             std::chrono::milliseconds timeout, const std::string& peer = "");

  const int rank_;
  const int size_;
  const std::string name_;
  const std::chrono::milliseconds timeout_;
  std::string network_;  // constant after create()
  std::string path_;     // constant after create()
  // Constant after create(): the same-host segment (null: TCP only), (several hosts) the group
  // of ranks with this rank's local index on the other hosts, and the collectives over both
  // (runtime/comm/shm/same_host_path.h; null: TCP only).
  std::unique_ptr<LocalCollectives> local_;
  std::shared_ptr<ProcessGroup> cross_host_;
  std::shared_ptr<const SameHostPath> same_host_;
  bool member_ = true;                           // constant after create(); false: this rank is outside the subgroup
  std::string members_;                          // constant after create(); "0, 2" for messages
  c10::intrusive_ptr<c10d::Store> store_;        // constant after create(); subgroups prefix it
  c10::intrusive_ptr<c10d::Store> group_store_;  // constant after create(): store_ under "gloo/<name>/"
  std::string store_host_;                       // constant after create()
  std::atomic<int> subgroups_created_{0};
  std::shared_ptr<gloo::Context> context_;  // constant after create(); used by the worker only

  struct Task {
    std::shared_ptr<Work> work;
    std::function<void(uint32_t)> run;
    uint32_t tag;
    CallSignature call;
    std::chrono::milliseconds timeout;
  };
  // Runs one dequeued task and completes its Work; a transport failure breaks the group.
  void execute(Task& task);
  bool detail_ = false;  // constant after create(): RINGTORCH_DEBUG=DETAIL
  // Constant after create(): RINGTORCH_ALLREDUCE_ALGORITHM; auto chooses by size (allreduce_algorithm.h).
  AllreduceAlgorithm allreduce_algorithm_ = AllreduceAlgorithm::kAuto;
  size_t allreduce_piece_bytes_ = SIZE_MAX;  // constant after create(); SIZE_MAX: whole buffers
  // Receive memory of the direct all-reduce; used by whichever thread runs the current task.
  std::shared_ptr<ScratchBuffer> scratch_ = std::make_shared<ScratchBuffer>();
  std::mutex mutex_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_;      // guarded by mutex_
  bool running_ = false;        // guarded by mutex_: a task is executing (worker or run_sync)
  bool stopping_ = false;       // guarded by mutex_
  uint32_t next_sequence_ = 0;  // guarded by mutex_
  std::exception_ptr broken_;   // guarded by mutex_: the first failure; later calls rethrow it
  std::thread worker_;
};

}  // namespace ringtorch
