#include "runtime/comm/halves_allreduce.h"

#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <memory>

#include "base/error.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {
namespace {

// One rank's half of the buffer, cut into pieces of at most `piece` bytes.
struct Half {
  char* start;
  size_t bytes;
  size_t piece;
  size_t pieces() const { return (bytes + piece - 1) / piece; }  // 0 for an empty half
  size_t offset(size_t p) const { return p * piece; }
  size_t length(size_t p) const { return std::min(piece, bytes - p * piece); }
};

}  // namespace

// Note [Halves all-reduce]
//
// Every receive this rank will need is posted before anything is sent: the peer's copy of
// this rank's half (into scratch, slot phase 0) and the peer's reduced half (straight into
// `data`, slot phase 1). Then the half the peer owns goes out, piece by piece, and for each
// piece of its own half, in order, this rank waits for the peer's copy, reduces it into
// `data` and sends the result back. One pair carries one slot's messages in order, so the
// n-th completed receive on a buffer is piece n.
//
// The peer's reduced piece p lands on memory this rank sent from, with no wait for that send:
// the peer reduces piece p only after all of it has arrived, so every byte of it has left this
// process (written to the socket) before the result can come back. Posting the receive at the
// start, rather than after each send completes, is what lets the peer's result flow without a
// further round trip for Gloo's "receive ready" notice.
void halves_allreduce(gloo::Context& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, uint32_t tag, std::chrono::milliseconds timeout,
                      ScratchBuffer& scratch, const FingerprintCheck* check) {
  if (context.size != 2) {
    throw InvalidArgumentError(str_cat("the halves all-reduce runs between 2 ranks, not ", context.size));
  }
  const int rank = context.rank, peer = 1 - rank;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (check) check->exchange->exchange(context, check->fingerprint, nullptr, 0, deadline);
  if (count == 0) return;
  char* base = static_cast<char*>(data);
  const size_t first_half_bytes = count / 2 * element_size;
  const size_t piece = std::max<size_t>(kHalvesPieceBytes / element_size, 1) * element_size;
  const Half halves[2] = {{base, first_half_bytes, piece},
                          {base + first_half_bytes, count * element_size - first_half_bytes, piece}};
  const Half& mine = halves[rank];
  const Half& theirs = halves[peer];
  const uint64_t copy_slot = halves_allreduce_slot(tag, 0), result_slot = halves_allreduce_slot(tag, 1);

  char* peer_copy = scratch.get(mine.bytes);
  std::unique_ptr<gloo::transport::UnboundBuffer> copy_in, result_in, copy_out, result_out;
  if (mine.bytes > 0) {
    copy_in = context.createUnboundBuffer(peer_copy, mine.bytes);
    for (size_t p = 0; p < mine.pieces(); ++p) copy_in->recv(peer, copy_slot, mine.offset(p), mine.length(p));
    result_out = context.createUnboundBuffer(mine.start, mine.bytes);
  }
  if (theirs.bytes > 0) {
    result_in = context.createUnboundBuffer(theirs.start, theirs.bytes);
    for (size_t p = 0; p < theirs.pieces(); ++p) result_in->recv(peer, result_slot, theirs.offset(p), theirs.length(p));
    copy_out = context.createUnboundBuffer(theirs.start, theirs.bytes);
    for (size_t p = 0; p < theirs.pieces(); ++p) copy_out->send(peer, copy_slot, theirs.offset(p), theirs.length(p));
  }
  const std::string peer_copy_what = str_cat("peer rank ", peer, "'s copy of this rank's half");
  for (size_t p = 0; p < mine.pieces(); ++p) {
    wait_for_receive(*copy_in, rank, peer, deadline, peer_copy_what);
    char* own = mine.start + mine.offset(p);
    char* other = peer_copy + mine.offset(p);
    // Rank order (b0 op b1) whichever rank owns the half.
    reduce(own, rank == 0 ? own : other, rank == 0 ? other : own, mine.length(p) / element_size);
    result_out->send(peer, result_slot, mine.offset(p), mine.length(p));
  }
  const std::string result_what = str_cat("peer rank ", peer, "'s reduced half");
  for (size_t p = 0; p < theirs.pieces(); ++p) {
    wait_for_receive(*result_in, rank, peer, deadline, result_what);
  }
  for (size_t p = 0; p < theirs.pieces(); ++p) copy_out->waitSend(time_left(deadline));
  for (size_t p = 0; p < mine.pieces(); ++p) result_out->waitSend(time_left(deadline));
}

}  // namespace ringtorch
