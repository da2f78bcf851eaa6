// Work: the handle of one asynchronous collective (c10d's Work, gloo's one-pending-op rule).
//
// The caller's thread creates it (tag and checks happen there), the process group's worker
// thread completes it. wait() rethrows the stored exception with its type (TimeoutError,
// PeerLostError, ...). A Work keeps its tensors alive until it is destroyed, so a caller may
// drop its own references right after submitting.
//
// Thread-safety: every method may be called from any thread. done_ and error_ are guarded by
// mutex_; the rest is constant after construction.
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
  // Blocks until the operation completes or `timeout` (default: the group's) passes; rethrows
  // the operation's failure. A timeout here throws TimeoutError and leaves the operation running.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // "[rank 0/2] allreduce #3 (group default, 4 KiB float32)"
  const std::string& description() const { return description_; }
  // When the operation began executing and when it completed (steady clock; default-constructed
  // until then). For overlap measurements.
  std::chrono::steady_clock::time_point started_at() const;
  std::chrono::steady_clock::time_point completed_at() const;
  void mark_started();

  // Worker side: marks the operation done, with its failure if any.
  void finish(std::exception_ptr error = nullptr);
  // For operations that complete on the waiting thread (send/recv): wait() runs `waiter` once
  // with its timeout; the waiter throws on failure.
  void set_waiter(std::function<void(std::chrono::milliseconds)> waiter);

 private:
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
