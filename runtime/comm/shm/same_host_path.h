// The collectives of a group whose ranks share hosts (host_plan.h decided it): shared memory
// within each host and, across several hosts, Gloo among the ranks that hold the same local
// index on every host (the `cross_host` subgroup). With one host, Gloo is not involved.
//
//   allreduce       local reduce of block i (rank i) -> cross-host all-reduce of block i -> local copy-out
//   broadcast       the root's local-index ranks broadcast across hosts -> each host broadcasts locally
//   allgather       local allgather -> local index 0 gathers across hosts -> local broadcast
//   reduce_scatter  one host: in the segment; several: a hierarchical all-reduce of a copy, keep own block
//   barrier         local barrier -> cross-host barrier -> local barrier
//
// Results are identical on every rank (each byte has one writer). Floating-point sums reduce in
// local-rank order within a host, then in Gloo's order across hosts (docs/process_group.md).
// avg is left to the caller (sum, then one division by the group size).
//
// The cross-host part is reached through CrossHostLink, which the process group implements with
// a subgroup of its own: this path knows nothing of ProcessGroup.
//
// Thread-safety: the group's executing thread only. Ownership: the ProcessGroup owns it and
// everything it points to.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <vector>

#include <ringtorch/reduce_op.h>

#include "runtime/comm/reduce_kernels.h"

namespace ringtorch {

class LocalCollectives;

// Synchronous collectives among the ranks that hold this rank's local index on every host
// (one rank per host), ranked in host order. Each call blocks until done or throws.
class CrossHostLink {
 public:
  virtual ~CrossHostLink() = default;
  virtual void allreduce(const at::Tensor& tensor, ReduceOp op, std::chrono::milliseconds timeout) = 0;
  virtual void broadcast(const at::Tensor& tensor, int root_host, std::chrono::milliseconds timeout) = 0;
  virtual void allgather(const at::Tensor& input, const at::Tensor& output, std::chrono::milliseconds timeout) = 0;
  virtual void barrier(std::chrono::milliseconds timeout) = 0;
};

struct SameHostPath {
  LocalCollectives* local = nullptr;    // never null once built
  CrossHostLink* cross_host = nullptr;  // null: every rank on one host
  int rank = 0;
  std::vector<int> host_of_rank, local_index_of_rank;  // per group rank (host_plan.h)

  void allreduce(const at::Tensor& tensor, ReduceOp op, const ReduceFunction& reduce,
                 std::chrono::milliseconds timeout) const;
  void broadcast(const at::Tensor& tensor, int root, std::chrono::milliseconds timeout) const;
  void allgather(const at::Tensor& input, const at::Tensor& output, std::chrono::milliseconds timeout) const;
  void reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op, const ReduceFunction& reduce,
                      std::chrono::milliseconds timeout) const;
  void barrier(std::chrono::milliseconds timeout) const;
};

}  // namespace ringtorch
