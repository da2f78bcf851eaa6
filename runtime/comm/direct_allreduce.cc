#include "runtime/comm/direct_allreduce.h"

#include <gloo/transport/unbound_buffer.h>

#include <memory>
#include <vector>

#include "base/error.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {

char* ScratchBuffer::get(size_t bytes) {
  if (bytes > capacity_) {
    data_.reset(new char[bytes]);  // uninitialised on purpose: every byte is received before use
    capacity_ = bytes;
  }
  return data_.get();
}

void direct_allreduce(gloo::Context& context, void* data, size_t count, size_t element_size,
                      const ReduceFunction& reduce, uint32_t tag, std::chrono::milliseconds timeout,
                      ScratchBuffer& scratch) {
  const int rank = context.rank, size = context.size;
  const size_t bytes = count * element_size;
  if (size == 1 || bytes == 0) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const uint64_t slot = direct_allreduce_slot(tag);
  // Peer p's buffer lands in block p, or p - 1 past this rank (whose data stays in `data`).
  char* received = scratch.get(bytes * (size - 1));
  auto received_block = [&](int peer) { return received + bytes * (peer < rank ? peer : peer - 1); };
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> inbound(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    inbound[peer] = context.createUnboundBuffer(received_block(peer), bytes);
    inbound[peer]->recv(peer, slot);
  }
  auto outbound = context.createUnboundBuffer(data, bytes);
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) outbound->send(peer, slot);
  }
  auto remaining = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
  };
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    try {
      inbound[peer]->waitRecv(remaining());
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      std::rethrow_exception(make_error(read_gloo_failure(e.what()).kind,
                                        str_cat(e.what(), " (waiting for peer rank ", peer, "'s data)"),
                                        FailureSite{rank, peer, ""}));
    }
  }
  for (int sent = 0; sent < size - 1; ++sent) outbound->waitSend(remaining());
  // Rank order on every rank: the accumulator is block 0 until this rank's own turn, then `data`.
  auto block = [&](int r) -> void* { return r == rank ? data : received_block(r); };
  void* accumulator = block(0);
  for (int r = 1; r < size; ++r) {
    void* target = r >= rank ? data : accumulator;
    reduce(target, accumulator, block(r), count);
    accumulator = target;
  }
}

}  // namespace ringtorch
