// Direct-exchange all-reduce.
//
// Every rank sends its whole buffer to every peer and reduces what it receives. That is one
// round trip, against the ring's 2(n-1) dependent steps, for (n-1) x the bytes per rank
// instead of 2(n-1)/n x: the fewest steps for small messages, and at 2 ranks the same bytes as
// the ring. Between 2 ranks, buffers of at least 2 x kDirectPieceBytes go in pieces, each
// reduced while the next are in flight (Note [Pipelined direct all-reduce] in
// direct_allreduce.cc). ProcessGroup chooses it by size (allreduce_algorithm.h, sizes.h).
//
// Every rank reduces in rank order (((b0 op b1) op b2) ...), so all ranks get bit-identical
// results, as with the ring, where each element is reduced once and then copied.
//
// With a FingerprintCheck, the ranks compare their calls first (Note [Call fingerprint] in
// call_fingerprint.h); a buffer of at most kFingerprintInlineBytes travels inside the
// fingerprint message, so the check costs no extra round trip there.
//
// Thread-safety: one call at a time per `tag`; the context is shared with Gloo's collectives
// (its own slots: Note [Tag space] in tag_space.h). Failures: a peer whose data does not
// arrive is a TimeoutError or PeerLostError (gloo_failure.h) naming that peer, as text and as
// FailureSite::peer; a failed send passes Gloo's own exception through (it knows only the
// peer's address, which the process group turns into a rank); a call that differs is the
// fingerprint's MismatchError.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "runtime/comm/call_fingerprint.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/scratch_buffer.h"
#include "runtime/comm/sizes.h"

namespace ringtorch {

void direct_allreduce(gloo::Context& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, uint32_t tag, std::chrono::milliseconds timeout,
                      ScratchBuffer& scratch, const FingerprintCheck* check = nullptr);

}  // namespace ringtorch
