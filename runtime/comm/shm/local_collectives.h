// Collectives among the ranks of one host through one shared-memory segment (shared_segment.h),
// without sockets: each rank copies its input into its own area, the ranks meet at a barrier,
// and each reads the others' areas directly.
//
// allreduce, per piece of at most area_bytes: (1) copy in, barrier; (2) the piece's n blocks
// are reduced, each over all areas in local-rank order 0, 1, ..., n-1 (so every rank gets the
// same bits, and integer results equal any other order's, whoever reduces it) into one of two
// result areas; (3) everyone copies the whole piece out once every block is done. In (2) each
// rank claims its own block, then the unclaimed blocks of ranks asleep: a rank that waited at
// the barrier long enough to fall asleep (DDP's early rank, every step) is woken only now, which
// takes far longer than the reduction of a small block, and the rank that arrived last does its block
// instead of waiting for it (ranks awake are left their own: reaching for their blocks costs
// the small calls a cache line each). With a cross-host step (the hierarchical all-reduce: a callback
// replaces rank r's block with its all-reduce across hosts, between (2) and (3)) rank r reduces
// block r itself and a second barrier ends (2). The result areas alternate between pieces, so
// the next piece's step (2) cannot overwrite what a slower rank is still copying out.
// broadcast, allgather and reduce_scatter use the same areas.
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
#include "runtime/comm/sizes.h"

namespace ringtorch {

class LocalCollectives {
 public:
  // Bytes a segment for `local_size` ranks needs.
  static size_t segment_bytes(int local_size, size_t area_bytes);
  // The creator's step: writes the header (with `nonce`, which the others check).
  static void initialise(void* segment, int local_size, size_t area_bytes, uint64_t nonce);

  // `global_ranks[i]`: the group rank of local rank i (for messages). Throws IoError when the
  // segment's header does not carry `nonce` (another segment of the same name: not the same
  // host after all). Registers this process's pid for the liveness checks.
  LocalCollectives(SharedSegment segment, int local_rank, std::vector<int> global_ranks, size_t area_bytes,
                   uint64_t nonce);

  int local_size() const { return static_cast<int>(global_ranks_.size()); }

  // In place on `count` elements of `element_size` bytes. `cross_host`, when set, is called
  // with this rank's reduced block of each piece (pointer, element count) before it is shared.
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
  // Spins briefly, then sleeps on the segment's bell until `done`; past the deadline, or when a
  // rank `waited_for` is gone, fails naming those ranks as "alive but not <what>" / exited.
  // (Templates, defined in the .cc that alone calls them: a std::function here would allocate
  // on every call of the small-message path.)
  template <typename Done, typename WaitedFor>
  void wait_until(const Done& done, Deadline deadline, const WaitedFor& waited_for, const char* what);
  void ring_bell();  // wakes every sleeper: something they may wait for changed
  // All-reduce step (2) without a cross-host step: claims and reduces blocks (the rank's own
  // first), then waits until every block of all-reduce piece number `piece` is done.
  template <typename ReduceBlock>
  void reduce_claimed_blocks(uint64_t piece, const ReduceBlock& reduce_block, Deadline deadline);
  bool claim_block(int block, uint64_t piece);  // true: this rank is the one to reduce it
  void check_calls_agree(const CallSignature& mine);
  [[noreturn]] void fail_waiting(const std::function<bool(int)>& waited_for, const char* what, bool timed_out,
                                 std::chrono::milliseconds timeout);
  uint8_t* area(int local_rank) const;
  uint8_t* result_area(uint64_t parity) const;

  SharedSegment segment_;
  const int local_rank_;
  const std::vector<int> global_ranks_;
  const size_t area_bytes_;
  uint32_t barriers_ = 0;                 // how many barriers this rank has arrived at
  uint64_t pieces_ = 0;                   // all-reduce pieces so far: numbers them, picks the result area
  uint64_t calls_ = 0;                    // calls published so far (meet() with a call)
  std::chrono::milliseconds timeout_{0};  // the current call's, for messages
};

}  // namespace ringtorch
