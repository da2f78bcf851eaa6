// Two-rank all-reduce by halves, for large buffers between 2 ranks.
//
// Rank 0 owns the first half of the buffer, rank 1 the second. Each sends the half it does not
// own to its peer, reduces the half it owns with the peer's copy of it, and sends the result
// back, which lands straight in the peer's buffer. The bytes on the wire are the direct
// exchange's (S each way), but each rank reduces S/2 instead of S and keeps S/2 of receive
// memory instead of S: on a 2-core machine, where the TCP copies and the reduction compete for
// the same cores, that is what counts (docs/process_group.md, "Algorithm"). Both halves go in
// pieces of kHalvesPieceBytes: every receive and every copy is posted at once, and each piece
// is reduced as soon as it has arrived, while later ones are still arriving; each result is
// sent when its piece is reduced and, on the one stream per pair, leaves after this rank's
// copies (Note [Halves all-reduce] in halves_allreduce.cc).
//
// Each element is reduced once, by its owner, in rank order (b0 op b1): both ranks hold
// bit-identical results, as with the ring and the direct exchange.
//
// With a FingerprintCheck, the ranks compare their calls first (call_fingerprint.h), in one
// exchange without data. Thread-safety, failures and slots: as direct_allreduce.h (its own
// slots: Note [Tag space] in tag_space.h).
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "runtime/comm/call_fingerprint.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/scratch_buffer.h"

namespace ringtorch {

// 1 MiB: 512 KiB to 2 MiB pieces measured within 0.2% of each other at 16 MiB (4 MiB ones 8%
// slower), and smaller pieces for smaller buffers made 4 MiB slower (docs/process_group.md,
// "Algorithm").
constexpr size_t kHalvesPieceBytes = size_t{1} << 20;

// `context` must have exactly 2 ranks (InvalidArgumentError otherwise).
void halves_allreduce(gloo::Context& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, uint32_t tag, std::chrono::milliseconds timeout,
                      ScratchBuffer& scratch, const FingerprintCheck* check = nullptr);

}  // namespace ringtorch
