// ProcessGroup: allreduce, broadcast, allgather, allgatherv and barrier, prepared on the
// caller's thread (checks, staging, signature) with the closure the queue runs. The rooted and
// block-wise collectives are in collectives_rooted.cc.
#include <ATen/ATen.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/broadcast.h>

#include <cstring>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>

#include "runtime/comm/direct_allreduce.h"
#include "runtime/comm/piece_plan.h"
#include "runtime/comm/process_group_impl.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/shm/same_host_path.h"
#include "runtime/comm/tensor_checks.h"
#include "runtime/cuda/staged_transfer.h"
#ifdef RINGTORCH_WITH_CUDA
#include "runtime/comm/cuda_tensor_staging.h"
#endif

namespace ringtorch {

Operation ProcessGroup::Impl::prepare_allreduce(at::Tensor tensor, ReduceOp op, Timeout call_timeout) {
  Operation operation = begin(OpType::kAllreduce, call_timeout);
  check_tensor(context_prefix(), OpType::kAllreduce, "", tensor);
  check_reduce_op(OpType::kAllreduce, op, tensor);
  operation.tensors = {tensor};
  // Every rank cuts a large buffer into the same pieces (piece_plan.h), whatever its device: a
  // CUDA rank overlaps its copies with the reduction of other pieces, and CPU ranks in the same
  // group issue the same collectives (whole buffers where no rank has a GPU: agree_on_group()).
  const std::vector<PieceSpan> pieces =
      plan_pieces(static_cast<size_t>(tensor.numel()), tensor.element_size(), allreduce_piece_bytes_);
  std::shared_ptr<cuda::StagedTransfer> transfer;
#ifdef RINGTORCH_WITH_CUDA
  if (tensor.is_cuda()) {
    transfer = stage_cuda_tensor(tensor, pieces, /*copy_in=*/true);
    tensor = host_view(*transfer, tensor);
  }
#endif
  tensor = operation.staging.host(tensor, /*copy_in=*/true, /*copy_back=*/true);  // CUDA without the toolkit
  auto reduce = reduce_function(op, tensor.scalar_type());
  const AllreduceAlgorithm requested = allreduce_algorithm_;
  // A forced algorithm (not auto) is a request for Gloo's.
  auto same_host = requested == AllreduceAlgorithm::kAuto ? same_host_ : nullptr;
  const size_t element_size = tensor.element_size();
  const auto first_algorithm = choose_allreduce_algorithm(requested, pieces[0].count * element_size, size_);
  operation.call = {OpType::kAllreduce, tensor.numel(), tensor.scalar_type(), -1, op};
  operation.path = !same_host ? allreduce_algorithm_name(first_algorithm) : same_host_path_name();
  operation.detail = str_cat(tensor_summary(tensor), " ", reduce_op_name(op), ", ",
                             !same_host    ? allreduce_algorithm_name(first_algorithm)
                             : cross_host_ ? "hierarchical"
                                           : "shared memory",
                             pieces.size() > 1 ? str_cat(", ", pieces.size(), " pieces") : std::string(),
                             transfer ? ", staged from the GPU" : "");
  // Averages of float32 CUDA tensors are divided on the device (cuBLAS), others on the host.
  const bool scale_on_device = transfer && op == ReduceOp::kAvg && tensor.scalar_type() == at::kFloat;
  // The shared-memory path compares the calls in its segment (when there is data to move); Gloo's,
  // in the first piece's exchange (the pieces follow from the call, so one check covers them all).
  operation.run_checks_call = !same_host || tensor.numel() > 0;  // else the executor checks
  operation.run = [=, context = context_, scratch = scratch_, fingerprint = fingerprint_, size = size_,
                   call = operation.call, timeout = operation.timeout](uint32_t tag) mutable {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const FingerprintCheck check{fingerprint.get(), CallFingerprint{tag, call, static_cast<int>(first_algorithm)}};
    // One piece is the whole (contiguous) tensor: a view and a narrow cost more through the
    // dispatcher than a small all-reduce's own work.
    const bool whole = pieces.size() == 1;
    at::Tensor flat = whole ? tensor : tensor.view(-1);
    for (size_t k = 0; k < pieces.size(); ++k) {
      if (transfer) transfer->wait_in(k, deadline);
      at::Tensor piece =
          whole ? flat : flat.narrow(0, static_cast<int64_t>(pieces[k].first), static_cast<int64_t>(pieces[k].count));
      if (same_host) {
        same_host->allreduce(piece, op, reduce, timeout);
      } else {
        allreduce_buffer(context, piece.data_ptr(), pieces[k].count, element_size, reduce,
                         choose_allreduce_algorithm(requested, pieces[k].count * element_size, size), tag, timeout,
                         *scratch, k == 0 && size > 1 ? &check : nullptr);
      }
      if (op == ReduceOp::kAvg && !scale_on_device) piece.div_(size);
      if (transfer) transfer->copy_out(k, scale_on_device ? 1.0f / static_cast<float>(size) : 1.0f);
    }
    if (transfer) transfer->finish(deadline);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_broadcast(at::Tensor tensor, int root, Timeout call_timeout) {
  Operation operation = begin(OpType::kBroadcast, call_timeout);
  check_tensor(context_prefix(), OpType::kBroadcast, "", tensor);
  check_root(OpType::kBroadcast, root);
  operation.tensors = {tensor};
  tensor = operation.staging.host(tensor, /*copy_in=*/rank_ == root, /*copy_back=*/rank_ != root);
  operation.call = {OpType::kBroadcast, tensor.numel(), tensor.scalar_type(), root};
  operation.detail = str_cat(tensor_summary(tensor), " from rank ", root);
  if (same_host_) operation.path = same_host_path_name();
  // Over Gloo, a small buffer travels inside the root's call fingerprint: the check is the broadcast.
  const bool in_fingerprint = !same_host_ && size_ > 1 && tensor.nbytes() <= kFingerprintInlineBytes;
  operation.run_checks_call = (same_host_ && tensor.numel() > 0) || in_fingerprint;  // else the executor checks
  operation.run = [=, context = context_, same_host = same_host_, fingerprint = fingerprint_, call = operation.call,
                   is_root = rank_ == root, timeout = operation.timeout](uint32_t tag) {
    if (in_fingerprint) {
      const size_t bytes = is_root ? tensor.nbytes() : 0;
      fingerprint->exchange(*context, CallFingerprint{tag, call}, bytes ? tensor.data_ptr() : nullptr, bytes,
                            std::chrono::steady_clock::now() + timeout);
      if (!is_root && tensor.nbytes() > 0) {
        std::memcpy(tensor.data_ptr(), fingerprint->inline_data_of(root), tensor.nbytes());
      }
      return;
    }
    if (tensor.numel() == 0) return;
    if (same_host) return same_host->broadcast(tensor, root, timeout);
    gloo::BroadcastOptions opts(context);
    opts.setOutput<uint8_t>(data_as<uint8_t>(tensor), tensor.nbytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::broadcast(opts);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_allgather(at::Tensor input, at::Tensor output, Timeout call_timeout) {
  Operation operation = begin(OpType::kAllgather, call_timeout);
  check_tensor(context_prefix(), OpType::kAllgather, "input", input);
  check_tensor(context_prefix(), OpType::kAllgather, "output", output);
  check_blocks(context_prefix(), OpType::kAllgather, input, "input", output, "output", size_);
  operation.tensors = {input, output};
  input = operation.staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = operation.staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  operation.call = {OpType::kAllgather, input.numel(), input.scalar_type()};
  operation.detail = str_cat(tensor_summary(input), " per rank");
  if (same_host_) operation.path = same_host_path_name();
  // Over Gloo, small blocks travel inside the call fingerprints: the check is the allgather.
  const bool in_fingerprint = !same_host_ && size_ > 1 && input.nbytes() <= kFingerprintInlineBytes;
  operation.run_checks_call = (same_host_ && input.numel() > 0) || in_fingerprint;  // else the executor checks
  operation.run = [=, context = context_, same_host = same_host_, fingerprint = fingerprint_, call = operation.call,
                   rank = rank_, size = size_, timeout = operation.timeout](uint32_t tag) {
    const size_t block = input.nbytes();
    if (in_fingerprint) {
      fingerprint->exchange(*context, CallFingerprint{tag, call}, block ? input.data_ptr() : nullptr, block,
                            std::chrono::steady_clock::now() + timeout);
      if (block == 0) return;
      auto* out = static_cast<char*>(output.data_ptr());
      for (int r = 0; r < size; ++r) {
        std::memcpy(out + block * r, r == rank ? input.data_ptr() : fingerprint->inline_data_of(r), block);
      }
      return;
    }
    if (input.numel() == 0) return;
    if (same_host) return same_host->allgather(input, output, timeout);
    gloo::AllgatherOptions opts(context);
    opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
    opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::allgather(opts);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_allgatherv(at::Tensor input, at::Tensor output, std::vector<int64_t> counts,
                                                 Timeout call_timeout) {
  Operation operation = begin(OpType::kAllgatherv, call_timeout);
  check_tensor(context_prefix(), OpType::kAllgatherv, "input", input);
  check_tensor(context_prefix(), OpType::kAllgatherv, "output", output);
  if (static_cast<int>(counts.size()) != size_) {
    throw InvalidArgumentError(
        str_cat(context_prefix(), "allgatherv: ", counts.size(), " counts given for ", size_, " ranks"));
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (input.numel() != counts[rank_] || output.numel() != total || input.scalar_type() != output.scalar_type()) {
    throw InvalidArgumentError(str_cat(context_prefix(), "allgatherv: input has ", input.numel(), " ",
                                       dtype_name(input), " (counts[", rank_, "] = ", counts[rank_], "), output ",
                                       output.numel(), " ", dtype_name(output), " (sum of counts = ", total, ")"));
  }
  operation.tensors = {input, output};
  input = operation.staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = operation.staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  std::vector<size_t> bytes;
  bytes.reserve(counts.size());
  for (int64_t c : counts) bytes.push_back(static_cast<size_t>(c) * input.element_size());
  operation.call = {OpType::kAllgatherv, total, input.scalar_type()};
  operation.call.layout = CallSignature::layout_of(counts);
  operation.detail = str_cat(tensor_summary(output), " in all");
  operation.run = [=, context = context_, timeout = operation.timeout](uint32_t tag) {
    if (total == 0) return;
    gloo::AllgathervOptions opts(context);
    opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
    opts.setOutput<uint8_t>(data_as<uint8_t>(output), bytes);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::allgatherv(opts);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_barrier(Timeout call_timeout) {
  Operation operation = begin(OpType::kBarrier, call_timeout);
  operation.detail = str_cat(size_, " ranks");
  if (same_host_) operation.path = same_host_path_name();
  // The shared-memory path publishes the barrier's signature in its segment; over Gloo the
  // executor's exchange of fingerprints (every rank hears from every other) is the barrier.
  operation.run_checks_call = same_host_ != nullptr;
  operation.run = [same_host = same_host_, timeout = operation.timeout](uint32_t) {
    if (same_host) same_host->barrier(timeout);
  };
  return operation;
}

}  // namespace ringtorch
