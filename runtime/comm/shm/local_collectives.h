// Collectives among the ranks of one host through one shared-memory segment (shared_segment.h),
// without sockets: each rank copies its input into its own slot, the ranks meet at a barrier,
// and each reads the others' slots directly.
//
// allreduce, per chunk of at most slot_bytes: (1) copy in, barrier; (2) rank r reduces slice r
// of the chunk over all slots in local-rank order 0, 1, ..., n-1 (so every rank gets the same
// bits, and integer results equal any other order's) into one of two result areas, barrier;
// (3) everyone copies the whole chunk out. The result areas alternate between chunks, so the
// next chunk's step (2) cannot overwrite what a slower rank is still copying out: two barriers
// per chunk. Between (2) and (3) a callback may replace the slice (the cross-host step of the
// hierarchical all-reduce). broadcast, allgather and reduce_scatter use the same slots.
//
// Waiting: a barrier spins briefly, then sleeps on a futex in the segment, so a slow peer does
// not burn a core. Every wait honours the call's timeout and checks, every 100 ms, whether the
// peers it waits for are still alive (by pid): a peer killed mid-collective is named within
// about 100 ms, with the same error kinds as the TCP path (timed out / lost a peer).
//
// Every rank must make the same calls in the same order (as for every collective); the call
// signatures (call_signature.h) are compared across ranks at each call's first barrier
// (MismatchError, with the first differing rank as the site's peer).
//
// Failures are typed: TimeoutError (a peer alive but not arriving) or PeerLostError (a peer's
// process gone), with the local rank's group rank and, when one peer is to blame, that peer in
// the FailureSite. The process group adds the operation.
//
// Thread-safety: one thread at a time per rank (the process group's executing thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/comm/call_signature.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/shm/shared_segment.h"

namespace ringtorch {

class LocalCollectives {
 public:
  static constexpr size_t kDefaultSlotBytes = size_t{4} << 20;

  // Bytes a segment for `local_size` ranks needs.
  static size_t segment_bytes(int local_size, size_t slot_bytes);
  // The creator's step: writes the header (with `nonce`, which the others check).
  static void initialise(void* segment, int local_size, size_t slot_bytes, uint64_t nonce);

  // `global_ranks[i]`: the group rank of local rank i (for messages). Throws IoError when the
  // segment's header does not carry `nonce` (another segment of the same name: not the same
  // host after all). Registers this process's pid for the liveness checks.
  LocalCollectives(SharedSegment segment, int local_rank, std::vector<int> global_ranks, size_t slot_bytes,
                   uint64_t nonce);

  int local_size() const { return static_cast<int>(global_ranks_.size()); }

  // In place on `count` elements of `element_size` bytes. `cross_host`, when set, is called
  // with this rank's reduced slice of each chunk (pointer, element count) before it is shared.
  void allreduce(void* data, size_t count, size_t element_size, const ReduceFunction& reduce, const CallSignature& call,
                 std::chrono::milliseconds timeout, const std::function<void(void*, size_t)>& cross_host = nullptr);
  void broadcast(void* data, size_t bytes, int root_local_rank, const CallSignature& call,
                 std::chrono::milliseconds timeout);
  // `output` holds local_size() blocks of `bytes`, local rank r's at r.
  void allgather(const void* input, void* output, size_t bytes, const CallSignature& call,
                 std::chrono::milliseconds timeout);
  // `input` holds local_size() blocks of `count` elements; block r, reduced, lands in rank r's output.
  void reduce_scatter(const void* input, void* output, size_t count, size_t element_size, const ReduceFunction& reduce,
                      const CallSignature& call, std::chrono::milliseconds timeout);
  void barrier(std::chrono::milliseconds timeout);

 private:
  struct Layout;
  using Deadline = std::chrono::steady_clock::time_point;
  // Arrives at the next barrier and waits for every local rank; `call` (when given) is
  // published before arriving and compared with the others' after.
  void meet(Deadline deadline, const CallSignature* call = nullptr);
  void check_calls_agree(const CallSignature& mine);
  [[noreturn]] void fail_waiting(uint32_t target, bool timed_out, std::chrono::milliseconds timeout);
  uint8_t* slot(int local_rank) const;
  uint8_t* result_area(uint64_t parity) const;

  SharedSegment segment_;
  const int local_rank_;
  const std::vector<int> global_ranks_;
  const size_t slot_bytes_;
  uint32_t barriers_ = 0;                 // how many barriers this rank has arrived at
  uint64_t chunks_ = 0;                   // all-reduce chunks so far: picks the result area
  uint64_t calls_ = 0;                    // calls published so far (meet() with a call)
  std::chrono::milliseconds timeout_{0};  // the current call's, for messages
};

}  // namespace ringtorch
