#include <ATen/ATen.h>

#include <ringtorch/comm_hooks.h>

namespace ringtorch {
namespace {

CommHook compress_hook(at::ScalarType wire) {
  return [wire](ProcessGroup& group, const at::Tensor& bucket) {
    at::Tensor compressed = bucket.div(group.size()).to(wire);
    auto work = group.allreduce_async(compressed, ReduceOp::kSum);
    return PendingReduction{work, [compressed, bucket]() mutable { bucket.copy_(compressed); }};
  };
}

}  // namespace

CommHook allreduce_hook() {
  return [](ProcessGroup& group, const at::Tensor& bucket) {
    return PendingReduction{group.allreduce_async(bucket, ReduceOp::kAvg), nullptr};
  };
}

CommHook fp16_compress_hook() { return compress_hook(at::kHalf); }
CommHook bf16_compress_hook() { return compress_hook(at::kBFloat16); }

}  // namespace ringtorch
