// One CUDA buffer's trip through pinned host memory for a collective, in pieces, on a side
// stream, so that copying overlaps the host-side work:
//
//   submitting thread          side stream (per device)             executing thread
//   ----------------------     ---------------------------------    -------------------------
//   StagedTransfer(...)    ->  wait for the caller's stream (event)
//                              copy piece 0 to host, event 0   ->   wait_in(0); reduce piece 0
//                              copy piece 1 to host, event 1        copy_out(0)  (queued)
//                              ...                                  wait_in(1); reduce piece 1
//                              copy piece 0 back (+ scale)          copy_out(1)  ...
//                              ...                                  finish(): the caller's stream
//                                                                   waits on the last copy, and
//                                                                   this thread waits for it too
//
// No device-wide synchronisation anywhere: the side stream waits for the caller's stream through
// an event, the caller's stream waits for the side stream through another, and host waits are on
// single events, polled with a deadline (a copy that never ends is reported, not waited for).
//
// Streams are passed as opaque pointers (cudaStream_t), so that this header needs no CUDA
// headers; nullptr is the legacy default stream.
//
// Thread-safety: built on one thread, then used by one other thread at a time (the executing
// thread). Ownership: holds a pinned block from PinnedPool::process_pool() until destroyed; the
// device buffer must stay allocated until finish() returns or the object is destroyed (the
// destructor waits for copies still queued, so an error path never frees memory in use).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace ringtorch {
namespace cuda {

struct ByteRange {
  size_t offset = 0;
  size_t bytes = 0;
};

class StagedTransfer {
 public:
  // Queues the copies of every piece of `device_data` (on `device`) to host memory when
  // `copy_in`; otherwise the host buffer starts with undefined contents.
  StagedTransfer(int device, void* device_data, std::vector<ByteRange> pieces, void* caller_stream, bool copy_in);
  ~StagedTransfer();
  StagedTransfer(const StagedTransfer&) = delete;
  StagedTransfer& operator=(const StagedTransfer&) = delete;

  size_t pieces() const;
  void* host() const;  // the whole buffer; piece k at host() + pieces[k].offset

  // Blocks until piece k is in host memory. Throws TimeoutError past `deadline`, IoError when
  // the copy failed.
  void wait_in(size_t k, std::chrono::steady_clock::time_point deadline) const;
  // Queues piece k's copy back to the device; then, when `scale` != 1, multiplies that piece on
  // the device by `scale` with cuBLAS, which reads it as float32 (pass 1 for any other dtype).
  void copy_out(size_t k, float scale = 1.0f);
  // Orders the caller's stream after every queued copy and waits on the host until they are
  // done. Call once, after the last copy_out.
  void finish(std::chrono::steady_clock::time_point deadline);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The stream ringtorch copies on for `device`: created on first use, non-blocking with respect
// to the legacy default stream, never destroyed.
void* side_stream(int device);

}  // namespace cuda
}  // namespace ringtorch
