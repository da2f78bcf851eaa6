// ProcessGroup: reduce, gather, scatter, reduce_scatter and alltoall, prepared on the caller's
// thread (the others are in collectives.cc; send/recv in point_to_point.cc).
#include <ATen/ATen.h>
#include <gloo/alltoall.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>

#include "runtime/comm/direct_allreduce.h"
#include "runtime/comm/process_group_impl.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/shm/same_host_path.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

Operation ProcessGroup::Impl::prepare_reduce(at::Tensor tensor, int root, ReduceOp op, Timeout call_timeout) {
  Operation operation = begin(OpType::kReduce, call_timeout);
  check_tensor(context_prefix(), OpType::kReduce, "", tensor);
  check_root(OpType::kReduce, root);
  check_reduce_op(OpType::kReduce, op, tensor);
  operation.tensors = {tensor};
  tensor = operation.staging.host(tensor, /*copy_in=*/true, /*copy_back=*/rank_ == root);
  auto reduce = reduce_function(op, tensor.scalar_type());
  operation.call = {OpType::kReduce, tensor.numel(), tensor.scalar_type(), root, op};
  operation.detail = str_cat(tensor_summary(tensor), " ", reduce_op_name(op), " to rank ", root);
  operation.run = [=, context = context_, size = size_, is_root = rank_ == root,
                   timeout = operation.timeout](uint32_t tag) mutable {
    if (tensor.numel() == 0) return;
    with_element_type(tensor.element_size(), [&](auto element) {
      using T = decltype(element);
      gloo::ReduceOptions opts(context);
      opts.setInput<T>(data_as<T>(tensor), static_cast<size_t>(tensor.numel()));
      opts.setOutput<T>(data_as<T>(tensor), static_cast<size_t>(tensor.numel()));
      opts.setRoot(root);
      opts.setReduceFunction(reduce);
      opts.setTag(tag);
      opts.setTimeout(timeout);
      gloo::reduce(opts);
    });
    if (op == ReduceOp::kAvg && is_root) tensor.div_(size);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_gather(at::Tensor input, at::Tensor output, int root, Timeout call_timeout) {
  Operation operation = begin(OpType::kGather, call_timeout);
  check_tensor(context_prefix(), OpType::kGather, "input", input);
  check_root(OpType::kGather, root);
  const bool is_root = rank_ == root;
  if (is_root) {
    check_tensor(context_prefix(), OpType::kGather, "output", output);
    check_blocks(context_prefix(), OpType::kGather, input, "input", output, "output", size_);
  }
  operation.tensors = {input};
  if (is_root) operation.tensors.push_back(output);
  input = operation.staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  if (is_root) output = operation.staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  operation.call = {OpType::kGather, input.numel(), input.scalar_type(), root};
  operation.detail = str_cat(tensor_summary(input), " per rank to rank ", root);
  operation.run = [=, context = context_, timeout = operation.timeout](uint32_t tag) {
    if (input.numel() == 0) return;
    gloo::GatherOptions opts(context);
    opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
    if (is_root) opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::gather(opts);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_scatter(at::Tensor input, at::Tensor output, int root, Timeout call_timeout) {
  Operation operation = begin(OpType::kScatter, call_timeout);
  check_tensor(context_prefix(), OpType::kScatter, "output", output);
  check_root(OpType::kScatter, root);
  const bool is_root = rank_ == root;
  if (is_root) {
    check_tensor(context_prefix(), OpType::kScatter, "input", input);
    check_blocks(context_prefix(), OpType::kScatter, output, "output", input, "input", size_);
  }
  operation.tensors = {output};
  if (is_root) operation.tensors.push_back(input);
  output = operation.staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  if (is_root) input = operation.staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  operation.call = {OpType::kScatter, output.numel(), output.scalar_type(), root};
  operation.detail = str_cat(tensor_summary(output), " per rank from rank ", root);
  operation.run = [=, context = context_, size = size_, timeout = operation.timeout](uint32_t tag) {
    if (output.numel() == 0) return;
    gloo::ScatterOptions opts(context);
    if (is_root) {
      std::vector<uint8_t*> blocks;
      blocks.reserve(size);
      for (int r = 0; r < size; ++r) blocks.push_back(data_as<uint8_t>(input) + r * output.nbytes());
      opts.setInputs<uint8_t>(blocks, output.nbytes());
    }
    opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::scatter(opts);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op,
                                                     Timeout call_timeout) {
  Operation operation = begin(OpType::kReduceScatter, call_timeout);
  check_tensor(context_prefix(), OpType::kReduceScatter, "input", input);
  check_tensor(context_prefix(), OpType::kReduceScatter, "output", output);
  check_blocks(context_prefix(), OpType::kReduceScatter, output, "output", input, "input", size_);
  check_reduce_op(OpType::kReduceScatter, op, input);
  operation.tensors = {input, output};
  input = operation.staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = operation.staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  auto reduce = reduce_function(op, input.scalar_type());
  const auto algorithm = choose_allreduce_algorithm(allreduce_algorithm_, input.nbytes(), size_);
  // A forced algorithm (not auto) keeps reduce_scatter on Gloo, as it does all-reduce.
  auto same_host = allreduce_algorithm_ == AllreduceAlgorithm::kAuto ? same_host_ : nullptr;
  operation.call = {OpType::kReduceScatter, output.numel(), output.scalar_type(), -1, op};
  operation.detail = str_cat(tensor_summary(input), " ", reduce_op_name(op));
  if (same_host) operation.path = same_host_path_name();
  operation.run_checks_call = same_host && output.numel() > 0;  // else the executor checks
  operation.run = [=, context = context_, scratch = scratch_, size = size_, rank = rank_,
                   timeout = operation.timeout](uint32_t tag) mutable {
    if (output.numel() == 0) return;
    if (same_host) {
      same_host->reduce_scatter(input, output, op, reduce, timeout);
      if (op == ReduceOp::kAvg) output.div_(size);
      return;
    }
    at::Tensor all = input.clone();  // the caller's input stays untouched
    allreduce_buffer(context, all.data_ptr(), static_cast<size_t>(all.numel()), all.element_size(), reduce, algorithm,
                     tag, timeout, *scratch);
    at::Tensor mine = all.narrow(0, rank * output.numel(), output.numel());
    output.copy_(mine.view(output.sizes()));
    if (op == ReduceOp::kAvg) output.div_(size);
  };
  return operation;
}

Operation ProcessGroup::Impl::prepare_alltoall(at::Tensor input, at::Tensor output, Timeout call_timeout) {
  Operation operation = begin(OpType::kAlltoall, call_timeout);
  check_tensor(context_prefix(), OpType::kAlltoall, "input", input);
  check_tensor(context_prefix(), OpType::kAlltoall, "output", output);
  if (input.scalar_type() != output.scalar_type() || input.numel() != output.numel() || input.numel() % size_ != 0) {
    throw InvalidArgumentError(
        str_cat(context_prefix(), "alltoall: input (", input.numel(), " ", dtype_name(input), ") and output (",
                output.numel(), " ", dtype_name(output),
                ") must have the same dtype and a number of elements divisible by the world size ", size_));
  }
  operation.tensors = {input, output};
  input = operation.staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = operation.staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  operation.call = {OpType::kAlltoall, input.numel(), input.scalar_type()};
  operation.detail = tensor_summary(input);
  operation.run = [=, context = context_, timeout = operation.timeout](uint32_t tag) {
    if (input.numel() == 0) return;
    gloo::AlltoallOptions opts(context);
    opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
    opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::alltoall(opts);
  };
  return operation;
}

}  // namespace ringtorch
