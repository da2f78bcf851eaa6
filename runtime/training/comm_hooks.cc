#include <ATen/ATen.h>

#include <ringtorch/comm_hooks.h>

namespace ringtorch {
namespace {

CommHook compress_hook(at::ScalarType wire) {
  return [wire](ProcessGroup& group, const GradBucket& bucket) {
    at::Tensor compressed = bucket.buffer.div(group.size()).to(wire);
    auto work = group.allreduce_async(compressed, ReduceOp::kSum);
    return PendingReduction{work, [compressed, buffer = bucket.buffer]() mutable { buffer.copy_(compressed); },
                            nullptr};
  };
}

}  // namespace

void complete_reductions(const std::vector<PendingReduction>& reductions) {
  std::exception_ptr failure;
  std::vector<PendingReduction> seconds;
  for (const auto& r : reductions) {
    try {
      r.work->wait();
      if (failure)
        continue;  // after a failure only wait: a second stage here would meet other collectives on the peers
      if (r.next) {
        PendingReduction second;
        r.next(second);
        if (second.work) seconds.push_back(std::move(second));
      } else if (r.then) {
        r.then();
      }
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  for (const auto& s : seconds) {
    try {
      s.work->wait();
      if (s.then && !failure) s.then();  // after a failure only wait: the step's result is lost anyway
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

at::Tensor GradBucket::gradient(size_t k) const {
  const Member& m = members.at(k);
  return buffer.narrow(0, m.offset, m.numel).view(m.shape);
}

CommHook allreduce_hook() {
  return [](ProcessGroup& group, const GradBucket& bucket) {
    return PendingReduction{group.allreduce_async(bucket.buffer, ReduceOp::kAvg), nullptr, nullptr};
  };
}

CommHook fp16_compress_hook() { return compress_hook(at::kHalf); }
CommHook bf16_compress_hook() { return compress_hook(at::kBFloat16); }

}  // namespace ringtorch
