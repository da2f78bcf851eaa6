#include "runtime/comm/shm/same_host_path.h"

#include <ATen/ATen.h>

#include <functional>

#include "runtime/comm/shm/local_collectives.h"

namespace ringtorch {
namespace {

CallSignature call_of(OpType op, const at::Tensor& t, int root = -1, ReduceOp reduce = ReduceOp::kSum) {
  return CallSignature{op, t.numel(), t.scalar_type(), root, reduce};
}

}  // namespace

void SameHostPath::allreduce(const at::Tensor& tensor, ReduceOp op, const ReduceFunction& reduce,
                             std::chrono::milliseconds timeout) const {
  const auto dtype = tensor.scalar_type();
  std::function<void(void*, size_t)> between_hosts;
  if (cross_host) {
    // Avg divides once, at the end: across hosts the blocks are summed.
    const ReduceOp cross_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    CrossHostLink* cross = cross_host;
    between_hosts = [=](void* block, size_t count) {
      cross->allreduce(at::from_blob(block, {static_cast<int64_t>(count)}, at::TensorOptions().dtype(dtype)), cross_op,
                       timeout);
    };
  }
  local->allreduce(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), tensor.element_size(), reduce,
                   call_of(OpType::kAllreduce, tensor, -1, op), timeout, between_hosts);
}

void SameHostPath::broadcast(const at::Tensor& tensor, int root, std::chrono::milliseconds timeout) const {
  const int root_local = local_index_of_rank[root];
  if (cross_host && local_index_of_rank[rank] == root_local) {
    cross_host->broadcast(tensor, host_of_rank[root], timeout);  // the root's host is its position there
  }
  local->broadcast(tensor.data_ptr(), tensor.nbytes(), root_local, call_of(OpType::kBroadcast, tensor, root), timeout);
}

void SameHostPath::allgather(const at::Tensor& input, const at::Tensor& output,
                             std::chrono::milliseconds timeout) const {
  const CallSignature call = call_of(OpType::kAllgather, input);
  if (!cross_host) {
    local->allgather(input.data_ptr(), output.data_ptr(), input.nbytes(), call, timeout);
    return;
  }
  const int per_host = local->local_size();
  const int64_t block = input.numel();
  at::Tensor this_host = at::empty({per_host * block}, input.options());
  local->allgather(input.data_ptr(), this_host.data_ptr(), input.nbytes(), call, timeout);
  if (local_index_of_rank[rank] == 0) {
    const int hosts = static_cast<int>(output.numel() / block / per_host);
    at::Tensor all_hosts = at::empty({static_cast<int64_t>(hosts) * per_host * block}, input.options());
    cross_host->allgather(this_host, all_hosts, timeout);
    // Host-major order -> rank order (ranks need not be numbered host by host).
    at::Tensor flat = output.view({-1});
    for (size_t r = 0; r < host_of_rank.size(); ++r) {
      const int64_t from = (host_of_rank[r] * per_host + local_index_of_rank[r]) * block;
      flat.narrow(0, static_cast<int64_t>(r) * block, block).copy_(all_hosts.narrow(0, from, block));
    }
  }
  local->broadcast(output.data_ptr(), output.nbytes(), 0, call_of(OpType::kBroadcast, output), timeout);
}

void SameHostPath::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op,
                                  const ReduceFunction& reduce, std::chrono::milliseconds timeout) const {
  if (!cross_host) {
    local->reduce_scatter(input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()),
                          output.element_size(), reduce, call_of(OpType::kReduceScatter, output, -1, op), timeout);
    return;
  }
  at::Tensor all = input.clone();  // the caller's input stays untouched
  allreduce(all, op, reduce, timeout);
  output.view({-1}).copy_(all.view({-1}).narrow(0, rank * output.numel(), output.numel()));
}

void SameHostPath::barrier(std::chrono::milliseconds timeout) const {
  local->barrier(timeout);
  if (cross_host) {
    cross_host->barrier(timeout);
    local->barrier(timeout);
  }
}

}  // namespace ringtorch
