// Communication hooks: how DistributedDataParallel reduces one bucket of gradients, as
// torch.distributed.algorithms.ddp_comm_hooks. A hook starts the reduction of a flat bucket
// and returns the started Work plus what to do once it has completed, so that the gradient
// averaged over the group's ranks ends up in `bucket`.
//
// Example:
//   ringtorch::DdpOptions options;
//   options.comm_hook = ringtorch::fp16_compress_hook();  // half the bytes on the wire
//
// Hooks run on the thread that runs backward (start) and in the end-of-backward callback
// (completion); they must not block in start.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

#include <ringtorch/process_group.h>

namespace ringtorch {

struct PendingReduction {
  std::shared_ptr<Work> work;
  std::function<void()> then;  // after work->wait(); may be empty
};
using CommHook = std::function<PendingReduction(ProcessGroup& group, at::Tensor bucket)>;

// The default: all-reduce the bucket in place and divide by the world size.
CommHook allreduce_hook();
// Compress to float16 / bfloat16 (divided by the world size first, so the sum cannot
// overflow where the average would not), all-reduce, write back in the bucket's dtype.
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

}  // namespace ringtorch
