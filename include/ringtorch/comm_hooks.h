// Communication hooks: how DistributedDataParallel reduces one bucket of gradients, as
// torch.distributed.algorithms.ddp_comm_hooks. A hook starts the reduction of a bucket and
// returns the started Work plus what to do once it has completed, so that the gradient
// averaged over the group's ranks ends up in the bucket's buffer.
//
// Example:
//   ringtorch::DdpOptions options;
//   options.comm_hook = ringtorch::fp16_compress_hook();  // half the bytes on the wire
//   // or: options.comm_hook = ringtorch::powersgd_hook(state);  (powersgd.h)
//
// Hooks run on the thread that runs backward (start) and in the end-of-backward callback
// (completion, which may run further collectives of its own, in the same order on every rank);
// they must not block in start.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>

namespace ringtorch {

// One bucket of gradients, as PyTorch's GradBucket: the flat buffer the hook reduces in place,
// and where each parameter's gradient lies in it, so a hook can treat a weight as a matrix.
// DistributedDataParallel builds one per bucket at construction; a hook gets it by reference
// for the call and may keep copies of its tensors, not the reference.
struct GradBucket {
  struct Member {
    std::string name;            // the parameter's, as named_parameters() gives it
    std::vector<int64_t> shape;  // the gradient's
    int64_t offset = 0;          // its first element in `buffer`
    int64_t numel = 0;
  };
  size_t index = 0;   // launch order: 0 is the first bucket reduced in each backward
  size_t count = 1;   // buckets per backward
  at::Tensor buffer;  // every member's gradient, back to back (1-D, contiguous)
  std::vector<Member> members;

  bool is_last() const { return index + 1 == count; }
  // Member k's gradient: a view of `buffer` in its shape.
  at::Tensor gradient(size_t k) const;
};

struct PendingReduction {
  std::shared_ptr<Work> work;
  std::function<void()> then;  // after work->wait(); may be empty
  // After work->wait(), instead of `then`: a completion that starts a second reduction and puts
  // it in `second` (PowerSGD's Q after its P). The caller starts every bucket's second
  // reduction, in bucket order, before it waits for any of them, so that they overlap.
  std::function<void(PendingReduction& second)> next;
};

// Completes `reductions` as DistributedDataParallel does, in their order on every rank: waits
// for each and runs its `then`, or its `next`, whose second reductions are then waited for and
// completed in the same order. Everything started is waited for; after a failure nothing more is
// started or completed, and the first failure is rethrown.
void complete_reductions(const std::vector<PendingReduction>& reductions);
using CommHook = std::function<PendingReduction(ProcessGroup& group, const GradBucket& bucket)>;

// The default: all-reduce the bucket in place and divide by the world size.
CommHook allreduce_hook();
// Compress to float16 / bfloat16 (divided by the world size first, so the sum cannot
// overflow where the average would not), all-reduce, write back in the bucket's dtype.
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

}  // namespace ringtorch
