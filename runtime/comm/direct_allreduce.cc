#include "runtime/comm/direct_allreduce.h"

#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <memory>
#include <vector>

#include <ringtorch/error.h>

#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {
namespace {

// Every rank reduces in rank order, so that all get bit-identical results: the accumulator is
// block 0 until this rank's own turn, then `data`. `block(r)` is rank r's buffer (this rank's is
// `data`); blocks of other ranks are scratch and may be overwritten.
template <typename BlockOf>
void reduce_in_rank_order(int rank, int size, void* data, size_t count, const ReduceFunction& reduce,
                          const BlockOf& block) {
  void* accumulator = block(0);
  for (int r = 1; r < size; ++r) {
    void* target = r >= rank ? data : accumulator;
    reduce(target, accumulator, block(r), count);
    accumulator = target;
  }
}

}  // namespace

void direct_allreduce(gloo::Context& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, uint32_t tag, std::chrono::milliseconds timeout,
                      ScratchBuffer& scratch, const FingerprintCheck* check) {
  const int rank = context.rank, size = context.size;
  const size_t bytes = count * element_size;
  if (size == 1) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (check) {
    const bool inline_data = bytes <= kFingerprintInlineBytes;
    check->exchange->exchange(context, check->fingerprint, data, inline_data ? bytes : 0, deadline);
    if (inline_data) {
      if (bytes == 0) return;
      reduce_in_rank_order(rank, size, data, count, reduce,
                           [&](int r) -> void* { return r == rank ? data : check->exchange->inline_data_of(r); });
      return;
    }
  }
  if (bytes == 0) return;
  const uint64_t slot = direct_allreduce_slot(tag);
  // Peer p's buffer lands in block p, or p - 1 past this rank (whose data stays in `data`).
  char* received = scratch.get(bytes * (size - 1));
  auto received_block = [&](int peer) { return received + bytes * (peer < rank ? peer : peer - 1); };
  // Note [Pipelined direct all-reduce]: between 2 ranks a large buffer goes in pieces, all
  // posted at once, and each piece is reduced as soon as it has arrived and this rank's copy of
  // it has been sent, while the later pieces are still on the wire. One pair carries them in
  // order, so the n-th completed receive and send are piece n. (More ranks: one piece; their
  // completions across pairs come in any order, and the direct path is for small buffers there.)
  const size_t piece_bytes =
      size == 2 && bytes >= 2 * kDirectPieceBytes ? kDirectPieceBytes / element_size * element_size : bytes;
  const size_t pieces = (bytes + piece_bytes - 1) / piece_bytes;
  auto piece_offset = [&](size_t p) { return p * piece_bytes; };
  auto piece_length = [&](size_t p) { return std::min(piece_bytes, bytes - p * piece_bytes); };
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> inbound(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    inbound[peer] = context.createUnboundBuffer(received_block(peer), bytes);
    for (size_t p = 0; p < pieces; ++p) inbound[peer]->recv(peer, slot, piece_offset(p), piece_length(p));
  }
  auto outbound = context.createUnboundBuffer(data, bytes);
  for (size_t p = 0; p < pieces; ++p) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) outbound->send(peer, slot, piece_offset(p), piece_length(p));
    }
  }
  for (size_t p = 0; p < pieces; ++p) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) wait_for_receive(*inbound[peer], rank, peer, deadline, str_cat("peer rank ", peer, "'s data"));
    }
    // This rank's piece is about to be overwritten by the reduction: it must have left.
    for (int sent = 0; sent < size - 1; ++sent) outbound->waitSend(time_left(deadline));
    const size_t offset = piece_offset(p), length = piece_length(p);
    char* mine = static_cast<char*>(data) + offset;
    reduce_in_rank_order(rank, size, mine, length / element_size, reduce,
                         [&](int r) -> void* { return r == rank ? mine : received_block(r) + offset; });
  }
}

}  // namespace ringtorch
