// ProcessGroup: reduce, gather, scatter, reduce_scatter, alltoall (the queue and the simpler
// collectives are in process_group.cc; send/recv in point_to_point.cc).
#include <ATen/ATen.h>
#include <gloo/alltoall.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include "runtime/comm/process_group.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/shm/same_host_path.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

std::shared_ptr<Work> ProcessGroup::reduce_async(at::Tensor tensor, int root, ReduceOp op,
                                                 std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("reduce");
  check_tensor(context_prefix(), "reduce", "", tensor);
  check_root("reduce", root);
  check_reduce_op("reduce", op, tensor);
  DeviceStaging staging;
  const at::Tensor user_tensor = tensor;
  tensor = staging.host(tensor, /*copy_in=*/true, /*copy_back=*/rank_ == root);
  auto reduce = reduce_function(op, tensor.scalar_type());
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  const int size = size_, rank = rank_;
  return submit(
      {"reduce", tensor.numel(), tensor.scalar_type(), root, op},
      str_cat(tensor_summary(tensor), " ", reduce_op_name(op), " to rank ", root), {user_tensor}, timeout,
      [=](uint32_t tag) mutable {
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
        if (op == ReduceOp::kAvg && rank == root) tensor.div_(size);
      },
      std::move(staging));
}

std::shared_ptr<Work> ProcessGroup::gather_async(at::Tensor input, at::Tensor output, int root,
                                                 std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("gather");
  check_tensor(context_prefix(), "gather", "input", input);
  check_root("gather", root);
  if (rank_ == root) {
    check_tensor(context_prefix(), "gather", "output", output);
    check_blocks(context_prefix(), "gather", input, "input", output, "output", size_);
  }
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  const bool is_root = rank_ == root;
  std::vector<at::Tensor> keep{input};
  if (is_root) keep.push_back(output);
  DeviceStaging staging;
  input = staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  if (is_root) output = staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  return submit(
      {"gather", input.numel(), input.scalar_type(), root}, str_cat(tensor_summary(input), " per rank to rank ", root),
      keep, timeout,
      [=](uint32_t tag) {
        if (input.numel() == 0) return;
        gloo::GatherOptions opts(context);
        opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
        if (is_root) opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
        opts.setRoot(root);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::gather(opts);
      },
      std::move(staging));
}

std::shared_ptr<Work> ProcessGroup::scatter_async(at::Tensor input, at::Tensor output, int root,
                                                  std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("scatter");
  check_tensor(context_prefix(), "scatter", "output", output);
  check_root("scatter", root);
  if (rank_ == root) {
    check_tensor(context_prefix(), "scatter", "input", input);
    check_blocks(context_prefix(), "scatter", output, "output", input, "input", size_);
  }
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  const bool is_root = rank_ == root;
  const int size = size_;
  std::vector<at::Tensor> keep{output};
  if (is_root) keep.push_back(input);
  DeviceStaging staging;
  output = staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  if (is_root) input = staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  return submit(
      {"scatter", output.numel(), output.scalar_type(), root},
      str_cat(tensor_summary(output), " per rank from rank ", root), keep, timeout,
      [=](uint32_t tag) {
        if (output.numel() == 0) return;
        gloo::ScatterOptions opts(context);
        if (is_root) {
          std::vector<uint8_t*> blocks;
          for (int r = 0; r < size; ++r) blocks.push_back(data_as<uint8_t>(input) + r * output.nbytes());
          opts.setInputs<uint8_t>(blocks, output.nbytes());
        }
        opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
        opts.setRoot(root);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::scatter(opts);
      },
      std::move(staging));
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(at::Tensor input, at::Tensor output, ReduceOp op,
                                                         std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("reduce_scatter");
  check_tensor(context_prefix(), "reduce_scatter", "input", input);
  check_tensor(context_prefix(), "reduce_scatter", "output", output);
  check_blocks(context_prefix(), "reduce_scatter", output, "output", input, "input", size_);
  check_reduce_op("reduce_scatter", op, input);
  DeviceStaging staging;
  const std::vector<at::Tensor> user_tensors{input, output};
  input = staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  auto reduce = reduce_function(op, input.scalar_type());
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  const int size = size_, rank = rank_;
  auto scratch = scratch_;
  const auto algorithm = choose_allreduce_algorithm(allreduce_algorithm_, input.nbytes(), size_);
  auto same_host = allreduce_algorithm_ == AllreduceAlgorithm::kAuto ? same_host_ : nullptr;
  return submit(
      {"reduce_scatter", output.numel(), output.scalar_type(), -1, op},
      str_cat(tensor_summary(input), " ", reduce_op_name(op)), user_tensors, timeout,
      [=](uint32_t tag) mutable {
        if (output.numel() == 0) return;
        if (same_host) {
          same_host->reduce_scatter(input, output, op, reduce, timeout);
          if (op == ReduceOp::kAvg) output.div_(size);
          return;
        }
        at::Tensor all = input.clone();  // the caller's input stays untouched
        allreduce_buffer(context, all.data_ptr(), static_cast<size_t>(all.numel()), all.element_size(), reduce,
                         algorithm, tag, timeout, *scratch);
        at::Tensor mine = all.narrow(0, rank * output.numel(), output.numel());
        output.copy_(mine.view(output.sizes()));
        if (op == ReduceOp::kAvg) output.div_(size);
      },
      std::move(staging));
}

std::shared_ptr<Work> ProcessGroup::alltoall_async(at::Tensor input, at::Tensor output,
                                                   std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("alltoall");
  check_tensor(context_prefix(), "alltoall", "input", input);
  check_tensor(context_prefix(), "alltoall", "output", output);
  if (input.scalar_type() != output.scalar_type() || input.numel() != output.numel() || input.numel() % size_ != 0) {
    throw InvalidArgumentError(
        str_cat(context_prefix(), "alltoall: input (", input.numel(), " ", dtype_name(input), ") and output (",
                output.numel(), " ", dtype_name(output),
                ") must have the same dtype and a number of elements divisible by the world size ", size_));
  }
  DeviceStaging staging;
  const std::vector<at::Tensor> user_tensors{input, output};
  input = staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  return submit(
      {"alltoall", input.numel(), input.scalar_type()}, tensor_summary(input), user_tensors, timeout,
      [=](uint32_t tag) {
        if (input.numel() == 0) return;
        gloo::AlltoallOptions opts(context);
        opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
        opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::alltoall(opts);
      },
      std::move(staging));
}

}  // namespace ringtorch
