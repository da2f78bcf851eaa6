// Which all-reduce algorithm runs a given message (RINGTORCH_ALLREDUCE_ALGORITHM, or by size),
// and running it on a buffer.
//
//   auto    (default) by size and group size: choose_allreduce_algorithm()
//   direct  every rank sends its buffer to every peer (direct_allreduce.h)
//   ring    Gloo's ring: 2(n-1) steps, bandwidth-optimal
//   bcube   Gloo's bcube (recursive halving/doubling)
//
// The thresholds are in sizes.h, with where each was measured.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <ringtorch/process_group_options.h>

#include "runtime/comm/direct_allreduce.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/sizes.h"

namespace ringtorch {

// Throws InvalidArgumentError naming `origin` (e.g. the environment variable) for other names.
AllreduceAlgorithm parse_allreduce_algorithm(const std::string& name, const std::string& origin);
const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);

// Resolves kAuto for a message of `bytes` per rank among `world_size` ranks (sizes.h):
// - 2 ranks: direct below kDirectMaxBytesTwoRanks (one round trip), the ring from there.
// - more ranks: direct while (world_size - 1) * bytes <= kDirectMaxFanoutBytes, ring above.
AllreduceAlgorithm choose_allreduce_algorithm(AllreduceAlgorithm requested, size_t bytes, int world_size);

// Reduces `count` elements of `element_size` bytes at `data` in place across the context's
// ranks with the (resolved, not kAuto) `algorithm`; `scratch` serves direct.
// With `check`, the ranks compare their calls first (call_fingerprint.h): inside the direct
// algorithm's exchange, or as one exchange of fingerprints before Gloo's. Throws
// Gloo's exceptions, or ringtorch's typed ones (direct_allreduce.h), on failure.
void allreduce_buffer(const std::shared_ptr<gloo::Context>& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, AllreduceAlgorithm algorithm, uint32_t tag,
                      std::chrono::milliseconds timeout, ScratchBuffer& scratch,
                      const FingerprintCheck* check = nullptr);

}  // namespace ringtorch
