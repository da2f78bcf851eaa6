#include "runtime/comm/operation_queue.h"

#include <nlohmann/json.hpp>

#include <ringtorch/error.h>
#include <ringtorch/timeline.h>

#include "runtime/comm/tag_space.h"

namespace ringtorch {

OperationQueue::OperationQueue(std::string prefix, std::string group, Executor executor,
                               std::shared_ptr<FlightRecorder> recorder, bool dump_on_failure)
    : prefix_(std::move(prefix)),
      group_(std::move(group)),
      executor_(std::move(executor)),
      recorder_(std::move(recorder)),
      dump_on_failure_(dump_on_failure) {
  worker_ = std::thread(&OperationQueue::worker_loop, this);
}

OperationQueue::~OperationQueue() { stop(); }

void OperationQueue::check_open(const char* op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) throw InvalidArgumentError(str_cat(prefix_, op, " on group '", group_, "' after shutdown()"));
}

std::exception_ptr OperationQueue::broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

OperationQueue::Task OperationQueue::make_task(Operation op, bool starts_now) {
  const char* name = op_type_name(op.call.op);
  if (stopping_) throw InvalidArgumentError(str_cat(prefix_, name, " on group '", group_, "' after shutdown()"));
  const uint32_t sequence = next_sequence_++;
  Task task;
  task.work = std::make_shared<Work>(str_cat(prefix_, name, " #", sequence, " (group ", group_, ", ", op.detail, ")"),
                                     std::move(op.tensors), op.timeout + kWaitGrace);
  task.tag = operation_tag(sequence);
  task.sequence = sequence;
  if (broken_) {
    // Refused at once: counted, not recorded, so that a retry loop never pushes the failure
    // that broke the group out of the recorder.
    if (recorder_) recorder_->refused();
    task.op = std::move(op);
    task.work->finish(broken_);
    return task;
  }
  if (recorder_) {
    const CallSignature& c = op.call;
    const bool typed = c.dtype != c10::ScalarType::Undefined;
    const auto now = starts_now ? FlightRecorder::Clock::time_point{} : FlightRecorder::Clock::now();
    task.record = recorder_->queued(sequence, now, name, op.detail, op.path, op.label, c.count,
                                    typed ? c10::toString(c.dtype) : "",
                                    typed ? c.count * static_cast<int64_t>(c10::elementSize(c.dtype)) : 0);
  }
  task.op = std::move(op);
  return task;
}

std::shared_ptr<Work> OperationQueue::submit(Operation op) {
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Task task = make_task(std::move(op), /*starts_now=*/false);
    work = task.work;
    if (work->is_completed()) return work;  // the group is broken
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  return work;
}

void OperationQueue::run(Operation op) {
  std::shared_ptr<Work> work;
  std::optional<Task> here;  // runs on this thread: nothing is queued ahead of it
  bool wake_worker = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool starts_now = !running_ && queue_.empty();
    Task task = make_task(std::move(op), starts_now);
    work = task.work;
    if (!work->is_completed()) {
      if (starts_now) {
        running_ = true;
        here = std::move(task);
      } else {
        queue_.push_back(std::move(task));
        wake_worker = true;
      }
    }
  }
  if (here) {
    execute(*here);
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
    // Submitted while this one ran, or stop() waiting: the worker saw running_ and slept again.
    wake_worker = !queue_.empty() || stopping_;
  }
  // Only when the worker has something to do: waking it for nothing cost every synchronous call
  // a thread wake-up, which on 2 cores competes with the ranks themselves.
  if (wake_worker) wake_.notify_one();
  work->wait();
}

void OperationQueue::worker_loop() {
  if (Timeline::enabled()) {
    Timeline::name_this_thread(group_ == "default" ? std::string("collectives")
                                                   : str_cat("collectives (", group_, ")"));
  }
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    execute(task);
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }
}

void OperationQueue::execute(Task& task) {
  Outcome outcome;
  if (auto failure = broken()) {
    outcome.error = failure;  // broke while this operation waited in line
    if (recorder_) {
      recorder_->ended(task.record, FlightRecorder::Clock::now(), "the group broke before this operation started");
    }
  } else {
    // One clock read each side, shared by the recorder and the timeline (both steady_clock).
    const bool timed = recorder_ || Timeline::enabled();
    const auto begin = timed ? FlightRecorder::Clock::now() : FlightRecorder::Clock::time_point{};
    if (recorder_) recorder_->started(task.record, begin);
    task.work->mark_started(begin);
    outcome = executor_(task.op, task.tag, *task.work);
    const auto end = timed ? FlightRecorder::Clock::now() : FlightRecorder::Clock::time_point{};
    if (outcome.error) outcome.error = record_failure(task, end, outcome.error);
    if (!outcome.error && recorder_) recorder_->ended(task.record, end, nullptr);
    if (timed && Timeline::enabled()) record_in_timeline(task, begin, end, outcome.error != nullptr);
    if (outcome.error && outcome.breaks_group) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!broken_) broken_ = outcome.error;
    }
    task.work->finish(outcome.error, end);
    return;
  }
  task.work->finish(outcome.error);
}

std::exception_ptr OperationQueue::record_failure(const Task& task, FlightRecorder::Clock::time_point end,
                                                  std::exception_ptr error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (recorder_) recorder_->ended(task.record, end, e.what());
    const bool dump =
        e.kind() == ErrorKind::kTimeout || e.kind() == ErrorKind::kPeerLost || e.kind() == ErrorKind::kMismatch;
    // A cross-host part's failure reaches its hierarchical group, which dumps (once) for both.
    if (!dump || !recorder_ || !dump_on_failure_) return error;
    try {
      const std::string where =
          dump_flight_recorders(str_cat(error_class_name(e.kind()), " in ", op_type_name(task.op.call.op), " #",
                                        task.sequence, " of group ", group_));
      if (where.empty()) return error;
      return make_error(e.kind(),
                        str_cat(e.what(), "\n  flight recorder: ", where, " (read every rank's: ringtrace ",
                                flight_recorder_directory(), ")"),
                        e.site());
    } catch (...) {
      return error;  // the failure as it was, without the dump's place
    }
  } catch (const std::exception& e) {
    if (recorder_) recorder_->ended(task.record, end, e.what());
  } catch (...) {
    if (recorder_) recorder_->ended(task.record, end, "an exception of unknown type");
  }
  return error;
}

void OperationQueue::record_in_timeline(const Task& task, Timeline::Clock::time_point begin,
                                        Timeline::Clock::time_point end, bool failed) const noexcept try {
  nlohmann::json args = {{"sequence", task.sequence},
                         {"group", group_},
                         {"path", task.op.path},
                         {"detail", task.op.detail},
                         {"count", task.op.call.count}};
  if (task.op.call.dtype != c10::ScalarType::Undefined) {
    args["bytes"] = task.op.call.count * static_cast<int64_t>(c10::elementSize(task.op.call.dtype));
  }
  if (!task.op.label.empty()) args["label"] = task.op.label;
  if (failed) args["failed"] = true;
  Timeline::record(op_type_name(task.op.call.op), "collective", begin, end,
                   args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
} catch (...) {
  // Observing never fails the operation (running out of memory here costs a span, not a job).
}

void OperationQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

}  // namespace ringtorch
