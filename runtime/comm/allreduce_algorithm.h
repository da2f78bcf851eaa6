// Which all-reduce algorithm runs a given message (RINGTORCH_ALLREDUCE_ALGORITHM, or by size),
// and running it on a buffer.
//
//   auto    (default) direct while latency dominates, then halves (2 ranks) or the ring; see
//           choose_allreduce_algorithm()
//   direct  every rank sends its buffer to every peer (direct_allreduce.h)
//   halves  2 ranks: each reduces the half it owns and sends it back, in pipelined pieces
//           (halves_allreduce.h); forced on any other number of ranks, the ring
//   ring    Gloo's ring: 2(n-1) steps, bandwidth-optimal
//   bcube   Gloo's bcube (recursive halving/doubling)
//
// The thresholds come from ringbench measurements recorded in docs/process_group.md,
// "Algorithm"; re-measure there before changing them.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/comm/direct_allreduce.h"
#include "runtime/comm/halves_allreduce.h"
#include "runtime/comm/reduce_kernels.h"

namespace ringtorch {

enum class AllreduceAlgorithm { kAuto, kDirect, kRing, kBcube, kHalves };

// Throws InvalidArgumentError naming `origin` (e.g. the environment variable) for other names.
AllreduceAlgorithm parse_allreduce_algorithm(const std::string& name, const std::string& origin);
const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);

// Resolves kAuto for a message of `bytes` per rank among `world_size` ranks:
// - 2 ranks: direct below kHalvesMinBytesTwoRanks (one round trip), halves from there up to
//   kHalvesMaxBytesTwoRanks (the same bytes on the wire, half the reduction), the ring above
//   (bounds the receive memory halves keeps, half the buffer).
// - more ranks: direct while (world_size - 1) * bytes <= kDirectMaxFanoutBytes, ring above.
AllreduceAlgorithm choose_allreduce_algorithm(AllreduceAlgorithm requested, size_t bytes, int world_size);

// Reduces `count` elements of `element_size` bytes at `data` in place across the context's
// ranks with the (resolved, not kAuto) `algorithm`; `scratch` serves direct and halves.
// With `check`, the ranks compare their calls first (call_fingerprint.h): inside the direct
// algorithm's exchange, or as one exchange of fingerprints before halves or Gloo's. Throws
// Gloo's exceptions, or ringtorch's typed ones (direct_allreduce.h), on failure.
void allreduce_buffer(const std::shared_ptr<gloo::Context>& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, AllreduceAlgorithm algorithm, uint32_t tag,
                      std::chrono::milliseconds timeout, ScratchBuffer& scratch,
                      const FingerprintCheck* check = nullptr);

constexpr size_t kHalvesMinBytesTwoRanks = size_t{8} << 20;
constexpr size_t kHalvesMaxBytesTwoRanks = size_t{128} << 20;
constexpr size_t kDirectMaxFanoutBytes = size_t{1} << 20;

}  // namespace ringtorch
