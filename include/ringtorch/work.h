// Work: the handle of one asynchronous operation (c10d's Work, gloo's one-pending-op rule).
//
// The process group creates it when an operation is submitted (checks happen on the caller's
// thread before that); whichever thread runs the operation completes it: the group's worker, a
// synchronous caller (operation_queue.h), or, for send/recv, the thread inside wait(). wait()
// rethrows the stored exception with its type (TimeoutError, PeerLostError, ...). A Work keeps
// its tensors alive until it is destroyed, so a caller may drop its own references right after
// submitting. Only the process group completes a Work (finish() and friends are private).
//
// Thread-safety: every method may be called from any thread. description_, tensors_ and
// default_timeout_ are constant; the rest is guarded by mutex_.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ringtorch {

class Work {
 public:
  Work(std::string description, std::vector<at::Tensor> tensors, std::chrono::milliseconds default_timeout);

  bool is_completed() const;
  // Blocks until the operation completes or `timeout` passes (default: the operation's timeout
  // plus OperationQueue::kWaitGrace for collectives, the call's for send/recv); rethrows
  // the operation's failure. A timeout here throws TimeoutError and leaves the operation running.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // "[rank 0/2] allreduce #3 (group default, 4.0 KiB float32 sum, direct)"
  const std::string& description() const { return description_; }
  // When the operation began executing and when it completed (steady clock; default-constructed
  // until then). For overlap measurements.
  std::chrono::steady_clock::time_point started_at() const;
  std::chrono::steady_clock::time_point completed_at() const;

 private:
  friend class OperationQueue;  // completes collectives
  friend class ProcessGroup;    // completes send/recv
  // `at`: when (the caller's own clock read; default: now).
  void mark_started(std::chrono::steady_clock::time_point at = {});
  // Marks the operation done, with its failure if any.
  void finish(std::exception_ptr error = nullptr, std::chrono::steady_clock::time_point at = {});
  // For operations that complete on the waiting thread (send/recv): wait() runs `waiter` once
  // with its timeout; the waiter throws on failure.
  void set_waiter(std::function<void(std::chrono::milliseconds)> waiter);

  const std::string description_;
  const std::vector<at::Tensor> tensors_;  // kept alive until the Work is destroyed
  const std::chrono::milliseconds default_timeout_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;                                                // guarded by mutex_
  std::chrono::steady_clock::time_point started_at_, completed_at_;  // guarded by mutex_
  std::exception_ptr error_;                                         // guarded by mutex_
  std::function<void(std::chrono::milliseconds)> waiter_;            // guarded by mutex_; run by the first wait()
};

}  // namespace ringtorch
