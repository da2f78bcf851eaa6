// Direct-exchange all-reduce, for latency-bound messages.
//
// Every rank sends its whole buffer to every peer and reduces what it receives. That is one
// round trip, against the ring's 2(n-1) dependent steps, for (n-1) x the bytes per rank
// instead of 2(n-1)/n x: it wins while latency dominates, and at 2 ranks (where both move the
// same bytes) at every size measured. ProcessGroup chooses it by size; see
// allreduce_algorithm.h and docs/process_group.md, "Algorithm".
//
// Every rank reduces in rank order (((b0 op b1) op b2) ...), so all ranks get bit-identical
// results, as with the ring, where each element is reduced once and then copied.
//
// Thread-safety: one call at a time per `tag`; the context is shared with Gloo's collectives
// (its own slots: Note [Tag space] in tag_space.h). Failures: a peer whose data does not
// arrive is a TimeoutError or PeerLostError (gloo_failure.h) naming that peer, as text and as
// FailureSite::peer; a failed send passes Gloo's own exception through (it knows only the
// peer's address, which the process group turns into a rank).
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/comm/reduce_kernels.h"

namespace ringtorch {

// Receive memory kept between calls: fresh pages cost more than the transfer itself on some
// machines (a 32 MiB zeroed allocation took 100 ms on the 2-core VM). Grows, never shrinks; not
// zeroed. Not thread-safe: its owner runs one operation at a time (the process group's order).
class ScratchBuffer {
 public:
  char* get(size_t bytes);

 private:
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

void direct_allreduce(gloo::Context& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, uint32_t tag, std::chrono::milliseconds timeout,
                      ScratchBuffer& scratch);

}  // namespace ringtorch
