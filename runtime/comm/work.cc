#include <ringtorch/error.h>
#include <ringtorch/work.h>

namespace ringtorch {

Work::Work(std::string description, std::vector<at::Tensor> tensors, std::chrono::milliseconds default_timeout)
    : description_(std::move(description)), tensors_(std::move(tensors)), default_timeout_(default_timeout) {}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void Work::set_waiter(std::function<void(std::chrono::milliseconds)> waiter) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiter_ = std::move(waiter);
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  const auto limit = timeout.value_or(default_timeout_);
  std::function<void(std::chrono::milliseconds)> waiter;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_ && waiter_) waiter = std::move(waiter_);
    waiter_ = nullptr;
  }
  if (waiter) {
    try {
      waiter(limit);
      finish();
    } catch (...) {
      finish(std::current_exception());
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_cv_.wait_for(lock, limit, [&] { return done_; })) {
    throw TimeoutError(str_cat(description_, ": not complete after ", format_duration_ms(limit.count()),
                               " (Work::wait); the operation goes on; raise the wait timeout, RINGTORCH_TIMEOUT or "
                               "the group's timeout"));
  }
  if (error_) std::rethrow_exception(error_);
}

void Work::mark_started(std::chrono::steady_clock::time_point at) {
  if (at == std::chrono::steady_clock::time_point{}) at = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  started_at_ = at;
}

std::chrono::steady_clock::time_point Work::started_at() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_at_;
}

std::chrono::steady_clock::time_point Work::completed_at() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_at_;
}

void Work::finish(std::exception_ptr error, std::chrono::steady_clock::time_point at) {
  if (at == std::chrono::steady_clock::time_point{}) at = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    completed_at_ = at;
    if (started_at_ == std::chrono::steady_clock::time_point()) started_at_ = completed_at_;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

}  // namespace ringtorch
