#include "runtime/comm/allreduce_algorithm.h"

#include <gloo/allreduce.h>

#include <ringtorch/error.h>

#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

AllreduceAlgorithm parse_allreduce_algorithm(const std::string& name, const std::string& origin) {
  if (name.empty() || name == "auto") return AllreduceAlgorithm::kAuto;
  if (name == "direct") return AllreduceAlgorithm::kDirect;
  if (name == "ring") return AllreduceAlgorithm::kRing;
  if (name == "bcube") return AllreduceAlgorithm::kBcube;
  throw InvalidArgumentError(str_cat(origin, "=", name, ": use auto, direct, ring or bcube"));
}

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto:
      return "auto";
    case AllreduceAlgorithm::kDirect:
      return "direct";
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kBcube:
      return "bcube";
  }
  return "?";
}

AllreduceAlgorithm choose_allreduce_algorithm(AllreduceAlgorithm requested, size_t bytes, int world_size) {
  if (requested != AllreduceAlgorithm::kAuto) return requested;
  if (world_size == 2) {
    return bytes < kDirectMaxBytesTwoRanks ? AllreduceAlgorithm::kDirect : AllreduceAlgorithm::kRing;
  }
  const size_t fanout = bytes * static_cast<size_t>(world_size > 1 ? world_size - 1 : 1);
  return fanout <= kDirectMaxFanoutBytes ? AllreduceAlgorithm::kDirect : AllreduceAlgorithm::kRing;
}

void allreduce_buffer(const std::shared_ptr<gloo::Context>& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, AllreduceAlgorithm algorithm, uint32_t tag,
                      std::chrono::milliseconds timeout, ScratchBuffer& scratch, const FingerprintCheck* check) {
  if (algorithm == AllreduceAlgorithm::kDirect) {
    direct_allreduce(*context, data, count, element_size, reduce, tag, timeout, scratch, check);
    return;
  }
  if (check && context->size > 1) {
    check->exchange->exchange(*context, check->fingerprint, nullptr, 0, std::chrono::steady_clock::now() + timeout);
  }
  if (count == 0) return;
  with_element_type(element_size, [&](auto element) {
    using T = decltype(element);
    gloo::AllreduceOptions opts(context);
    opts.setOutput<T>(static_cast<T*>(data), count);
    opts.setAlgorithm(algorithm == AllreduceAlgorithm::kBcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                              : gloo::AllreduceOptions::Algorithm::RING);
    opts.setReduceFunction(reduce);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::allreduce(opts);
  });
}

}  // namespace ringtorch
